"""Tables on the terminal: aligned with ``rich`` and fitted to the width, plain Markdown where the output
is a file or a pipe.

Every command that prints a table (``fwgym leaderboard``, ``evaluate``, ``compare``, ``profile``,
``cases``, ``list``) takes ``--format``; its default :data:`AUTO` is :data:`TABLE` when stdout is a
terminal and :data:`MARKDOWN` otherwise, so ``fwgym leaderboard RUN > board.md`` writes Markdown and the
same command on a terminal shows aligned columns. The terminal view never uses colour when stdout is
not a terminal or the ``NO_COLOR`` environment variable is set (https://no-color.org; not even bold),
and cell text is never read as rich markup (``[95% CI]`` prints as it is).

Width (:func:`output_width`): the terminal's width on a terminal, else ``$COLUMNS`` when set, else none
(a file or pipe gets the natural width). A table wider than that is fitted (:func:`fit_table`), never
truncated: no cell is cut or shortened with ``…``. A table with column priorities
(:attr:`fwgym.evaluation.formats.Table.priority`) leaves its least important columns out, and the
caller says which (``--wide`` shows them all); a table without (the breakdowns) wraps its headers at
``-`` and ``_`` and splits into consecutive tables that repeat the first column.
"""
from __future__ import annotations

import os
import shutil
import sys
from typing import TextIO

from fwgym.evaluation.formats import Table, markdown_table

AUTO, TABLE, MARKDOWN = "auto", "table", "markdown"


def is_terminal(out: TextIO | None = None) -> bool:
    """Whether ``out`` (default stdout) is an interactive terminal."""
    out = sys.stdout if out is None else out
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def resolve_format(fmt: str, out: TextIO | None = None) -> str:
    """``fmt``, with :data:`AUTO` made :data:`TABLE` on a terminal and :data:`MARKDOWN` elsewhere."""
    if fmt != AUTO:
        return fmt
    return TABLE if is_terminal(out) else MARKDOWN


def output_width(out: TextIO | None = None, wide: bool = False) -> int | None:
    """The width tables are fitted to: ``None`` with ``wide``; the terminal's columns on a terminal
    (``shutil.get_terminal_size``, which honours ``$COLUMNS``); ``$COLUMNS`` (an integer >= 20) in a file or
    pipe; else ``None`` (the natural width)."""
    if wide:
        return None
    if is_terminal(out):
        return max(shutil.get_terminal_size().columns, 20)
    try:
        cols = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return cols if cols >= 20 else None


def _rich_table(table: Table, fold_first: bool = False):
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    t = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold",
                  title=Text(table.title.rstrip(":")) if table.title else None, title_justify="left",
                  title_style="bold")
    for k, (name, align) in enumerate(zip(table.columns, table.align)):
        fold = fold_first and k == 0
        t.add_column(Text(name), justify="right" if align == "r" else "left", no_wrap=not fold,
                     overflow="fold" if fold else "ellipsis")
    for row in table.rows:
        t.add_row(*(Text(c) for c in row))
    return t


def natural_width(table: Table) -> int:
    """The width (characters) of ``table`` printed without any limit."""
    from rich.console import Console

    probe = Console(width=100_000, no_color=True, color_system=None, highlight=False)
    return int(probe.measure(_rich_table(table)).maximum)


def _wrap_header(text: str, width: int) -> str:
    """A header broken after ``-`` or ``_`` into lines of at most ``width`` characters where it can be
    (``electricity-february`` at 8 -> ``electricity-`` / ``february``); parts are never cut."""
    parts, cur = [], ""
    for ch in text:
        cur += ch
        if ch in "-_":
            parts.append(cur)
            cur = ""
    if cur:
        parts.append(cur)
    lines = [""]
    for part in parts:
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append(part)
        else:
            lines[-1] += part
    return "\n".join(lines)


def fit_table(table: Table, width: int | None) -> tuple[list[Table], list[str]]:
    """``table`` fitted to ``width`` characters (``None``: as it is).

    With :attr:`Table.priority`: the short headers (:attr:`Table.short`), then columns left out, the
    highest priority number first (never priority 0), until the table fits. Without: headers wrapped at
    ``-`` and ``_``, then the columns after the first split over consecutive tables that each repeat the
    first column. If the first columns alone are wider than ``width``, the first column folds onto
    several lines (its text is never cut).

    Returns:
        ``(tables, left_out)``: the tables to print in order and the (full) headers of the columns left out.
    """
    if width is None or natural_width(table) <= width:
        return [table], []
    if table.priority is not None:
        prio = table.priority
        t = Table(table.title, table.short or table.columns, table.align, table.rows, None, prio)
        keep = list(range(len(t.columns)))
        left: list[str] = []
        while natural_width(t.select(keep)) > width:
            droppable = [i for i in keep if prio[i] > 0]
            if not droppable:
                break
            worst = max(droppable, key=lambda i: (prio[i], i))
            keep.remove(worst)
            left.append(table.columns[worst])
        return [t.select(keep)], left
    cells = [max((len(r[k]) for r in table.rows), default=1) for k in range(len(table.columns))]
    t = Table(table.title, tuple(_wrap_header(c, cells[k]) if k else c
                                 for k, c in enumerate(table.short or table.columns)), table.align, table.rows)
    if natural_width(t) <= width:
        return [t], []
    tables: list[Table] = []
    chunk = [0]
    for i in range(1, len(t.columns)):
        if len(chunk) > 1 and natural_width(t.select(chunk + [i])) > width:
            tables.append(t.select(chunk, title=t.title if not tables else None))
            chunk = [0]
        chunk.append(i)
    tables.append(t.select(chunk, title=t.title if not tables else None))
    return tables, []


def render_table(table: Table, out: TextIO | None = None, width: int | None = None) -> str:
    """``table`` as aligned text (rich, no colour codes) at ``width`` characters (``None``: its natural
    width, no wrapping). A table still wider than ``width`` (only when its first columns alone are)
    folds its first column."""
    from rich.console import Console

    natural = natural_width(table)
    fold = width is not None and natural > width
    console = Console(width=width if fold else max(natural, 20), no_color=True, color_system=None,
                      highlight=False, record=True, file=_Null())
    console.print(_rich_table(table, fold_first=fold))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()).strip("\n")


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def print_table(table: Table, fmt: str = AUTO, out: TextIO | None = None, width: int | str | None = AUTO) -> list[str]:
    """Print ``table`` to ``out`` (default stdout) as :data:`TABLE` (rich: aligned, fitted to ``width``
    by :func:`fit_table`, default :func:`output_width`; bold headers only on a terminal without
    ``NO_COLOR``, no escape code otherwise) or :data:`MARKDOWN` (``fmt`` :data:`AUTO`: :func:`resolve_format`).

    Returns:
        the headers of the columns left out to fit ``width`` (``[]``: none).

    Raises:
        ValueError: another format.
    """
    out = sys.stdout if out is None else out
    fmt = resolve_format(fmt, out)
    if fmt == MARKDOWN:
        print(markdown_table(table), file=out)
        return []
    if fmt != TABLE:
        raise ValueError(f"unknown table format {fmt!r}; expected {TABLE!r} or {MARKDOWN!r}")
    if width == AUTO:
        width = output_width(out)
    tables, left = fit_table(table, width)
    for k, t in enumerate(tables):
        if k:
            print(file=out)
        if is_terminal(out):
            from rich.console import Console

            plain = os.environ.get("NO_COLOR", "") != ""  # https://no-color.org: then no escape codes at all
            fold = isinstance(width, int) and natural_width(t) > width
            Console(file=out, highlight=False, color_system=None if plain else "auto",
                    width=width).print(_rich_table(t, fold_first=fold))
        else:
            print(render_table(t, out, width), file=out)
    return left


def left_out_note(left: list[str], width: int | None) -> str | None:
    """The line that says which columns a narrow table left out (``None``: none)."""
    if not left:
        return None
    import textwrap

    text = f"(left out to fit {width} columns: {', '.join(left)}; --wide shows every column)"
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)) if width else text


__all__ = ["AUTO", "TABLE", "MARKDOWN", "is_terminal", "resolve_format", "output_width", "natural_width", "fit_table",
           "render_table", "print_table", "left_out_note"]
