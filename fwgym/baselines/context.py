"""The regex context baseline, a labelled lower bound on reading: hour-of-day empirical samples adjusted by the
effect that regular expressions find in the note.

The expressions are written from the train/dev notes (the ``seen`` writing pool): they read the
percentage increases, MW reductions and caps (in MW or relative to a day of the history), closures,
surge factors, rain shares, analog days and load shifts of that writing, and nothing of the held-out
writing of test and sealed cases (by design: its recovery on test is measured in the tests and
docs/context.md), nor the covariate tables (no fit). No privileged access: the note, the context's
time zone and dates, and the visible history. Then it plans with the DP (decision envs) or submits
the samples (forecast envs). With ``use_context=False`` it ignores the note: the same method without
the text.
"""
from __future__ import annotations

import json
import re

import numpy as np

from fwgym.context.families import apply_ops
from fwgym.core.series import hour_to_iso
from fwgym.forecasters.classical import classical_distribution
from fwgym.core.optimizer import optimal_plan
from fwgym.core.series import iso_to_hour
from fwgym.tools.results import Catalog

__all__ = ["parse_scenario", "effects_match", "ContextAwareAgent"]

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_SPANS = (re.compile(r"from (\d{2}):00 to (\d{2}):00 local time \((\d{2}):00-(\d{2}):00 UTC\)"),
          re.compile(r"between (\d{2}):00 and (\d{2}):00 local time"),
          re.compile(r"(\d{2}):00-(\d{2}):00 local"))
_NUM = r"(\d+(?:\.\d+)?)"
#: (operation, pattern, value from the match) of the train/dev writing (the seen pool of fwgym.context.phrasing)
_RULES = (
    ("scale", re.compile(rf"about {_NUM}% above what it would normally be"), lambda v: 1 + v / 100),
    ("scale", re.compile(rf"up by roughly {_NUM} percent on a normal day"), lambda v: 1 + v / 100),
    ("shift", re.compile(rf"about {_NUM} MW of steady load"), lambda v: -v),
    ("shift", re.compile(rf"roughly {_NUM} megawatts of round-the-clock demand"), lambda v: -v),
    ("cap", re.compile(rf"(?:no more than|a limit of) {_NUM} MW"), lambda v: v),
    ("scale", re.compile(r"will be closed|station closed|the station is shut|van removes every bike"), lambda v: 0.0),
    ("scale", re.compile(rf"about {_NUM} times the usual number of hires"), lambda v: v),
    ("scale", re.compile(rf"roughly {_NUM}x the normal departures"), lambda v: v),
    ("scale", re.compile(rf"about {_NUM}% of normal"), lambda v: v / 100),
    ("scale", re.compile(rf"roughly {_NUM} percent of their usual level"), lambda v: v / 100),
)
_REF = re.compile(rf"on (?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday) (\d{{1,2}}) ({_MONTHS})(?! \d{{4}})")
_RELATIVE_CAP = re.compile(rf"no more than {_NUM}% of the peak load of those hours")
_FACTOR = re.compile(r"about (\d+)% (higher|lower)")
_MOVE = re.compile(rf"about {_NUM}% of their usage")
_NO_EFFECT = re.compile(r"completely full")


def _local_hours(context: str, start_utc_hour: int) -> np.ndarray | None:
    """Local clock hours of the 24 target hours, from the context's time zone and the target start."""
    from datetime import datetime, timedelta, timezone
    from zoneinfo import ZoneInfo

    tz = re.search(r"local time zone ([A-Za-z_/]+)", context)
    start = re.search(r"Target window \([a-z-]+\): (\d{4}-\d{2}-\d{2}T\d{2}):00:00Z", context)
    if tz is None or start is None:
        return None
    t0 = datetime.fromisoformat(start.group(1) + ":00:00").replace(tzinfo=timezone.utc)
    return np.array([(t0 + timedelta(hours=h)).astimezone(ZoneInfo(tz.group(1))).hour for h in range(24)])


def _span_mask(note: str, lh: np.ndarray | None, start_utc: int) -> np.ndarray | None:
    for i, rx in enumerate(_SPANS):
        m = rx.search(note)
        if m is None:
            continue
        mask = np.zeros(24, dtype=bool)
        if i == 0:  # the UTC hours in brackets
            a = (int(m.group(3)) - start_utc) % 24
            b = (int(m.group(4)) - start_utc) % 24 or 24
            mask[a:b] = True
            return mask
        if lh is None:
            return None
        a, b = int(m.group(1)), int(m.group(2))
        i0 = int(np.flatnonzero(lh == a)[0]) if (lh == a).any() else None
        if i0 is None:
            return None
        n = (b - a) % 24 or 24
        mask[i0:min(i0 + n, 24)] = True
        return mask
    return None


def parse_scenario(context: str, target_start_hour_utc: int, history: np.ndarray | None = None,
                   history_start_utc: str | None = None) -> list | None:
    """The effect a note announces, read with regular expressions written from the train/dev notes
    (the ``seen`` writing pool): a lower bound on reading, by design blind to held-out writing.

    Args:
        context: the observation's context text.
        target_start_hour_utc: UTC clock hour (0..23) of the first target hour.
        history: the visible history (for notes relative to a day in it); history_start_utc: its first
            hour, ISO 8601.

    Returns:
        Effect operations as :func:`fwgym.context.families.apply_ops` takes them (``[]`` for a note
        announcing no change to departures), or None when the note is not understood (covariate tables
        included: the baseline does not fit them).
    """
    line = next((ln for ln in context.splitlines() if ln.startswith("Context: ")), None)
    if line is None:
        return None
    note = " ".join(s for s in re.split(r"(?<=[.;])\s+", line) if not s.startswith("Separately,"))
    if _NO_EFFECT.search(note):
        return []
    lh = _local_hours(context, target_start_hour_utc)
    mask = _span_mask(note, lh, target_start_hour_utc)
    if mask is None:
        return None
    ref = _REF.search(note)
    if ref is not None and history is not None and history_start_utc is not None:
        values = _reference_values(context, ref, mask, history, history_start_utc)
        if values is None:
            return None
        rel = _RELATIVE_CAP.search(note)
        if rel is not None:
            return [("cap", mask, float(rel.group(1)) / 100 * float(values[mask].max()))]
        ops = [("set", mask, values)]
        f = _FACTOR.search(note)
        if f is not None:
            ops.append(("scale", mask, 1 + (1 if f.group(2) == "higher" else -1) * int(f.group(1)) / 100))
        return ops
    mv = _MOVE.search(note)
    hours_after = re.search(r"(?:in the|to the next|to the) (\d+) hours", note)
    if mv is not None and hours_after is not None:
        last = int(np.flatnonzero(mask)[-1]) + 1
        to = np.zeros(24, dtype=bool)
        to[last:min(last + int(hours_after.group(1)), 24)] = True
        return [("move", mask, (to, float(mv.group(1)) / 100))]
    for kind, rx, fn in _RULES:
        m = rx.search(note)
        if m:
            value = float(m.group(1)) if m.groups() else 0.0
            return [(kind, mask, fn(value))]
    return None


def _reference_values(context, ref, mask, history, history_start_utc) -> np.ndarray | None:
    """The history's values at the target hours' clock hours on the referenced day (same UTC offset)."""
    from datetime import datetime

    from fwgym.core.series import iso_to_hour

    start = re.search(r"Target window \([a-z-]+\): (\d{4})-(\d{2})-(\d{2})T(\d{2})", context)
    if start is None:
        return None
    year = int(start.group(1))
    tgt = datetime(year, int(start.group(2)), int(start.group(3)), int(start.group(4)))
    day = datetime.strptime(f"{ref.group(1)} {ref.group(2)} {year}", "%d %B %Y")
    target_date = re.search(r"The target date (\d{4}-\d{2}-\d{2})", context)
    if target_date is None:
        return None
    lag = (datetime.fromisoformat(target_date.group(1)) - day).days
    h0 = iso_to_hour(history_start_utc)
    t0 = iso_to_hour(tgt.strftime("%Y-%m-%dT%H:00:00Z"))
    idx = t0 + np.arange(24) - 24 * lag - h0
    values = np.zeros(24)
    ok = (idx >= 0) & (idx < len(history))
    if not ok[mask].all():
        return None
    values[mask] = np.asarray(history, dtype=np.float64)[idx[mask]]
    return values


def effects_match(parsed: list | None, effect, rtol: float = 1e-6) -> bool:
    """Whether parsed effect operations equal a scenario's (same operations, masks and values within ``rtol``)."""
    if parsed is None or len(parsed) != len(effect):
        return False
    for (k1, m1, v1), (k2, m2, v2) in zip(parsed, effect):
        if k1 != k2 or not np.array_equal(m1, m2):
            return False
        if k1 == "move":
            if not (np.array_equal(v1[0], v2[0]) and np.isclose(v1[1], v2[1], rtol=rtol)):
                return False
        elif not np.allclose(np.where(m1, v1, 0.0) if np.ndim(v1) else v1,
                             np.where(m2, v2, 0.0) if np.ndim(v2) else v2, rtol=rtol):
            return False
    return True


class ContextAwareAgent:
    """Hour-of-day empirical samples, adjusted by the announced scenario when ``use_context``.

    Uses one free tool call (``catalog``) for timestamps, scale and shortage weights.
    """

    def __init__(self, use_context: bool = True, method: str = "hour_of_day_empirical"):
        self.use_context, self.method = use_context, method
        self.name = f"context_{method}" if use_context else f"{method}_samples"
        self._asked = False

    def reset(self) -> None:
        self._asked = False

    def act(self, observation: dict):
        if not self._asked:
            self._asked = True
            return {"tool": "catalog"}
        cat: Catalog = json.loads(observation["last_result"])["result"]
        case, contract = cat["case"], cat["contract"]
        last, start = iso_to_hour(case["last_visible"]), iso_to_hour(case["target_start"])
        history = np.asarray(observation["history"], dtype=np.float64)
        hours = np.arange(last - len(history) + 1, last + 1)
        samples = classical_distribution(self.method, history, hours, np.arange(start, start + 24)).copy()
        if self.use_context:
            ops = parse_scenario(observation["context"], start % 24, history, _history_start(last, len(history)))
            if ops:
                samples = np.column_stack([apply_ops(samples[:, j], ops, integer=False) for j in range(samples.shape[1])])
        if cat.get("task") == "forecast":
            return {"tool": "submit", "args": {"samples": samples.T.tolist()}}
        res = optimal_plan(samples, contract["scale"], np.asarray(contract["shortage_weights"]))
        return {"tool": "submit", "args": {"decisions": res.plan.decisions()}}


def _history_start(last_visible_hour: int, n: int) -> str:
    return hour_to_iso(last_visible_hour - n + 1)
