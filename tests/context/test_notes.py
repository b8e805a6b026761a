"""Notes of every CiK context type, written many ways (issue 27): skeleton counts per family and pool, held-out
writing on test (a regex written from train/dev notes recovers < 20 % of test effects), the generator (not any
wording) defines the effect, metadata of every context type, and no leak through covariate tables."""
from dataclasses import replace

import numpy as np
import pytest

from fwgym.baselines.context import effects_match, parse_scenario
from fwgym.context.families import CONTEXT_TYPES
from fwgym.context.phrasing import FILLERS, FRAMES, QUANTITY_FORMS, SPAN_FORMS, pool_of
from fwgym.context.scenarios import FAMILIES, family_spec, make_scenario, skeleton_ids
from fwgym.context.text import render_context
from fwgym.core.cases import build_cases
from fwgym.core.series import Series, hour_to_iso


@pytest.fixture(scope="module")
def cases():
    return {split: build_cases("electricity", split)[::4] + build_cases("cycle_hire", split)[::2]
            for split in ("dev", "test")}


def test_pools_by_split():
    assert pool_of("train") == pool_of("dev") == "seen"
    assert pool_of("test") == pool_of("sealed") == pool_of("anything_new") == "held_out"


def test_skeleton_counts_and_disjoint_pools():
    # every family: 3 core sentences x 5 register frames = 15 skeletons per pool, none shared between pools
    for domain, names in FAMILIES.items():
        assert len(names) == 6
        for name in names:
            spec = family_spec(domain, name)
            seen, held = skeleton_ids(domain, name, "seen"), skeleton_ids(domain, name, "held_out")
            assert len(seen) == len(held) == 15 >= 8
            assert not set(spec.cores["seen"]) & set(spec.cores["held_out"])
            assert len({r for r, _ in FRAMES["seen"]}) == 5  # 5 registers
    assert not {t for _, t in FRAMES["seen"]} & {t for _, t in FRAMES["held_out"]}
    assert not set(SPAN_FORMS["seen"]) & set(SPAN_FORMS["held_out"])
    for kind, pools in QUANTITY_FORMS.items():
        assert not set(pools["seen"]) & set(pools["held_out"]), kind
    for domain in FILLERS:
        assert not set(FILLERS[domain]["seen"]) & set(FILLERS[domain]["held_out"])


def test_case_notes_use_their_splits_pool(cases):
    for split, cs in cases.items():
        for c in cs:
            s = make_scenario(c, 0)
            assert s.skeleton.split("/")[1] == s.variant["pool"] == pool_of(split)


def _recovered(c, s) -> bool:
    ctx = render_context(c, 113726, 12, ("catalog",), s.text, "forecast")
    parsed = parse_scenario(ctx, int(c.target_hours[0]) % 24, np.asarray(c.history), hour_to_iso(c.history_start))
    return effects_match(parsed, s.effect)


def test_regex_from_train_dev_notes_reads_dev_and_recovers_under_20_percent_of_test(cases):
    rate = {}
    for split, cs in cases.items():
        scen = [(c, make_scenario(c, 0)) for c in cs]
        stated = [(c, s) for c, s in scen if s.family not in ("temperature_table", "rain_table")]
        rate[split] = np.mean([_recovered(c, s) for c, s in stated])
        rate[split + "_all"] = np.mean([_recovered(c, s) for c, s in scen])
    assert rate["dev"] > 0.8  # a competent regex on the writing it was written from (measured 0.85)
    assert rate["test_all"] < 0.20 and rate["test"] < 0.20  # measured: 0.0


@pytest.mark.parametrize("split", ["dev", "test"])
def test_a_paraphrase_of_the_span_never_changes_the_effect(split):
    c0 = build_cases("electricity", split)[5], build_cases("cycle_hire", split)[3]
    for c in c0:
        pool = pool_of(split)
        for fam in FAMILIES[c.domain]:
            ref = make_scenario(c, 0, fam)
            y = ref.apply(c.target())
            for form in SPAN_FORMS[pool]:
                for extra in ({}, {"register": 1, "length": "long", "distractor": "misdated"}):
                    s = make_scenario(c, 0, fam, phrasing={"span": form, **extra})
                    np.testing.assert_array_equal(s.apply(c.target()), y)
                    np.testing.assert_array_equal(s.roi, ref.roi)
                    assert s.params == ref.params and s.variant["span_form"] == form
                    for b1, b2 in ((s.upper, ref.upper), (s.lower, ref.lower)):
                        assert (b1 is None) == (b2 is None) and (b1 is None or np.array_equal(b1, b2, equal_nan=True))


def test_every_context_type_with_its_metadata_in_info_and_the_record():
    from fwgym.agents import run_episode
    from fwgym.baselines.context import ContextAwareAgent
    from fwgym.envs.fwbench import FWBenchEnv

    seen = set()
    for domain in ("electricity", "cycle_hire"):
        env = FWBenchEnv(domain, split="test", scenarios=True, task="forecast")
        for c in env.cases[:30]:
            res = run_episode(env, ContextAwareAgent(True), options={"case_id": c.case_id})
            sc = env.episode.scenario
            facts = res.record
            assert facts["context_types"] == list(sc.context_types) and facts["skills"] == list(sc.skills)
            assert facts["skeleton"] == sc.skeleton and "c_f" in sc.context_types
            seen |= set(sc.context_types)
        _, info = env.reset(options={"case_id": env.cases[0].case_id})
        meta = info["episode"]["scenario"]
        assert set(meta) == {"context_types", "skills"}  # no family, no effect
    assert seen == set(CONTEXT_TYPES)


def test_covariate_tables_do_not_encode_the_target():
    # counterfactual: change every value at or after the cut-off; the table (and the whole note) stays
    for domain, fam in (("electricity", "temperature_table"), ("cycle_hire", "rain_table")):
        for c in build_cases(domain, "test")[::40]:
            v = np.array(c.series.values)
            cut = c.as_of - 2 - c.series.start_hour
            v[cut:] = v[cut:] * 0.61 + 3
            altered = replace(c, series=Series(c.series.series_id, c.series.domain, c.series.name, c.series.unit,
                                               c.series.start_hour, v))
            a, b = make_scenario(c, 0, fam), make_scenario(altered, 0, fam)
            assert a.text == b.text and "forecast from" in a.text
            np.testing.assert_array_equal(a.effect[0][2], b.effect[0][2])  # the same per-hour factors


def test_covariate_relation_is_in_the_history():
    # the history's temperatures were generated so that demand = b (1 + g (T - T0)): regressing the visible
    # demand ratio on the table's anomaly recovers g, which then sets the target's effect
    c = build_cases("electricity", "test")[11]
    spec = family_spec("electricity", "temperature_table")
    from fwgym.context.scenarios import local_hours

    d = spec.draw(c, np.random.default_rng([1, 1]), local_hours(c))
    hist = np.asarray(c.history, dtype=float)
    hod = hist.reshape(14, 24).mean(axis=0)
    ratio = hist[-72:] / hod[np.arange(336 - 72, 336) % 24] - 1
    anomaly = d.slots["t_obs"] - d.slots["t0_obs"]
    g = float(np.dot(anomaly, ratio) / np.dot(anomaly, anomaly))
    assert g == pytest.approx(d.params["gamma"], rel=0.1)
