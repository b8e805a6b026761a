"""Phase lines: what a command is doing during long work that has no progress bar (re-scoring the
records, bootstrap intervals, figures, writing pages), so a terminal is never silent for seconds.

:func:`phase` writes ``fwgym: <what> ...`` to stderr when the phase starts and completes the line with
its time when it ends (``fwgym: re-scoring ... 8.2 s``). It writes only to a terminal (stderr a TTY),
so files, pipes and captured output stay as they were; ``FWGYM_PROGRESS=1`` turns the lines on
elsewhere (e.g. a CI log) and ``FWGYM_PROGRESS=0`` off.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator, TextIO

__all__ = ["phase", "phases_enabled"]


def phases_enabled(stream: TextIO | None = None) -> bool:
    """Whether phase lines are written to ``stream`` (default stderr): ``$FWGYM_PROGRESS`` (``1`` / ``0``)
    when set, else whether the stream is a terminal."""
    env = os.environ.get("FWGYM_PROGRESS", "").strip()
    if env in ("0", "1"):
        return env == "1"
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def phase(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """Context manager: a phase line around the work in its block (see the module docstring). An
    exception in the block ends the line with ``failed`` and propagates."""
    stream = sys.stderr if stream is None else stream
    on = phases_enabled(stream)
    t0 = time.perf_counter()
    if on:
        print(f"fwgym: {what} ...", end="", file=stream, flush=True)
    try:
        yield
    except BaseException:
        if on:
            print(" failed", file=stream, flush=True)
        raise
    if on:
        print(f" {time.perf_counter() - t0:.1f} s", file=stream, flush=True)
