"""The forms of a table of formatted cells (:class:`Table`): GitHub-flavoured Markdown, a booktabs LaTeX
``tabular``, and CSV of row dicts. The leaderboard (:mod:`fwgym.evaluation.leaderboard`), the comparison
(:mod:`fwgym.evaluation.compare`) and the resource profile (:mod:`fwgym.evaluation.profile`) build their
tables as :class:`Table` and write them with these functions; the command line prints them aligned
(:mod:`fwgym.cli.tables`)."""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["Table", "markdown_table", "latex_escape", "latex_table", "format_csv", "write_csv"]


@dataclass(frozen=True)
class Table:
    """A table of formatted cells, rendered as Markdown (:func:`markdown_table`), LaTeX
    (:func:`latex_table`) or, by the command line, as an aligned terminal table.

    Attributes:
        title: a caption line (``None``: none).
        columns: the header cells.
        align: ``"l"`` or ``"r"`` per column.
        rows: the body, one tuple of cell strings per row (as many cells as ``columns``).
        short: shorter header cells for narrow outputs (a terminal; ``None``: ``columns``), e.g.
            ``"ΔS [95% CI]"`` for ``"ΔS vs hour_of_day_empirical [95% CI]"`` when the header line names
            the reference.
        priority: per column, the order in which a narrow output leaves columns out (higher first; 0:
            never); ``None``: every column is kept (a narrow output splits the table instead).
    """

    title: str | None
    columns: tuple[str, ...]
    align: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    short: tuple[str, ...] | None = None
    priority: tuple[int, ...] | None = None

    def select(self, keep: Sequence[int], title: str | None = None) -> "Table":
        """This table with only the columns at the indices ``keep`` (in that order)."""
        def pick(t: tuple) -> tuple:
            return tuple(t[i] for i in keep)

        return Table(self.title if title is None else title, pick(self.columns), pick(self.align),
                     tuple(pick(r) for r in self.rows), None if self.short is None else pick(self.short),
                     None if self.priority is None else pick(self.priority))


def _md_cell(s: str) -> str:
    return s.replace("|", r"\|")


def markdown_table(table: Table) -> str:
    """A :class:`Table` as a GitHub-flavoured Markdown table (``|`` in cells escaped; the title, if any,
    and a blank line above it)."""
    sep = {"l": "---", "r": "---:"}

    def line(cells) -> str:
        return "|" + "|".join(f" {_md_cell(c)} " if c else " " for c in cells) + "|"

    lines = [line(table.columns), "|" + "|".join(sep[a] for a in table.align) + "|"]
    lines += [line(row) for row in table.rows]
    return "\n".join(([table.title, ""] if table.title else []) + lines)


#: LaTeX's special characters in text mode and what stands for each
_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_SIGNED = re.compile(r"(?<![\w.])([+\-])(\d[\d,]*(?:\.\d+)?)")


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped for text mode (``_`` -> ``\\_``, ...), the Greek
    and operator symbols of the column names in math mode (``Δ`` -> ``$\\Delta$``, ``σ``, ``−``, ``·``),
    and signed numbers (``+0.0123``, ``-1.5``) in math mode, so their signs print as plus and minus."""
    out = "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)
    out = _SIGNED.sub(lambda m: f"${m.group(1)}{m.group(2).replace(',', '{,}')}$", out)
    for sym, tex in (("Δ", r"$\Delta$"), ("σ", r"$\sigma$"), ("−", "$-$"), ("·", r"$\cdot$")):
        out = out.replace(sym, tex)
    return out


#: header cells set in math mode by :func:`latex_table`
_LATEX_HEADS = {"S": "$S$", "R": "$R$", "ΔS [95% CI]": r"$\Delta S$ [95\% CI]"}


def latex_table(table: Table, comment: str | None = None) -> str:
    """A :class:`Table` as a booktabs ``tabular`` (``\\toprule``, ``\\midrule``, ``\\bottomrule``) that a
    paper can ``\\input`` inside its own ``table`` float (caption and label are the paper's); needs
    ``\\usepackage{booktabs}``. ``comment``: ``%`` lines above the table (e.g. what it shows)."""
    lines = [f"% {c}" for c in (comment.splitlines() if comment else [])]
    lines.append(r"% needs \usepackage{booktabs}")
    lines.append(r"\begin{tabular}{" + "".join(table.align) + "}")
    lines.append(r"\toprule")
    lines.append(" & ".join(_LATEX_HEADS.get(c) or latex_escape(c) for c in table.columns) + r" \\")
    lines.append(r"\midrule")
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in table.rows]
    lines.append(r"\bottomrule")
    lines.append(r"\end{tabular}")
    return "\n".join(lines)


def _csv_cell(v):
    return ("true" if v else "false") if isinstance(v, bool) else v


def format_csv(rows: Sequence[Mapping]) -> str:
    """Rows (dicts) as CSV text (RFC 4180: ``\r\n`` line ends; header = the union of row keys,
    first row's order first; ``None`` as an empty cell; booleans as ``true`` / ``false``)."""
    fields = list(rows[0]) if rows else ["policy"]
    for r in rows:
        fields += [k for k in r if k not in fields]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows({k: _csv_cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def write_csv(rows: Sequence[Mapping], path: str | Path) -> Path:
    """Write Rows (dicts) as CSV (:func:`format_csv`) to ``path`` (parent folders created)."""
    p = Path(path)
    if p.parent != Path(""):
        p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", newline="") as fh:
        fh.write(format_csv(rows))
    return p
