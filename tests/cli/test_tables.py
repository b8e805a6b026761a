"""Terminal tables (fwgym.cli.tables): aligned columns with rich, no colour off a terminal or with NO_COLOR,
cell text never read as markup, Markdown where stdout is a file or a pipe."""
import io
import re

from fwgym.cli.tables import MARKDOWN, TABLE, print_table, render_table, resolve_format
from fwgym.evaluation.leaderboard import Table

ANSI = re.compile(r"\x1b\[")

TABLE_ = Table(None, ("policy", "S", "ΔS vs ref [95% CI]"), ("l", "r", "r"),
               (("hour_of_day_empirical", "0.4798", "(reference)"),
                ("a", "12.1234", "+0.3506 [+0.2884, +0.4128]"),
                ("[bold]not markup[/bold]", "0.1", "")))


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_columns_align_at_the_natural_width_off_a_terminal():
    text = render_table(TABLE_, io.StringIO())
    lines = text.splitlines()
    assert lines[0].split() == ["policy", "S", "ΔS", "vs", "ref", "[95%", "CI]"]
    body = [ln for ln in lines[2:]]
    assert [ln.split()[0] for ln in body] == ["hour_of_day_empirical", "a", "[bold]not"]
    # right-aligned numbers: the S column ends at the same character position in every row and the header
    ends = {ln.index(s) + len(s) for ln, s in zip(body, ("0.4798", "12.1234", "0.1"))}
    assert len(ends) == 1 and lines[0].index("S ") + 1 == ends.pop()
    assert "+0.3506 [+0.2884, +0.4128]" in text and "[bold]not markup[/bold]" in text  # not read as markup
    assert not ANSI.search(text) and max(map(len, lines)) < 100  # no wrapping: one line per row


def test_auto_format_is_markdown_off_a_terminal_and_a_table_on_one(monkeypatch):
    assert resolve_format("auto", io.StringIO()) == MARKDOWN and resolve_format("auto", _Tty()) == TABLE
    assert resolve_format("markdown", _Tty()) == MARKDOWN
    out = io.StringIO()
    print_table(TABLE_, "auto", out)
    assert out.getvalue().startswith("| policy | S | ΔS vs ref [95% CI] |\n|---|---:|---:|\n")
    assert "| [bold]not markup[/bold] | 0.1 | |" in out.getvalue()


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    tty = _Tty()
    print_table(TABLE_, TABLE, tty)
    assert ANSI.search(tty.getvalue())  # bold headers on a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    print_table(TABLE_, TABLE, tty)
    assert not ANSI.search(tty.getvalue()) and "hour_of_day_empirical" in tty.getvalue()
    monkeypatch.delenv("NO_COLOR")
    plain = io.StringIO()
    print_table(TABLE_, TABLE, plain)  # forced table format into a file: aligned, no colour
    assert not ANSI.search(plain.getvalue()) and plain.getvalue().rstrip("\n") == render_table(TABLE_, plain)
