"""Argument types shared by the subcommands."""
from __future__ import annotations

import argparse

from fwgym.data import DOMAINS


def domains(value: str) -> list[str]:
    """``--domain``: ``"all"`` (every domain) or one domain name, as a list.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if value == "all":
        return list(DOMAINS)
    if value not in DOMAINS:
        raise argparse.ArgumentTypeError(f"domain must be 'all' or one of {list(DOMAINS)}")
    return [value]


def add_domain_argument(parser: argparse.ArgumentParser) -> None:
    """``--domain all|electricity|cycle_hire`` (default: every domain)."""
    parser.add_argument("--domain", type=domains, default=list(DOMAINS),
                        help=f"all (default) or one of {', '.join(DOMAINS)}")


__all__ = ["domains", "add_domain_argument"]
