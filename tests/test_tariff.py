"""Tests for fwgym/tariff.py: bucket rule and prices (protocol §2.2, DESIGN §6), checked by hand."""
from __future__ import annotations

import pytest

from fwgym.tariff import price


@pytest.mark.parametrize(
    "model, ctx, h, credits",
    [
        # the examples of the task brief / DESIGN §6
        ("chronos_bolt_tiny", 336, 50, 8452),
        ("chronos_bolt_tiny", 336, 194, 69541),
        ("chronos2", 336, 50, 103806),
        ("chronos2", 336, 194, 113726),
        ("chronos2", 336, 336, 116839),
        ("seasonal_empirical", 336, 50, 1027),
        ("seasonal_empirical", 336, 194, 3756),
        ("timesfm25", 336, 24, 1181871),
        ("timesfm25", 96, 24, 1181871),
        ("timesfm25", 336, 25, 1187691),
        ("timesfm25", 1, 336, 1187691),
        # bucket edges, chronos_bolt_tiny <= 96: 7273/7344/21854/35426/48499/93987
        ("chronos_bolt_tiny", 96, 24, 7273),
        ("chronos_bolt_tiny", 1, 1, 7273),
        ("chronos_bolt_tiny", 96, 25, 7344),
        ("chronos_bolt_tiny", 96, 64, 7344),
        ("chronos_bolt_tiny", 96, 65, 21854),
        ("chronos_bolt_tiny", 96, 96, 21854),
        ("chronos_bolt_tiny", 96, 97, 35426),
        ("chronos_bolt_tiny", 96, 192, 35426),
        ("chronos_bolt_tiny", 96, 193, 48499),
        ("chronos_bolt_tiny", 96, 240, 48499),
        ("chronos_bolt_tiny", 96, 241, 93987),
        ("chronos_bolt_tiny", 96, 336, 93987),
        # <= 336: 8452/8452/26108/46595/69541/127481
        ("chronos_bolt_tiny", 97, 24, 8452),
        ("chronos_bolt_tiny", 97, 64, 8452),
        ("chronos_bolt_tiny", 200, 96, 26108),
        ("chronos_bolt_tiny", 336, 192, 46595),
        ("chronos_bolt_tiny", 336, 336, 127481),
        # chronos2 <= 96: 86752/103806/113726 x4; <= 336 same but 116839 at 336
        ("chronos2", 96, 24, 86752),
        ("chronos2", 96, 50, 103806),
        ("chronos2", 96, 336, 113726),
        ("chronos2", 97, 24, 86752),
        ("chronos2", 336, 241, 116839),
        # seasonal_empirical (<= 336 only): 400/1027/1588/3065/3756/5206
        ("seasonal_empirical", 96, 24, 400),
        ("seasonal_empirical", 1, 24, 400),
        ("seasonal_empirical", 336, 96, 1588),
        ("seasonal_empirical", 336, 192, 3065),
        ("seasonal_empirical", 336, 336, 5206),
    ],
)
def test_prices(model, ctx, h, credits):
    p = price(model, ctx, h)
    assert p["credits"] == credits
    assert p["model"] == model and p["context_steps"] == ctx and p["horizon"] == h


def test_price_buckets_reported():
    p = price("chronos_bolt_tiny", 336, 50)
    assert p["context_bucket"] == 336 and p["horizon_bucket"] == 64
    p = price("chronos_bolt_tiny", 96, 194)
    assert p["context_bucket"] == 96 and p["horizon_bucket"] == 240
    p = price("seasonal_empirical", 50, 24)
    assert p["context_bucket"] == 336 and p["horizon_bucket"] == 24


def test_timesfm_never_affordable():
    for ctx in (1, 96, 336):
        for h in (1, 24, 50, 194, 336):
            assert price("timesfm25", ctx, h)["credits"] > 113_726


@pytest.mark.parametrize(
    "model, ctx, h",
    [
        ("gpt", 336, 50),
        ("chronos_bolt", 336, 50),
        ("Chronos2", 336, 50),
        ("chronos2", 336, 0),
        ("chronos2", 336, 337),
        ("chronos2", 336, -1),
        ("chronos2", 337, 50),
        ("chronos_bolt_tiny", 1000, 50),
        ("timesfm25", 337, 24),
        ("seasonal_empirical", 337, 50),
        ("chronos2", 0, 50),
        ("chronos2", 336, 50.0),
        ("chronos2", 336.0, 50),
        ("chronos2", 336, True),
        ("chronos2", "336", 50),
        ("chronos2", None, 50),
    ],
)
def test_price_errors(model, ctx, h):
    with pytest.raises(ValueError):
        price(model, ctx, h)


def test_price_results_are_independent_copies_and_bools_stay_refused():
    a = price("chronos2", 336, 50)
    a["credits"] = 0
    assert price("chronos2", 336, 50)["credits"] == 103806  # the cache is not changed through a result
    price("chronos2", 1, 1)  # cached with int arguments ...
    with pytest.raises(ValueError):
        price("chronos2", True, 1)  # ... a bool (== 1) is still refused


def test_credits_for_is_the_quoted_price():
    from fwgym.tariff import TARIFF, credits_for, price

    for m in TARIFF:
        for ctx in (1, 2, 95, 96, 97, 168, 335, 336):
            for h in (1, 24, 25, 50, 64, 65, 96, 192, 194, 240, 241, 336):
                assert credits_for(m, ctx, h) == price(m, ctx, h)["credits"]
    assert credits_for("chronos2", 336, 50) == 103806  # the tariff table: chronos2, context 336, horizon bucket 64
    for bad in (("nope", 336, 50), ("chronos2", 337, 50), ("chronos2", 336, 0), ("chronos2", True, 50),
                ("chronos2", 336, 50.0), ("chronos2", 336, 337)):
        with pytest.raises(ValueError):
            price(*bad)
        with pytest.raises(ValueError):
            credits_for(*bad)
