"""The CLI reference as Markdown, generated from the argument parser itself (:func:`fwgym.cli.build_parser`).

The docs site renders it on the page ``docs/cli.md`` (``docs/hooks.py`` replaces the page's marker at build time),
so the reference is always the parser's: every subcommand, its description, its argument groups and every option
with its metavar, default and help. ``python -m fwgym.cli.reference`` prints it.
"""
from __future__ import annotations

import argparse
from typing import Iterator

__all__ = ["subcommands", "option_rows", "cli_reference"]


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command of ``parser`` depth first, as ``("fwgym evaluate", parser)`` pairs (nested
    subcommands such as ``fwgym forecasts build`` included)."""
    name = prefix or parser.prog
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from subcommands(sub, f"{name} {sub_name}")


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    if action.nargs == 0:
        return ", ".join(f"`{o}`" for o in action.option_strings)
    metavar = action.metavar or (action.dest.upper() if not action.choices else "{" + ",".join(map(str, action.choices)) + "}")
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return ", ".join(f"`{o} {metavar}`" for o in action.option_strings)


def option_rows(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, str]]:
    """``(group title, spelling, help)`` of every argument of ``parser`` except ``-h`` and subcommand
    selectors, in the order ``--help`` shows them (help text with argparse's ``%(default)s`` expanded)."""
    for group in parser._action_groups:
        for action in group._group_actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            text = action.help or ""
            if text == argparse.SUPPRESS:
                continue
            if "%" in text:
                try:
                    text = text % {**vars(action), "prog": parser.prog}
                except (KeyError, TypeError, ValueError):
                    pass
            yield group.title or "", _spelling(action), " ".join(text.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown reference of every subcommand of ``parser`` (default: fwgym's), one section each with its
    usage line, description and a table per argument group."""
    if parser is None:
        from fwgym.cli import build_parser

        parser = build_parser()
    out: list[str] = []
    for name, p in subcommands(parser):
        if name == parser.prog:
            continue
        level = "##" if name.count(" ") == 1 else "###"
        out += [f"{level} `{name}`", ""]
        desc = p.description or ""
        if desc:
            out += [" ".join(desc.split()), ""]
        usage = " ".join(p.format_usage().split())
        out += ["```text", usage.removeprefix("usage: "), "```", ""]
        rows = list(option_rows(p))
        for title in dict.fromkeys(t for t, _, _ in rows):
            out += [f"**{title}**", "", "| argument | meaning |", "|---|---|"]
            out += [f"| {_cell(s)} | {_cell(h)} |" for t, s, h in rows if t == title]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(cli_reference(), end="")
