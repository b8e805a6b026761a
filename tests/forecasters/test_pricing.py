"""The tariff-measuring command (fwgym/forecasters/pricing.py): its rule (hand-computed), its output
format on a tiny grid (figures not asserted), the --write guard and the sha256 pin."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fwgym.forecasters import pricing
from fwgym.core.tariff import UNIT, load_extended_tariff


def test_rows_rule_by_hand():
    # [[repeats of case 1], [repeats of case 2], ...]: per case the least, then the median over cases
    timings = {"m": {"96": {"24": [[5.0, 6.0], [1.0, 0.9], [3.2, 9.0]], "64": [[2.0], [2.0], [2.0]], "96": [[9.5], [10.5]]},
                     "336": {"24": [[1.0]], "64": [[4.0, 4.5]], "96": [[100.0], [0.4], [7.0, 6.9]]}}}
    rows, medians = pricing.tariff_rows_from(timings)
    assert medians == {"m": {"96": [3.2, 2.0, 10.0], "336": [1.0, 4.0, 6.9]}}
    # ceil of the medians: 4, 2, 10 -> running max 4, 4, 10; the 336 row: 1, 4, 7 -> at least the 96 row
    assert rows == {"m": {"96": [4, 4, 10], "336": [4, 4, 10]}}
    rows, _ = pricing.tariff_rows_from({"m": {"336": {"24": [[0.2]], "64": [[30.01, 31.0]]}}})
    assert rows == {"m": {"336": [1, 31]}}  # at least one credit


def test_pricing_cases_are_deterministic_and_real():
    ids = pricing.pricing_cases(2)
    assert ids == pricing.pricing_cases(2) and len(ids) == 4
    assert [i.split("-")[0] for i in ids] == ["elec", "elec", "cycle", "cycle"]
    with pytest.raises(ValueError):
        pricing.pricing_cases(0)


def test_measuring_command_on_a_tiny_grid(tmp_path):
    out = tmp_path / "t.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "fwgym.forecasters.pricing", "--out", str(out), "--models", "ets", "sarima",
                        "--contexts", "96", "--horizons", "24", "64", "--cases", "1"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert f"wrote {out}" in p.stdout and "ets        context<= 96:" in p.stdout
    doc = json.loads(out.read_text())
    assert out.read_text().endswith("}\n")
    assert doc["unit"] == UNIT and doc["version"] == "extended-v1" and doc["date"].endswith("Z")
    assert doc["command"].startswith("python -m fwgym.forecasters.pricing --out")
    assert doc["context_buckets"] == [96] and doc["horizon_buckets"] == [24, 64]
    assert set(doc["machine"]) == {"cpu", "logical_cpus", "platform", "python", "numpy", "scipy", "pandas", "statsmodels"}
    m = doc["method"]
    assert all(v == "1" for v in m["threads"].values()) and len(m["cases"]["ids"]) == 2
    assert m["cases"]["split"] == "dev" and m["cases"]["per_domain"] == 1 and m["cases"]["repeats"] == 3
    for model in ("ets", "sarima"):
        credits = doc["rows"][model]["96"]
        assert len(credits) == 2 and all(isinstance(c, int) and c >= 1 for c in credits) and credits[0] <= credits[1]
        assert len(doc["measured_median_us"][model]["96"]) == 2 and doc["failures"][model] == 0
    with pytest.raises(ValueError, match="buckets"):  # a partial grid is not a loadable tariff
        load_extended_tariff(out)


def test_write_needs_the_full_grid(capsys):
    with pytest.raises(SystemExit) as exc:
        pricing.main(["--write", "--models", "ets"])
    assert exc.value.code == 2 and "--write needs the full grid" in capsys.readouterr().err


def test_measure_rejects_other_buckets():
    with pytest.raises(ValueError, match="buckets"):
        pricing.measure(["ets"], contexts=[100])
    with pytest.raises(ValueError, match="unknown models"):
        pricing.measure(["nope"])


def test_pin_rewrites_exactly_one_line(tmp_path):
    module = tmp_path / "tariff.py"
    module.write_text('X = 1\nEXTENDED_TARIFF_SHA256 = "' + "a" * 64 + '"\nY = 2\n')
    pricing.pin_sha256("b" * 64, module)
    assert module.read_text() == 'X = 1\nEXTENDED_TARIFF_SHA256 = "' + "b" * 64 + '"\nY = 2\n'
    module.write_text("X = 1\n")
    with pytest.raises(RuntimeError, match="expected one line"):
        pricing.pin_sha256("b" * 64, module)
    # the real module has the line once
    assert len(pricing._PIN.findall(pricing.TARIFF_MODULE.read_text())) == 1
