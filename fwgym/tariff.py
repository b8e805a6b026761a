"""Forecast tariff of FWBench (protocol §2.2, DESIGN §6), in credits ("reference CPU microseconds").

A request (model, context_steps, horizon) is charged the price of the smallest context bucket and
the smallest horizon bucket that cover it. Context buckets: 96, 336 steps; horizon buckets 24, 64,
96, 192, 240, 336 steps.
"""
from __future__ import annotations

from functools import lru_cache

CONTEXT_BUCKETS: tuple[int, ...] = (96, 336)
HORIZON_BUCKETS: tuple[int, ...] = (24, 64, 96, 192, 240, 336)

#: model -> context bucket -> prices per horizon bucket
TARIFF: dict[str, dict[int, tuple[int, ...]]] = {
    "chronos_bolt_tiny": {96: (7273, 7344, 21854, 35426, 48499, 93987), 336: (8452, 8452, 26108, 46595, 69541, 127481)},
    "chronos2": {96: (86752, 103806, 113726, 113726, 113726, 113726), 336: (86752, 103806, 113726, 113726, 113726, 116839)},
    "timesfm25": {96: (1181871,) + (1187691,) * 5, 336: (1181871,) + (1187691,) * 5},
    "seasonal_empirical": {336: (400, 1027, 1588, 3065, 3756, 5206)},
}


def price(model: str, context_steps: int, horizon: int) -> dict:
    """Price of a request.

    Returns:
        ``{"model", "context_steps", "horizon", "context_bucket", "horizon_bucket", "credits"}``.

    Raises:
        ValueError: unknown model, non-integer or out-of-range context/horizon (no bucket covers it).
    """
    if model not in TARIFF:
        raise ValueError(f"unknown model {model!r}; priced models are {sorted(TARIFF)}")
    for name, v in (("context_steps", context_steps), ("horizon", horizon)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name} must be an integer, got {v!r}")
    return dict(_price(model, int(context_steps), int(horizon)))


def credits_for(model: str, context_steps: int, horizon: int) -> int:
    """Credits of a request: ``price(model, context_steps, horizon)["credits"]`` without copying the
    quote (the hot path of the catalog, the RL features and the macro masks).

    Raises:
        ValueError: as :func:`price`.
    """
    if model in TARIFF and type(context_steps) is int and type(horizon) is int:
        return _price(model, context_steps, horizon)["credits"]
    return price(model, context_steps, horizon)["credits"]  # its checks and errors


@lru_cache(maxsize=4096)
def _price(model: str, context_steps: int, horizon: int) -> dict:
    # cached on validated arguments (bools are rejected above: True == 1 would share a cache key)
    if horizon < 1 or horizon > HORIZON_BUCKETS[-1]:
        raise ValueError(f"horizon must be in 1..{HORIZON_BUCKETS[-1]}, got {horizon}")
    buckets = sorted(TARIFF[model])
    if context_steps < 1 or context_steps > buckets[-1]:
        raise ValueError(f"context_steps for {model} must be in 1..{buckets[-1]}, got {context_steps}")
    cb = next(b for b in buckets if context_steps <= b)
    hi = next(i for i, b in enumerate(HORIZON_BUCKETS) if horizon <= b)
    return {
        "model": model,
        "context_steps": context_steps,
        "horizon": horizon,
        "context_bucket": cb,
        "horizon_bucket": HORIZON_BUCKETS[hi],
        "credits": TARIFF[model][cb][hi],
    }
