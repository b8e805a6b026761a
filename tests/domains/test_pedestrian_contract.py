"""Two pedestrian cases' contract by hand: the scale (history mean, read with pandas from the shipped file), the
perfect-demand floor and the hour-of-day plan's loss (an independent NumPy DP over the 33-level grid), against
fwgym's optimizer."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from fwgym.core.contract import shortage_weights
from fwgym.core.optimizer import optimal_plan, realised_loss
from fwgym.domains import pedestrian as D
from fwgym.domains.pedestrian import source as P
from fwgym.forecasters.classical import classical_distribution

GRID = np.round(np.arange(0.40, 2.0001, 0.05), 10)  # the 33 levels


@pytest.fixture(scope="module")
def frame():
    df = pd.read_parquet(P.PACKAGED_FILE)
    df["hour"] = (df["timestamp"] - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(hours=1)
    return df.set_index(["series_id", "hour"])["value"]


def _window(frame, sid: str, start: int, n: int) -> np.ndarray:
    idx = pd.MultiIndex.from_arrays([[sid] * n, np.arange(start, start + n)])
    return frame.reindex(idx).to_numpy(dtype=float)


def _dp(cost: np.ndarray) -> tuple[float, np.ndarray]:
    """Min over plans of 8 block levels (ramp: at most 6 grid steps between blocks) of the mean hourly cost;
    cost (24, 33). Ties: the lexicographically smallest plan."""
    block = cost.reshape(8, 3, 33).sum(axis=1)
    best = block[7].copy()
    choice = np.zeros((8, 33), dtype=int)
    for b in range(6, -1, -1):  # backwards: best[g] = cost of blocks b+1.. given level g at block b
        nxt = np.full(33, np.inf)
        for g in range(33):
            lo, hi = max(0, g - 6), min(32, g + 6)
            k = lo + int(np.argmin(best[lo:hi + 1]))
            nxt[g], choice[b, g] = best[k], k
        best = block[b] + nxt
    plan = [int(np.argmin(best))]
    for b in range(7):
        plan.append(int(choice[b, plan[-1]]))
    return float(best[plan[0]] / 24), np.array(plan)


def _cost(samples: np.ndarray, scale: float, weights: np.ndarray) -> np.ndarray:
    """(24, 33) expected hourly cost of each level: E[0.3 (g - z)+ + w_h (z - g)+], z = y / scale."""
    z = np.maximum(samples, 0) / scale  # (24, K)
    g = GRID[None, :, None]
    return (0.3 * np.maximum(g - z[:, None, :], 0) + weights[:, None, None] * np.maximum(z[:, None, :] - g, 0)).mean(axis=2)


@pytest.mark.parametrize("sid,target,lead,asof,scale", [
    # a winter day-ahead case (NZST: local midnight = 12:00 UTC the day before) ...
    ("45_queen_street", date(2025, 7, 11), "day_ahead", datetime(2025, 7, 9, 12, tzinfo=timezone.utc), 733.4107142857143),
    # ... and a summer week-ahead case (NZDT: 11:00 UTC)
    ("te_ara_tahuhu_walkway", date(2025, 2, 19), "week_ahead", datetime(2025, 2, 11, 11, tzinfo=timezone.utc),
     261.4077380952381),
])
def test_contract_by_hand(frame, sid, target, lead, asof, scale):
    days = {"day_ahead": 1, "week_ahead": 7}[lead]
    t0 = D.local_midnight_hour(target)
    assert P.hour_to_datetime(t0 - 24 * days) == asof
    a = int((asof - datetime(1970, 1, 1, tzinfo=timezone.utc)) / timedelta(hours=1))
    hist_start = a - 2 - 336
    hist = _window(frame, sid, hist_start, 336)
    y = _window(frame, sid, t0, 24)
    assert np.isfinite(hist).all() and np.isfinite(y).all()
    s = hist.sum() / 336
    assert s == pytest.approx(scale, rel=1e-12)
    w = shortage_weights(target.weekday())
    # the floor: the best plan on the realised footfall
    floor, _ = _dp(_cost(y[:, None], s, w))
    # the hour-of-day plan: all 14 visible values at the same UTC hour, equal weights
    samples = classical_distribution("hour_of_day_empirical", hist, np.arange(hist_start, hist_start + 336),
                                     np.arange(t0, t0 + 24))
    by_hand = np.stack([hist[(t0 + h - hist_start) % 24::24] for h in range(24)])
    np.testing.assert_array_equal(np.sort(samples, axis=1), np.sort(by_hand, axis=1))
    _, plan = _dp(_cost(by_hand, s, w))
    loss = float(_cost(y[:, None], s, w)[np.arange(24), np.repeat(plan, 3)].mean())
    fw_plan = optimal_plan(samples, s, w).plan
    np.testing.assert_array_equal(fw_plan.indices, plan)
    fw_loss, fw_floor = realised_loss(y, s, w, fw_plan.indices)
    assert fw_floor == pytest.approx(floor, rel=1e-12) and fw_loss == pytest.approx(loss, rel=1e-12)
    assert 0 < floor < loss
