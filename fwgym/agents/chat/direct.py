"""Context is Key's direct prompt for forecast episodes (Williams et al. 2024, "DP"; its code's ``DirectPrompt``).

The model is asked ``n`` times (default :data:`N_SAMPLES` = 25, one request each, temperature
:data:`TEMPERATURE` = 1) for one trajectory of the 24 target hours, written as ``(timestamp, value)``
lines between ``<forecast>`` and ``</forecast>`` tags. Each completion is read as CiK reads it
(:func:`parse_trajectory`) and the valid ones are the sample paths the episode submits (scored by the
env as their empirical distribution; the record also holds CiK's fair estimator, ``rcrps_fair``).

Retries follow CiK's rejection sampling: a first batch of ``n`` completions, then at most
:data:`RETRY_BATCHES` more batches of :data:`RETRY_BATCH` (CiK's ``n_retries=3`` batches in all,
``batch_size_on_retry=5``) while fewer than ``n`` are valid; if still fewer than ``n`` are valid the
forecast fails, as CiK's ``fail_on_invalid`` (a failed instance scores CiK's cap 5): the episode ends
through ``abstain`` (invalid, the cap). Every completion and its outcome is counted in the trace.

Prompt (CiK's ``make_prompt``, verbatim but for the data): system "You are a useful forecasting
assistant."; the context as ``Background:`` (the context text's case facts) and ``Scenario:`` (its
``Context:`` note); the history as ``(YYYY-MM-DD HH:MM:SS, value)`` lines (``value`` with 6 significant
digits, ``%.0f`` from 1e6 on); the timestamps to predict as numpy prints an array of strings. The
context text's answer-format lines (``Task:``, ``Score:``, the budget and tools) are left out: the
direct prompt states its own format and offers no tools.

Parsing (CiK's, exactly): the first ``<forecast>...</forecast>`` block (stripped), parentheses
removed, split into lines; each line ``key, value``: the key is the text before the first comma with
quotes removed, the value ``float()`` of the text after it; a line without a comma or with an
unreadable value rejects the completion, as does a missing timestamp (extra ones are ignored, a
repeated one keeps its last value). One deviation, stated: a non-finite value (``nan``, ``inf``, which
Python's ``float`` accepts) rejects the completion (CiK would score NaN).
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from typing import Any, Mapping

import numpy as np

from fwgym.core.series import hour_to_datetime, iso_to_hour

__all__ = ["N_SAMPLES", "TEMPERATURE", "RETRY_BATCH", "RETRY_BATCHES", "SYSTEM", "cik_timestamps", "cik_prompt",
           "parse_trajectory", "TrajectoryError", "batch_sizes"]

#: completions per forecast (CiK's ``n_samples``)
N_SAMPLES = 25
#: sampling temperature of the completions (CiK's default)
TEMPERATURE = 1.0
#: completions per retry batch (CiK's ``batch_size_on_retry``)
RETRY_BATCH = 5
#: retry batches after the first (CiK's ``n_retries=3`` batches in all)
RETRY_BATCHES = 2
#: CiK's system message
SYSTEM = "You are a useful forecasting assistant."
#: CiK's timestamp format
STAMP = "%Y-%m-%d %H:%M:%S"
#: context-text lines that describe fwgym's answer format and tools, not the case (left out of the prompt)
_FORMAT_LINES = ("Task:", "Score:", "Forecast budget:", "Contract:", "Capacity grid", "Loss:", "Objective:", "Submit ")


class TrajectoryError(ValueError):
    """A completion CiK's parser rejects (``reason`` says why)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def batch_sizes(n: int) -> list[int]:
    """The request batches of one forecast: ``[n, 5, 5]`` (CiK's first batch and its retry batches)."""
    return [int(n)] + [RETRY_BATCH] * RETRY_BATCHES


def _iso(text: Any) -> datetime | None:
    try:
        return hour_to_datetime(iso_to_hour(text))
    except (TypeError, ValueError, OverflowError):
        return None


def cik_timestamps(episode: Mapping | None) -> list[str]:
    """The 24 target timestamps in CiK's format (``YYYY-MM-DD HH:MM:SS``, UTC hour starts).

    Raises:
        ValueError: the episode facts have no readable ``target.start``.
    """
    t0 = _iso(((episode or {}).get("target") or {}).get("start"))
    if t0 is None:
        raise ValueError("the direct prompt needs the episode's target window (info['episode']['target']['start'])")
    return [(t0 + timedelta(hours=h)).strftime(STAMP) for h in range(24)]


def _value(y: float, max_digits: int = 6) -> str:
    """CiK's number format: ``%.6g``, switching to ``%.0f`` at 10**6 (no scientific notation)."""
    return f"{y:.{max_digits}g}" if y < 10 ** max_digits else f"{y:.0f}"


def _context_block(context: str) -> str:
    """CiK's context block from the context text: ``Background:`` (case facts) and ``Scenario:`` (the note)."""
    facts, notes = [], []
    for line in str(context).splitlines():
        if line.startswith("Context: "):
            notes.append(line[len("Context: "):])
        elif line.strip() and not line.startswith(_FORMAT_LINES):
            facts.append(line)
    out = ""
    if facts:
        out += "Background: " + "\n".join(facts) + "\n"
    if notes:
        out += "Scenario: " + "\n".join(notes) + "\n"
    return out


def cik_prompt(observation: Mapping, episode: Mapping | None, *, history_hours: int | None = None) -> tuple[str, str]:
    """``(system, user)`` of CiK's direct prompt for a forecast episode (see the module docstring).

    Args:
        observation: the first observation (``context``, ``history``).
        episode: the episode's facts (``history.start``, ``target.start``).
        history_hours: show only the last N visible hours (``None``: all 336).

    Raises:
        ValueError: the facts lack the history or target window.
    """
    facts = episode or {}
    values = [float(v) for v in observation.get("history", [])]
    start = _iso((facts.get("history") or {}).get("start"))
    if start is None or (facts.get("history") or {}).get("hours") != len(values):
        raise ValueError("the direct prompt needs the episode's visible-history window (info['episode']['history'])")
    n0 = 0 if history_hours is None or history_hours >= len(values) else len(values) - history_hours
    history = "\n".join(f"({(start + timedelta(hours=i)).strftime(STAMP)}, {_value(v)})"
                        for i, v in enumerate(values) if i >= n0)
    pred_time = str(np.array(cik_timestamps(facts)))  # CiK formats the numpy array of timestamp strings
    user = f"""
I have a time series forecasting task for you.

Here is some context about the task. Make sure to factor in any background knowledge,
satisfy any constraints, and respect any scenarios.
<context>
{_context_block(observation.get("context", ""))}
</context>

Here is a historical time series in (timestamp, value) format:
<history>
{history}
</history>

Now please predict the value at the following timestamps: {pred_time}.

Return the forecast in (timestamp, value) format in between <forecast> and </forecast> tags.
Do not include any other information (e.g., comments) in the forecast.

Example:
<history>
(t1, v1)
(t2, v2)
(t3, v3)
</history>
<forecast>
(t4, v4)
(t5, v5)
</forecast>

"""
    return SYSTEM, user


_FORECAST_TAG = re.compile(r"<forecast>(.*?)</forecast>", re.DOTALL)


def parse_trajectory(text: Any, timestamps: list[str]) -> list[float]:
    """One completion's trajectory, read as CiK's ``DirectPrompt`` reads it (module docstring).

    Args:
        text: the completion's text. timestamps: the expected timestamps (:func:`cik_timestamps`).

    Returns:
        The 24 values in timestamp order (floats).

    Raises:
        TrajectoryError: ``no_forecast_tags``, ``bad_line`` (no comma or an unreadable value),
            ``missing_timestamp``, ``non_finite``.
    """
    match = _FORECAST_TAG.search(text if isinstance(text, str) else "")
    if match is None:
        raise TrajectoryError("no_forecast_tags")
    body = match.group(1).strip().replace("(", "").replace(")", "")
    found: dict[str, float] = {}
    for line in body.split("\n"):
        parts = line.split(",")
        if len(parts) < 2:
            raise TrajectoryError("bad_line")
        try:
            found[parts[0].replace("'", "").replace('"', "")] = float(parts[1])
        except ValueError:
            raise TrajectoryError("bad_line") from None
    try:
        values = [found[t] for t in timestamps]
    except KeyError:
        raise TrajectoryError("missing_timestamp") from None
    if not all(math.isfinite(v) for v in values):
        raise TrajectoryError("non_finite")
    return values
