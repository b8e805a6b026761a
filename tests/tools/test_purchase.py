"""fwgym.tools.purchase: quote, forecast and replay; the purchase rule (free refusals, charge before
inference, the charge stands on a backend failure); the forecast result and its rounding."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fwgym.baselines.oracles import priced_candidate
from fwgym.forecasters.base import Availability, ModelUnavailable, QuantileForecaster
from fwgym.forecasters.covering import covering_forecast
from fwgym.forecasters.registry import get_forecaster
from fwgym.tools import parse_action, rounded_lists
from fwgym.tools.planning import forecast_plan


def run(ep, tool, **args):
    return ep.apply(parse_action({"tool": tool, "args": args})).result


class Fake(QuantileForecaster):
    """A chronos_bolt_tiny stand-in: ``mode`` "ok" (quantiles 1..2 x context mean), "raise", "unavailable", "unloadable"."""

    name = "chronos_bolt_tiny"
    bounded = True

    def __init__(self, mode="ok"):
        self.mode, self.calls = mode, 0

    def availability(self):
        return Availability(self.mode != "unavailable", "licence expired" if self.mode == "unavailable" else "")

    def load(self):
        if self.mode == "unloadable":
            raise ModelUnavailable("chronos_bolt_tiny: weights not found")

    def _predict(self, context, horizon):
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("GPU on fire")
        return np.tile(np.linspace(1, 2, 9), (horizon, 1)) * context.mean()


def test_forecast_result_carries_the_quantiles_rounded_to_6_decimals():
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv("electricity", split="test", text_observations=False)
    env.reset(options={"case_id": "elec-ISNE-2024-07-19-day_ahead"})
    *_, info = env.step({"tool": "forecast", "args": {"model": "seasonal_empirical"}})
    res = info["tool_result"]["result"]
    q = env.episode.forecasts[res["forecast_id"]]["quantiles"]  # what plan and scoring use (unrounded)
    shown = np.array(res["quantiles"])
    assert shown.shape == q.shape == (50, 9) and type(res["quantiles"][0][0]) is float
    assert np.max(np.abs(shown - q)) <= 5e-7 + 1e-12 * np.max(q)
    assert all(v == round(v, 6) for row in res["quantiles"] for v in row)
    assert res["quantiles"] == [[round(float(v), 6) for v in row] for row in q]


def test_seasonal_forecast_by_hand(make_episode, case):
    ep = make_episode()
    res = run(ep, "forecast", model="seasonal_empirical")["result"]
    assert (res["credits"], res["context_steps"], res["horizon"], res["budget_remaining"]) == (1027, 336, 50, 113726 - 1027)
    assert (res["start"], res["end"]) == ("2024-07-17T22:00:00Z", "2024-07-19T23:00:00Z")
    assert res["covers_target"] is True and res["target_steps"] == [27, 50]
    q, h = ep.forecasts["f1"]["quantiles"], case.history
    for j in (1, 27, 50):  # step j: the two context values one and two weeks before; levels <= 0.5 the lower one
        lo, hi = sorted((h[j - 1], h[167 + j]))
        assert q[j - 1].tolist() == [lo] * 5 + [hi] * 4


def test_the_forecast_tool_and_the_oracle_share_the_covering_recipe(make_episode, case):
    ep = make_episode()
    run(ep, "forecast", model="seasonal_empirical")
    f = get_forecaster("seasonal_empirical")
    assert covering_forecast(case, f) is ep.forecasts["f1"]["quantiles"]  # one cache entry
    credits, res = priced_candidate(case, "seasonal_empirical")
    mine = forecast_plan(ep, "f1")  # what plan / evaluate_plan use
    assert credits == 1027 and np.array_equal(res.plan.indices, mine.plan.indices)
    assert res.expected_loss == mine.expected_loss


def test_quote_prices_by_bucket_and_charges_nothing(make_episode):
    ep = make_episode(budget=1000)
    q = run(ep, "quote", model="seasonal_empirical", horizon=24)["result"]
    assert (q["credits"], q["affordable"], q["available"], q["budget_remaining"]) == (400, True, True, 1000)
    q = run(ep, "quote", model="seasonal_empirical")["result"]  # defaults: context 336, covering horizon 50 -> bucket 64
    assert (q["credits"], q["context_steps"], q["horizon"], q["affordable"]) == (1027, 336, 50, False)
    unavailable = make_episode(forecasters={"chronos_bolt_tiny": Fake("unavailable")})
    q = run(unavailable, "quote", model="chronos_bolt_tiny", context_steps=96, horizon=24)["result"]
    assert (q["credits"], q["available"], q["unavailable_reason"]) == (7273, False, "licence expired")
    assert ep.spent == unavailable.spent == 0


@pytest.mark.parametrize("mode,budget,code,needle", [
    ("unavailable", 1000, "insufficient_budget", "costs 8452 credits but only 1000 remain"),  # affordability first
    ("unavailable", 10_000, "model_unavailable", "licence expired (nothing was charged)"),
    ("unloadable", 10_000, "model_unavailable", "weights not found (nothing was charged)"),
])
def test_refusals_before_the_charge_are_free(make_episode, mode, budget, code, needle):
    f = Fake(mode)
    ep = make_episode(budget=budget, forecasters={"chronos_bolt_tiny": f})
    err = run(ep, "forecast", model="chronos_bolt_tiny")["error"]
    assert err["code"] == code and needle in err["message"] and ep.spent == 0 and f.calls == 0 and not ep.forecasts


def test_the_charge_stands_when_the_backend_fails(make_episode):
    f = Fake("raise")
    ep = make_episode(forecasters={"chronos_bolt_tiny": f})
    out = ep.apply(parse_action({"tool": "forecast", "args": {"model": "chronos_bolt_tiny", "horizon": 29}}))
    err = out.result["error"]
    assert err["code"] == "backend_error" and "GPU on fire" in err["message"] and "(the charge stands)" in err["message"]
    assert out.charged == ep.spent == 8452 and f.calls == 1 and not ep.forecasts


def test_a_timed_out_forecast_is_a_backend_error_with_the_charge_standing(make_episode):
    import threading

    release = threading.Event()

    class Stuck(Fake):
        bounded = False

        def _predict(self, context, horizon):
            release.wait(5)
            return super()._predict(context, horizon)

    ep = make_episode(forecasters={"chronos_bolt_tiny": Stuck()}, forecast_timeout=0.2)
    try:
        err = run(ep, "forecast", model="chronos_bolt_tiny", horizon=31)["error"]
    finally:
        release.set()
    assert err["code"] == "backend_error" and "no forecast within 0.2 s" in err["message"] and ep.spent == 8452


@pytest.mark.parametrize("args,code,needle", [
    ({"model": "prophet"}, "invalid_arguments", "forecast pool"),
    ({"model": "seasonal_empirical", "context_steps": 167}, "invalid_arguments", "must be in 168..336"),
    ({"model": "seasonal_empirical", "context_steps": 337}, "invalid_arguments", "must be in 168..336"),
    ({"model": "seasonal_empirical", "horizon": 337}, "invalid_arguments", "horizon must be in 1..336"),
    ({"model": "seasonal_empirical", "horizon": 0}, "invalid_arguments", "must be in 1..1000000000"),
    ({"model": "seasonal_empirical", "x": 1}, "invalid_arguments", "unknown argument(s) ['x']"),
])
def test_malformed_requests_are_refused_free(make_episode, args, code, needle):
    ep = make_episode()
    err = run(ep, "forecast", **args)["error"]
    assert err["code"] == code and needle in err["message"] and ep.spent == 0


def test_replay_context_is_bounded_by_the_origin(make_episode):
    ep = make_episode()
    err = run(ep, "replay", model="seasonal_empirical", origin="2024-07-04T03:00:00Z")["error"]  # 6 visible hours
    assert err["code"] == "out_of_range" and "only 6 visible hours precede this origin" in err["message"]
    res = run(ep, "replay", model="seasonal_empirical", origin="2024-07-10T21:00:00Z")["result"]  # 168 hours
    assert (res["context_steps"], res["horizon"], res["observed_steps"], res["complete"]) == (168, 50, 50, True)
    err = run(ep, "replay", model="seasonal_empirical")["error"]
    assert err["code"] == "invalid_arguments" and "missing required argument 'origin'" in err["message"]
    err = run(ep, "replay", model="seasonal_empirical", origin="2024-07-17T21:00:00Z")["error"]
    assert err["code"] == "out_of_range" and "leaves no visible step" in err["message"]
    assert ep.spent == 1027


def _same(x: float, y: float) -> bool:
    return repr(x) == repr(y)  # also tells -0.0 from 0.0 and matches NaN with NaN


@settings(max_examples=300, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                  elements=st.floats(allow_nan=True, allow_infinity=True, width=64)),
       st.integers(0, 8))
def test_rounded_lists_equals_python_round_on_any_floats(a, digits):
    out = rounded_lists(a, digits)
    ref = np.vectorize(lambda v: round(float(v), digits), otypes=[object])(a).tolist() if a.size else a.tolist()
    flat = lambda x: [v for y in x for v in flat(y)] if isinstance(x, list) else [x]  # noqa: E731
    assert len(flat(out)) == a.size and all(_same(u, v) for u, v in zip(flat(out), flat(ref)))


def test_rounded_lists_near_ties_huge_and_overflowing_values():
    rng = np.random.default_rng(0)
    a = np.concatenate([
        np.arange(-4000, 4000) / 128.0,  # exact ties at the 6th decimal (k/128: 0.0078125 -> 0.007812, half to even)
        (np.arange(1, 20000) + 0.5) / 1e6,  # decimal half-way cases, stored just above or below
        rng.normal(5000, 2000, 20000), rng.uniform(-1e7, 1e7, 20000),  # MW-like values
        [1e305, -1.7e308, 4.5e15, 2.0**53, 5e-7, -5e-7, 0.0, -0.0, np.inf, -np.inf, np.nan]])  # * 1e6 overflows
    out = rounded_lists(a, 6)
    assert all(_same(u, round(float(v), 6)) for u, v in zip(out, a))
    assert out[-11] == 1e305 and rounded_lists(np.array(2.5), 0) == 2.0  # 0-d: a float


@pytest.mark.parametrize("a,digits,exc", [([1.5], 16, ValueError), ([1.5], -1, ValueError), ([1.5], 2.0, ValueError),
                                          ([1.5], True, ValueError), (np.array([1 + 2j]), 2, TypeError),
                                          (np.array(["1.5"]), 2, TypeError)])
def test_rounded_lists_refuses_bad_arguments(a, digits, exc):
    with pytest.raises(exc):
        rounded_lists(a, digits)
