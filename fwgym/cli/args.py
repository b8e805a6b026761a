"""Argument types shared by the subcommands.

The numeric types (:func:`positive_int`, :func:`nonnegative_int`, :func:`int_range`,
:func:`positive_float`) refuse bad values while the command line is parsed, so ``--workers 0`` or
``--n-boot -1`` end as argparse's usage error (exit 2) before anything runs.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Callable, Iterable

from fwgym.domains import DOMAINS, domain_names


def _int(value: str) -> int:
    try:
        return int(value, 10)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None


def _at_least(value: str, minimum: int) -> int:
    n = _int(value)
    if n < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value!r}")
    return n


def positive_int(value: str) -> int:
    """An integer >= 1 (``--workers``, ``--concurrency``, ``--limit``, ``--n-boot``, ...).

    Raises:
        argparse.ArgumentTypeError: not a base-10 integer, or < 1.
    """
    return _at_least(value, 1)


def nonnegative_int(value: str) -> int:
    """An integer >= 0 (seeds).

    Raises:
        argparse.ArgumentTypeError: not a base-10 integer, or < 0.
    """
    return _at_least(value, 0)


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``lo..hi`` (both inclusive), e.g. ``int_range(1, 336)`` for hours
    of history."""
    def parse(value: str) -> int:
        n = _int(value)
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in {lo}..{hi}, got {value!r}")
        return n

    parse.__name__ = f"int in {lo}..{hi}"  # argparse names the type in its messages
    return parse


def positive_float(value: str) -> float:
    """A finite number > 0 (inches, seconds).

    Raises:
        argparse.ArgumentTypeError: not a number, not finite, or <= 0.
    """
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {value!r}")
    return x


#: ``--domain`` value of every domain: the protocol's, then every registered and opt-in one (not the protocol)
ALL_DOMAINS = "all-domains"


def domains(value: str) -> list[str]:
    """``--domain``: ``"all"`` (the protocol's domains, :data:`fwgym.domains.DOMAINS`), ``"all-domains"``
    (:data:`ALL_DOMAINS`: every registered and opt-in domain; opt-in, not the protocol) or one domain's name
    (an opt-in domain such as ``pedestrian`` is registered by the lookup), as a list.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    from fwgym.domains import get_domain, load_optional_domains, optional_domains

    if value == "all":
        return list(DOMAINS)
    if value == ALL_DOMAINS:
        load_optional_domains()
        return list(domain_names())
    try:
        get_domain(value)
    except ValueError:
        known = list(dict.fromkeys([*domain_names(), *optional_domains()]))
        raise argparse.ArgumentTypeError(f"domain must be 'all' or one of {known} (or '{ALL_DOMAINS}': every "
                                         "domain, opt-in ones included)") from None
    return [value]


def add_domain_argument(parser: argparse.ArgumentParser) -> None:
    """``--domain all|all-domains|<domain>`` (default: the protocol's domains)."""
    parser.add_argument("--domain", type=domains, default=list(DOMAINS),
                        help=f"all (default: the protocol's {', '.join(DOMAINS)}), {ALL_DOMAINS} (every domain, "
                             "opt-in ones included: not the protocol) or one domain (fwgym.domains)")


def json_object(value: str | None, option: str) -> dict | None:
    """The JSON object given to ``option`` (``--agent-kwargs``, ``--extra-body``), or ``None`` when the
    option was not given.

    Raises:
        ValueError: not valid JSON, or JSON that is not an object (the message names ``option``).
    """
    if not value:
        return None
    try:
        obj = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{option} must be a JSON object")
    return obj


def add_arguments_once(group, options: Iterable[tuple[tuple[str, ...], dict]]) -> None:
    """Add each ``(flags, argparse kwargs)`` of ``options`` to ``group`` unless an option with those flags
    is already there (options that several agent kinds share, added by whichever registers first)."""
    for flags, kwargs in options:
        try:
            group.add_argument(*flags, **kwargs)
        except argparse.ArgumentError:
            pass  # added by another kind


__all__ = ["positive_int", "nonnegative_int", "int_range", "positive_float", "ALL_DOMAINS", "domains", "add_domain_argument",
           "json_object", "add_arguments_once"]
