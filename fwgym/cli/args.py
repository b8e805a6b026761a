"""The argument parser class, argument types and options shared by the subcommands.

:class:`Parser` is the class of ``fwgym``'s parser and of every subcommand's (:func:`fwgym.cli.build_parser`): a
usage error is two short lines on stderr, ``fwgym <cmd>: error: <message>`` and ``see 'fwgym <cmd> --help'``
(exit 2), not the whole usage block.

Options that several subcommands have are defined once here, with their help: :func:`add_output_argument`
(``-o/--out``: where a command writes, the one spelling; older spellings such as ``--output`` and ``--csv``
stay as aliases), :func:`add_split_argument`, :func:`add_lead_argument`, :func:`add_progress_argument`,
:func:`add_backend_arguments`, :func:`add_domain_argument` and :func:`add_recompute_arguments` (``--recompute N``
and its ``--seed``: what a ``verify`` recomputes, with :func:`recompute_seed`).

The numeric types (:func:`positive_int`, :func:`nonnegative_int`, :func:`int_range`,
:func:`positive_float`) refuse bad values while the command line is parsed, so ``--workers 0`` or
``--n-boot -1`` end as argparse's usage error (exit 2) before anything runs.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Any, Callable, Iterable, NoReturn, Sequence

from fwgym.core.cases import LEADS, SPLITS, TEST_SPLIT
from fwgym.domains import DOMAINS, domain_names

#: what the ``add_*`` helpers add to: a parser or one of its argument groups
Container = argparse._ActionsContainer
#: the one spelling of "where this command writes" (a file or a directory): ``-o FILE|DIR`` / ``--out FILE|DIR``
OUTPUT_FLAGS: tuple[str, str] = ("-o", "--out")
#: its ``dest`` in the parsed arguments (``args.out``)
OUTPUT_DEST = "out"


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are short: ``<prog>: error: <message>`` and
    ``see '<prog> --help'`` on stderr, exit 2 (``prog`` is e.g. ``fwgym evaluate``; subparsers made by
    :meth:`add_subparsers` are of this class too)."""

    def error(self, message: str) -> NoReturn:
        """Print the short usage error and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message}\nsee '{self.prog} --help'\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """``argparse``'s ``parse_args``, except that unrecognized arguments are the error of the subcommand
        they were given to (``fwgym leaderboard: error: unrecognized arguments: ...``), not of ``fwgym``."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            self._chosen(ns).error(f"unrecognized arguments: {' '.join(extras)}")
        return ns

    def _chosen(self, ns: argparse.Namespace) -> argparse.ArgumentParser:
        """The deepest subcommand parser chosen in ``ns`` (``self`` when no subcommand was chosen)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(ns, action.dest, None) or "")
                if sub is not None:
                    return sub._chosen(ns) if isinstance(sub, Parser) else sub
        return self


def add_output_argument(parser: Container, *, metavar: str, help: str, aliases: Sequence[str] = (),
                        **kwargs: Any) -> argparse.Action:
    """``-o/--out METAVAR``: where the command writes (``args.out``), the spelling every subcommand uses.

    ``aliases`` are older spellings kept working (e.g. ``--output``, ``--csv``); the help names ``--out``
    as the canonical one. ``kwargs`` go to ``add_argument`` (``required``, ``default``).
    """
    flags = [*OUTPUT_FLAGS, *aliases]
    if aliases:
        help += f" ({', '.join(aliases)}: older spelling{'s' if len(aliases) > 1 else ''} of --out)"
    return parser.add_argument(*flags, dest=OUTPUT_DEST, metavar=metavar, help=help, **kwargs)


def add_split_argument(parser: Container, *, default: str | None = TEST_SPLIT, choices: Sequence[str] = SPLITS,
                       required: bool = False, help: str | None = None) -> argparse.Action:
    """``--split {train,dev,test,sealed}``: the split whose cases the command reads (:data:`fwgym.core.cases.SPLITS`)."""
    if help is None:
        help = "the split of the cases (fwgym cases lists them)" + ("" if required else f"; default {default}")
    if required:
        return parser.add_argument("--split", required=True, choices=tuple(choices), help=help)
    return parser.add_argument("--split", default=default, choices=tuple(choices), help=help)


def add_lead_argument(parser: Container) -> argparse.Action:
    """``--lead {day_ahead,week_ahead}``: only the cases of one lead (default both)."""
    return parser.add_argument("--lead", choices=tuple(LEADS), default=None,
                               help=f"only the cases of this lead ({' or '.join(LEADS)}; default: both)")


def add_progress_argument(parser: Container) -> argparse.Action:
    """``--no-progress``: no progress bar on stderr."""
    return parser.add_argument("--no-progress", action="store_true", dest="no_progress",
                               help="do not show the progress bar on stderr")


def add_backend_arguments(parser: Container, *, what: str = "local worker processes (default) or a Ray cluster") -> None:
    """``--backend {local,ray}`` and ``--ray-address ADDRESS``: where the work runs."""
    parser.add_argument("--backend", choices=("local", "ray"), default="local", help=f"where the work runs: {what}")
    parser.add_argument("--ray-address", default=None, dest="ray_address", metavar="ADDRESS",
                        help="address of an existing Ray cluster for --backend ray (default: start a local one)")


def add_recompute_arguments(parser: Container, *, what: str, how: str) -> None:
    """``--recompute N`` (recompute ``N`` random ``what``, ``how``, and fail on any difference) and ``--seed`` (of the
    draw; default random, printed: :func:`recompute_seed`): the value checks of ``fwgym forecasts verify`` and
    ``fwgym rl verify``."""
    parser.add_argument("--recompute", type=positive_int, default=None, metavar="N",
                        help=f"recompute N random {what} ({how}) and fail on any difference")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the draw of --recompute (default: random, printed)")


def recompute_seed(seed: int | None) -> int:
    """``seed``, or a fresh random 32-bit seed when ``None`` (the command prints it, so the draw can be repeated)."""
    import secrets

    return secrets.randbits(32) if seed is None else int(seed)


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


def float_range(lo: float, hi: float = math.inf, lo_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in ``lo..hi`` (``hi`` inclusive; ``lo`` inclusive unless ``lo_open``),
    e.g. ``float_range(0)`` for ``--temperature`` (>= 0) and ``float_range(0, 1, lo_open=True)`` for ``--top-p``
    (0 < p <= 1, the sampling APIs' range)."""
    def parse(value: str) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
        low_ok = x > lo if lo_open else x >= lo
        if not (math.isfinite(x) and low_ok and x <= hi):
            span = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]" if math.isfinite(hi) else f"{'>' if lo_open else '>='} {lo:g}"
            raise argparse.ArgumentTypeError(f"must be a finite number {'in ' if math.isfinite(hi) else ''}{span}, "
                                             f"got {value!r}")
        return x

    parse.__name__ = "number"
    return parse


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


def add_domain_argument(parser: Container) -> None:
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


__all__ = ["Parser", "OUTPUT_FLAGS", "OUTPUT_DEST", "add_output_argument", "add_split_argument", "add_lead_argument",
           "add_progress_argument", "add_backend_arguments", "positive_int", "nonnegative_int", "int_range", "positive_float", "ALL_DOMAINS", "domains", "add_domain_argument", "add_recompute_arguments", "recompute_seed",
           "json_object", "add_arguments_once"]
