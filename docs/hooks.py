"""mkdocs hooks: the CLI reference page is generated from fwgym's argument parser at build time."""
from __future__ import annotations

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs' hook signature)
    """Replace :data:`MARKER` with :func:`fwgym.cli.reference.cli_reference` (every subcommand and option)."""
    if MARKER not in markdown:
        return markdown
    from fwgym.cli.reference import cli_reference

    return markdown.replace(MARKER, cli_reference())
