"""Paired comparison of two runs (fwgym.evaluation.compare, ``fwgym compare``): on two runs of different pools
the paired series-cluster bootstrap interval equals a hand computation on a 6-case example; runs of other
splits are refused; the settings that differ are listed; run-to-run stability (rank agreement, sign changes)."""
import json
from collections import Counter

import numpy as np
import pytest

from fwgym.cli import main
from fwgym.evaluation.compare import compare_pair, differing_settings, policy_pairs, stability, verdict

N_BOOT, SEED = 300, 7


@pytest.fixture(scope="module")
def two_pools(tmp_path_factory):
    """Run A: the protocol pool; run B: the TSFM-less pool (``--pool no_tsfm``); 3 cases of each domain."""
    root = tmp_path_factory.mktemp("compare")
    a, b = root / "protocol", root / "no_tsfm"
    assert main(["evaluate", "--split", "test", "--limit", "3", "--no-progress", "--out", str(a), "--policies",
                 "weekday_empirical", "hour_of_day_empirical"]) == 0
    assert main(["evaluate", "--split", "test", "--limit", "3", "--no-progress", "--out", str(b), "--pool", "no_tsfm",
                 "--policies", "seasonal_empirical", "hour_of_day_empirical"]) == 0
    return a, b


def _records(d):
    return [json.loads(x) for x in (d / "results.jsonl").read_text().splitlines()]


def _hand(pairs, values, n_boot, seed):
    """The paired series-cluster bootstrap written out case by case (protocol §5.3, the docstring of
    fwgym.evaluation.bootstrap.ClusterBootstrap): per domain (sorted), draw as many series as it has with
    replacement; each draw's aggregate is the mean over domains of the mean over the cohorts present of
    sum_g c_s(g) v_g / sum_g c_s(g), v_g the mean difference of a (series, lead) group."""
    rng = np.random.default_rng(seed)
    doms = sorted({a["domain"] for a, _ in pairs})
    layout = {}
    for dom in doms:
        idx = [i for i, (a, _) in enumerate(pairs) if a["domain"] == dom]
        series = sorted({pairs[i][0]["series_id"] for i in idx})
        layout[dom] = (idx, series, rng.integers(0, len(series), size=(n_boot, len(series))))
    stats = []
    for b in range(n_boot):
        per_domain = []
        for dom in doms:
            idx, series, draws = layout[dom]
            count = Counter(series[k] for k in draws[b])
            cohort_values = []
            for cohort in sorted({pairs[i][0]["cohort"] for i in idx}):
                groups = {}
                for i in idx:
                    a = pairs[i][0]
                    if a["cohort"] == cohort:
                        groups.setdefault((a["series_id"], a["lead"]), []).append(values[i])
                num = sum(count[s] * np.mean(v) for (s, _), v in groups.items())
                den = sum(count[s] for (s, _) in groups)
                if den:
                    cohort_values.append(num / den)
            per_domain.append(np.mean(cohort_values))
        stats.append(np.mean(per_domain))
    return np.quantile(stats, [0.025, 0.975])


def _weighted(pairs, values):
    """The aggregate of per-case values with the protocol's weights, by hand: domains 1/2, cohorts equal inside
    a domain, (series, lead) groups equal inside a cohort, cases equal inside a group."""
    tree = {}
    for (a, _), v in zip(pairs, values):
        tree.setdefault(a["domain"], {}).setdefault(a["cohort"], {}).setdefault((a["series_id"], a["lead"]), []).append(v)
    return np.mean([np.mean([np.mean([np.mean(g) for g in groups.values()]) for groups in cohorts.values()])
                    for cohorts in tree.values()])


def test_paired_interval_of_two_pools_is_the_hand_computation(two_pools, capsys):
    a_dir, b_dir = two_pools
    a = [r for r in _records(a_dir) if r["policy"] == "weekday_empirical"]
    b = {r["case_id"]: r for r in _records(b_dir) if r["policy"] == "seasonal_empirical"}
    pairs = [(r, b[r["case_id"]]) for r in a]
    assert len(pairs) == 6 and {r["domain"] for r in a} == {"electricity", "cycle_hire"}
    capsys.readouterr()
    assert main(["compare", str(a_dir), str(b_dir), "--pair", "weekday_empirical", "seasonal_empirical", "--n-boot",
                 str(N_BOOT), "--seed", str(SEED), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = next(r for r in doc["views"][0]["rows"] if r["group"] == "all" and r["subset"] == "common cases")
    for m in ("S", "loss", "credits"):
        diffs = [float(y[m]) - float(x[m]) for x, y in pairs]
        lo, hi = _hand(pairs, diffs, N_BOOT, SEED)
        assert (row[f"d{m}_lo"], row[f"d{m}_hi"]) == pytest.approx((lo, hi), abs=1e-12), m
        assert row[f"d{m}"] == pytest.approx(_weighted(pairs, diffs), abs=1e-12), m
        assert row[f"{m}_b"] - row[f"{m}_a"] == pytest.approx(row[f"d{m}"], abs=1e-12)
    assert row["dcredits"] > 0 and row["dcredits_lo"] > 0  # seasonal_empirical buys a forecast in every case
    assert row["n"] == 6 and row["valid_a"] == row["valid_b"] == 6 and row["dvalid_share"] == 0.0
    assert any("forecast_pool" in d and '["seasonal_empirical"]' in d for d in doc["differing_settings"])
    assert doc["header"].startswith("fwgym compare (PARTIAL):")


def test_the_table_and_the_refusals(two_pools, tmp_path, capsys, monkeypatch):
    a_dir, b_dir = two_pools
    monkeypatch.setenv("COLUMNS", "100")
    capsys.readouterr()
    assert main(["compare", str(a_dir), str(b_dir), "--valid-in-both", "--n-boot", "100", "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert max(len(x) for x in out.splitlines()) <= 100
    assert "settings that differ (A -> B):" in out and "forecast_pool: " in out
    assert "hour_of_day_empirical" in out and "valid in both" in out and "by cohort and lead (B - A):" in out
    assert "run-to-run stability" not in out  # one common policy: no ranking to compare
    dev = tmp_path / "dev"
    assert main(["evaluate", "--split", "dev", "--limit", "1", "--no-progress", "--out", str(dev), "--policies",
                 "hour_of_day_empirical"]) == 0
    capsys.readouterr()
    assert main(["compare", str(a_dir), str(dev)]) == 2
    assert "runs differ in split: " in capsys.readouterr().err
    assert main(["compare", str(a_dir), str(b_dir), "--pair", "nobody", "seasonal_empirical"]) == 2
    assert "run A has no policy 'nobody'" in capsys.readouterr().err
    assert main(["compare", str(a_dir)]) == 2
    assert "holds no repeats" in capsys.readouterr().err


def _rec(policy, case, S, valid=True, series="ISNE", lead="day_ahead"):
    return {"policy": policy, "case_id": f"elec-{series}-2024-07-{case:02d}-{lead}", "domain": "electricity",
            "cohort": "electricity-july", "series_id": series, "lead": lead, "split": "test", "S": S, "R": 2 * S,
            "loss": S, "floor": 0.0, "credits": 0, "calls": 1, "valid": valid, "status": "submitted"}


def test_compare_pair_subsets_and_case_sets():
    a = [_rec("p", 3, 1.0), _rec("p", 11, 2.0, series="PJM"), _rec("p", 19, 3.0, valid=False, series="CISO")]
    b = [_rec("p", 3, 0.5), _rec("p", 11, 2.5, series="PJM"), _rec("p", 19, 1.0, series="CISO")]
    rows = compare_pair(a, b, valid_in_both=True, n_boot=50, seed=1, by=())
    assert [(r["subset"], r["n"]) for r in rows] == [("common cases", 3), ("valid in both", 2)]
    assert rows[0]["dS"] == pytest.approx((-0.5 + 0.5 - 2.0) / 3) and rows[1]["dS"] == pytest.approx(0.0)
    assert rows[0]["dvalid_share"] == pytest.approx(1 / 3) and (rows[0]["valid_a"], rows[0]["valid_b"]) == (2, 3)
    with pytest.raises(ValueError, match="different cases .* --common-cases"):
        compare_pair(a, b[:2])
    assert compare_pair(a, b[:2], common_cases=True, n_boot=10, by=())[0]["n"] == 2
    assert policy_pairs(["x"], ["y"]) == [("x", "y")] and policy_pairs(["x", "z"], ["z"]) == [("z", "z")]
    with pytest.raises(ValueError, match="--pair"):
        policy_pairs(["x", "y"], ["z", "w"])


def test_differing_settings_names_the_leaves_that_differ():
    a = {"forecast_pool": ["a", "b"], "labels": {"thinking": "on"},
         "agents": {"m": {"kind": "openai", "extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}}}
    b = {"forecast_pool": ["a", "b"], "labels": {"thinking": "off"},
         "agents": {"m": {"kind": "openai", "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}}}
    assert differing_settings(a, b, [("m", "m")]) == [
        'labels: {"thinking":"on"} -> {"thinking":"off"}',
        "agent m.extra_body.chat_template_kwargs.enable_thinking: true -> false"]


def test_stability_rank_agreement_and_sign_changes():
    series = ["ISNE", "PJM", "CISO", "ERCO"]
    ref = [_rec("ref", 3, 1.0, series=s) for s in series]
    good = [_rec("good", 3, 0.5 + 0.01 * k, series=s) for k, s in enumerate(series)]  # clearly below ref
    close_a = [_rec("close", 3, 1.0 - (0.1 if k % 2 else -0.05), series=s) for k, s in enumerate(series)]
    close_b = [_rec("close", 3, 0.8 + 0.01 * k, series=s) for k, s in enumerate(series)]  # now clearly below
    st = stability(ref + good + close_a, ref + good + close_b, "ref", n_boot=200, seed=1)
    rows = {r["policy"]: r for r in st["rows"]}
    assert st["same_first"] and st["first_a"] == "good" and st["n_cases"] == 4
    assert (rows["good"]["verdict_a"], rows["good"]["verdict_b"], rows["good"]["sign_changed"]) == ("-", "-", False)
    assert (rows["close"]["verdict_a"], rows["close"]["verdict_b"], rows["close"]["sign_changed"]) == ("0", "-", True)
    assert "dS_a" not in rows["ref"]
    assert st["kendall_tau_b"] == pytest.approx(1.0)  # good < close < ref in both
    flipped = stability(ref + good, [{**r, "S": 2.0} for r in good] + ref, None, n_boot=10)
    assert flipped["kendall_tau_b"] == pytest.approx(-1.0) and not flipped["same_first"]
    assert (verdict(-2, -1), verdict(-1, 1), verdict(1, 2)) == ("-", "0", "+")
