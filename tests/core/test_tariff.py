"""Tests for fwgym/core/tariff.py: bucket rule and prices (protocol §2.2, DESIGN §6), checked by hand."""
from __future__ import annotations

import json

import pytest

from fwgym.core import tariff
from fwgym.data import DataIntegrityError, sha256_file
from fwgym.core.tariff import price


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
    from fwgym.core.tariff import TARIFF, credits_for, price

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


# -- the extended tariff (statsmodels forecasters) -----------------------------------------------------------

STATISTICAL = ("ets", "theta", "sarima", "mstl_ets")


@pytest.fixture
def fresh_tariff(monkeypatch):
    """The tariff module as at import: protocol rows only, the extended file not read yet."""
    monkeypatch.setattr(tariff, "_EXTENDED", None)
    monkeypatch.setattr(tariff, "_ROWS", dict(tariff.TARIFF))
    monkeypatch.setattr(tariff, "_SOURCES", {m: "protocol" for m in tariff.TARIFF})
    tariff._price.cache_clear()
    yield tariff
    tariff._price.cache_clear()


def test_committed_extended_tariff_is_pinned_complete_and_monotone():
    assert sha256_file(tariff.EXTENDED_TARIFF_PATH) == tariff.EXTENDED_TARIFF_SHA256
    doc = tariff.load_extended_tariff()
    assert doc["unit"] == "reference CPU microsecond credits" and doc["version"]
    assert set(doc["machine"]) >= {"cpu", "logical_cpus", "platform", "python", "numpy", "scipy", "statsmodels"}
    assert doc["method"]["threads"]["OPENBLAS_NUM_THREADS"] == "1" and "process_time" in doc["method"]["measured"]
    assert sorted(doc["rows"]) == sorted(STATISTICAL)
    for model, rows in doc["rows"].items():
        assert sorted(rows) == [96, 336]
        for prices in rows.values():
            assert list(prices) == sorted(prices) and all(isinstance(p, int) and p > 0 for p in prices)
        assert all(a <= b for a, b in zip(rows[96], rows[336]))
        assert doc["failures"][model] == 0


def test_extended_rows_at_bucket_edges():
    rows = tariff.load_extended_tariff()["rows"]
    for m in STATISTICAL:
        r = rows[m]
        edges = [(1, 1, r[96][0]), (96, 24, r[96][0]), (96, 25, r[96][1]), (96, 64, r[96][1]), (96, 65, r[96][2]),
                 (96, 96, r[96][2]), (96, 97, r[96][3]), (96, 192, r[96][3]), (96, 193, r[96][4]), (96, 240, r[96][4]),
                 (96, 241, r[96][5]), (96, 336, r[96][5]), (97, 1, r[336][0]), (97, 24, r[336][0]),
                 (336, 50, r[336][1]), (336, 194, r[336][4]), (336, 336, r[336][5])]
        for ctx, h, credits in edges:
            p = price(m, ctx, h)
            assert p["credits"] == credits == tariff.credits_for(m, ctx, h), (m, ctx, h)
        assert price(m, 336, 50)["horizon_bucket"] == 64 and price(m, 97, 194)["context_bucket"] == 336
        for bad in ((m, 337, 50), (m, 336, 337), (m, 0, 24), (m, 336, 0), (m, 336, 50.0)):
            with pytest.raises(ValueError):
                price(*bad)


def test_protocol_prices_do_not_read_the_extended_file(fresh_tariff, monkeypatch):
    monkeypatch.setattr(fresh_tariff, "EXTENDED_TARIFF_SHA256", "0" * 64)  # as if the file had been edited
    assert price("chronos2", 336, 50)["credits"] == 103806 and fresh_tariff.credits_for("seasonal_empirical", 336, 194) == 3756
    with pytest.raises(DataIntegrityError, match="tariff_extended.json failed its sha256 check"):
        price("ets", 336, 50)
    with pytest.raises(DataIntegrityError):
        fresh_tariff.credits_for("ets", 336, 50)


def test_an_edited_extended_file_is_refused(tmp_path, fresh_tariff, monkeypatch):
    original = tariff.EXTENDED_TARIFF_PATH.read_text()
    doc = json.loads(original)
    doc["rows"]["ets"]["336"][1] = 1  # a cheaper forecast
    edited = tmp_path / "tariff_extended.json"
    edited.write_text(json.dumps(doc, indent=2) + "\n")
    monkeypatch.setattr(fresh_tariff, "EXTENDED_TARIFF_PATH", edited)
    with pytest.raises(DataIntegrityError, match="failed its sha256 check"):
        price("ets", 336, 50)
    # re-pinned but malformed: clear errors naming the file
    for change, match in ((lambda d: d["rows"]["ets"].update({"336": [1, 2, 3]}), "expected 6 prices"),
                          (lambda d: d["rows"]["ets"].update({"200": [1] * 6}), "context bucket"),
                          (lambda d: d.update(unit="ms"), "unit"),
                          (lambda d: d.pop("machine"), "missing keys"),
                          (lambda d: d["rows"].update(chronos2={"336": [1] * 6}), "protocol models")):
        d = json.loads(original)
        change(d)
        edited.write_text(json.dumps(d))
        monkeypatch.setattr(fresh_tariff, "EXTENDED_TARIFF_SHA256", sha256_file(edited))
        monkeypatch.setattr(fresh_tariff, "_EXTENDED", None)
        with pytest.raises(ValueError, match=match):
            fresh_tariff.tariff_rows("ets")


def test_registered_rows(fresh_tariff):
    rows = fresh_tariff.register_prices("plug", {"336": [5, 6, 7, 8, 9, 10]})
    try:
        assert rows == {336: (5, 6, 7, 8, 9, 10)} and fresh_tariff.tariff_source("plug") == "registered"
        assert price("plug", 336, 50)["credits"] == 6 and fresh_tariff.credits_for("plug", 1, 336) == 10
        with pytest.raises(ValueError, match="already has tariff rows"):
            fresh_tariff.register_prices("plug", {336: [1] * 6})
        fresh_tariff.register_prices("plug", {96: [1] * 6, 336: [2] * 6}, replace=True)
        assert price("plug", 96, 50)["credits"] == 1 and price("plug", 97, 50)["credits"] == 2  # the cache was cleared
    finally:
        fresh_tariff.unregister_prices("plug")
    with pytest.raises(ValueError, match="unknown model"):
        price("plug", 336, 50)
    with pytest.raises(ValueError, match="protocol model"):
        fresh_tariff.register_prices("chronos2", {336: [1] * 6}, replace=True)
    for bad in ({}, {336: [1] * 5}, {336: [0] * 6}, {336: [1.5] * 6}, {336: [True] * 6}, {128: [1] * 6},
                {"336.0": [1] * 6}, {336: "123456"}, [1] * 6):
        with pytest.raises(ValueError):
            fresh_tariff.register_prices("plug", bad)


def test_unaffordable_extended_request_is_refused_free():
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.forecasters import EXTENDED_MODELS

    cheapest = min(price(m, 336, 50)["credits"] for m in STATISTICAL)
    env = FWBenchEnv("electricity", split="test", models=EXTENDED_MODELS, budget=cheapest - 1)
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    for m in STATISTICAL:
        _, _, _, _, info = env.step({"tool": "quote", "args": {"model": m}})
        assert info["tool_result"]["result"]["affordable"] is False
        _, _, term, _, info = env.step({"tool": "forecast", "args": {"model": m}})
        assert not term and info["tool_result"]["error"]["code"] == "insufficient_budget" and info["credits"] == 0
