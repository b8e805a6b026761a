"""fwgym.tools.answer: submit (plans in decision episodes, forecasts in forecast episodes) and abstain."""
import numpy as np
import pytest

from fwgym.tools import parse_action


def apply(ep, tool, **args):
    return ep.apply(parse_action({"tool": tool, "args": args}))


def test_submit_levels_or_decisions_records_the_plan(make_episode, case):
    levels = [1.0, 1.05, 1.1, 1.15, 1.2, 1.15, 1.1, 1.05]
    ep = make_episode()
    out = apply(ep, "submit", levels=levels)
    assert out.result == {"tool": "submit", "ok": True, "result": {"accepted": True, "kind": "plan"}}
    assert ep.submission.levels.tolist() == levels and ep.submission.indices.tolist() == [12, 13, 14, 15, 16, 15, 14, 13]
    ep2 = make_episode()
    apply(ep2, "submit", decisions=[{"decision_id": f"b{i:02d}", "value": v * case.scale} for i, v in enumerate(levels)])
    assert np.array_equal(ep2.submission.indices, ep.submission.indices)
    assert np.allclose(ep2.submission.values, np.asarray(levels) * case.scale, rtol=1e-12)


@pytest.mark.parametrize("args,code,needle", [
    ({}, "invalid_arguments", "give exactly one of 'decisions'"),
    ({"levels": [1.0] * 8, "decisions": []}, "invalid_arguments", "give exactly one of 'decisions'"),
    ({"quantiles": [[1.0] * 9] * 24}, "invalid_arguments", "unknown argument(s) ['quantiles']"),
    ({"levels": [1.0] * 7 + [1.4]}, "invalid_plan", "ramp_violation"),
    ({"levels": [2.05] * 8}, "invalid_plan", "off_grid"),
])
def test_refused_plan_submissions_record_nothing(make_episode, args, code, needle):
    ep = make_episode(invalid_submission="error")
    out = apply(ep, "submit", **args)
    assert out.result["error"]["code"] == code and needle in out.result["error"]["message"], out.result
    assert ep.submission is None and out.ends is None


def test_forecast_episodes_accept_quantiles_or_samples(make_episode):
    q = np.tile(np.arange(1.0, 10.0), (24, 1))
    ep = make_episode(task="forecast")
    out = apply(ep, "submit", quantiles=q.tolist())
    assert out.result["result"] == {"accepted": True, "kind": "quantiles"} and out.ends == "submitted"
    assert ep.submission.kind == "quantiles" and np.array_equal(ep.submission.values, q)
    s = np.arange(48.0).reshape(2, 24)
    ep = make_episode(task="forecast")
    apply(ep, "submit", samples=s.tolist())
    assert ep.submission.kind == "samples" and np.array_equal(ep.submission.values, s)


@pytest.mark.parametrize("args,code,needle", [
    ({}, "invalid_arguments", "give exactly one of 'quantiles'"),
    ({"quantiles": [], "samples": []}, "invalid_arguments", "give exactly one of 'quantiles'"),
    ({"levels": [1.0] * 8}, "invalid_arguments", "unknown argument(s) ['levels']"),
    ({"quantiles": [[1.0] * 9] * 23}, "invalid_plan", "24 rows"),
    ({"quantiles": [list(range(9, 0, -1))] * 24}, "invalid_plan", "non_monotone"),
    ({"samples": [[1.0] * 24]}, "invalid_plan", "samples must be 2.."),
])
def test_refused_forecast_submissions(make_episode, args, code, needle):
    ep = make_episode(task="forecast", invalid_submission="error")
    out = apply(ep, "submit", **args)
    assert out.result["error"]["code"] == code and needle in out.result["error"]["message"], out.result
    assert ep.submission is None


def test_abstain_records_a_capped_reason(make_episode):
    ep = make_episode()
    out = apply(ep, "abstain", reason="r" * 600)
    assert out.ends == "abstained" and ep.abstain_reason == "r" * 500 and out.reason == "r" * 500
    ep = make_episode()
    assert apply(ep, "abstain", reason="").reason == "no reason given"
    for bad, needle in (({"reason": 5}, "'reason' must be a string"), ({"why": "x"}, "unknown argument(s) ['why']")):
        ep = make_episode()
        out = apply(ep, "abstain", **bad)
        assert out.result["error"]["code"] == "invalid_arguments" and needle in out.result["error"]["message"]
        assert ep.abstain_reason is None and out.ends is None and ep.calls == 1
