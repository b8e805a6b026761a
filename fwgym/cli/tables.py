"""Tables on the terminal: aligned with ``rich``, plain Markdown where the output is a file or a pipe.

Every command that prints a table (``fwgym leaderboard``, ``evaluate``, ``cases``, ``list``) takes
``--format``; its default :data:`AUTO` is :data:`TABLE` when stdout is a terminal and
:data:`MARKDOWN` otherwise, so ``fwgym leaderboard RUN > board.md`` writes Markdown and the same
command on a terminal shows aligned columns. The terminal view never uses colour when stdout is not
a terminal or the ``NO_COLOR`` environment variable is set (https://no-color.org; not even bold),
and cell text is never read as rich markup (``[95% CI]`` prints as it is).
"""
from __future__ import annotations

import os
import sys
from typing import TextIO

from fwgym.evaluation.leaderboard import Table, markdown_table

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


def _rich_table(table: Table):
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text

    t = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold",
                  title=Text(table.title.rstrip(":")) if table.title else None, title_justify="left",
                  title_style="bold")
    for name, align in zip(table.columns, table.align):
        t.add_column(Text(name), justify="right" if align == "r" else "left", no_wrap=align == "r")
    for row in table.rows:
        t.add_row(*(Text(c) for c in row))
    return t


def render_table(table: Table, out: TextIO | None = None) -> str:
    """``table`` as aligned text (rich, no colour codes), as the terminal view prints it to ``out``
    (default stdout): at the terminal's width on a terminal, else at the table's natural width (no
    wrapping in a file or pipe)."""
    from rich.console import Console

    out = sys.stdout if out is None else out
    rt = _rich_table(table)
    probe = Console(width=100_000, no_color=True, color_system=None, highlight=False)
    natural = probe.measure(rt).maximum
    width = None if is_terminal(out) else max(natural, 20)
    console = Console(width=width, no_color=True, color_system=None, highlight=False, record=True,
                      file=_Null())
    console.print(rt)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()).strip("\n")


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def print_table(table: Table, fmt: str = AUTO, out: TextIO | None = None) -> None:
    """Print ``table`` to ``out`` (default stdout) as :data:`TABLE` (rich: aligned; bold headers only on a
    terminal without ``NO_COLOR``, no escape code otherwise) or :data:`MARKDOWN` (``fmt`` :data:`AUTO`: :func:`resolve_format`).

    Raises:
        ValueError: another format.
    """
    out = sys.stdout if out is None else out
    fmt = resolve_format(fmt, out)
    if fmt == MARKDOWN:
        print(markdown_table(table), file=out)
    elif fmt == TABLE:
        if is_terminal(out):
            from rich.console import Console

            plain = os.environ.get("NO_COLOR", "") != ""  # https://no-color.org: then no escape codes at all
            Console(file=out, highlight=False, color_system=None if plain else "auto").print(_rich_table(table))
        else:
            print(render_table(table, out), file=out)
    else:
        raise ValueError(f"unknown table format {fmt!r}; expected {TABLE!r} or {MARKDOWN!r}")


__all__ = ["AUTO", "TABLE", "MARKDOWN", "is_terminal", "resolve_format", "render_table", "print_table"]
