"""fwgym.forecasters.covering: the one covering-forecast recipe (request, cache key, target rows, plan)."""
import ast
import importlib.util
from pathlib import Path

import numpy as np

from fwgym.core.cases import get_case
from fwgym.forecasters.base import QuantileForecaster
from fwgym.forecasters.cache import FORECAST_CACHE, cached_quantiles, forecast_key
from fwgym.forecasters.covering import (COVERING_CONTEXT, covering_credits, covering_forecast, plan_on_forecast,
                                        target_quantiles)
from fwgym.core.optimizer import QUANTILE_MASSES, optimal_plan

DAY = get_case("elec-ISNE-2024-07-19-day_ahead")  # horizon 50, target steps 27..50
WEEK = get_case("elec-ISNE-2024-07-19-week_ahead")  # horizon 194, target steps 171..194


class Recorder(QuantileForecaster):
    """Quantile j of step t = (t + 1) * (j + 1) * context[-1]; records every (context, horizon) it sees."""

    name = "recorder"

    def __init__(self):
        self.seen = []

    def _predict(self, context, horizon):
        self.seen.append((context.copy(), horizon))
        return np.outer(np.arange(1, horizon + 1), np.arange(1, 10)) * context[-1]


def test_the_covering_request_is_full_context_and_the_minimal_covering_horizon():
    assert COVERING_CONTEXT == 336
    for case, horizon in ((DAY, 50), (WEEK, 194)):
        f = Recorder()
        q = covering_forecast(case, f)
        (context, h), = f.seen
        assert h == horizon == case.horizon and q.shape == (horizon, 9)
        assert np.array_equal(context, case.history) and len(context) == 336
        assert q[0, 0] == case.history[-1] and q[horizon - 1, 8] == horizon * 9 * case.history[-1]
    assert (covering_credits("seasonal_empirical", DAY), covering_credits("seasonal_empirical", WEEK)) == (1027, 3756)
    assert covering_credits("chronos2", DAY) == 103806


def test_one_cache_entry_per_forecaster_and_request():
    f = Recorder()
    first = covering_forecast(DAY, f)
    again = cached_quantiles(f, DAY.series_id, DAY.history[-336:], DAY.last_visible, 50,
                             predict=lambda c, h: (_ for _ in ()).throw(AssertionError("recomputed")))
    assert again is first and len(f.seen) == 1 and not first.flags.writeable
    assert forecast_key(DAY.series_id, DAY.last_visible, 336, 50) == ("ISNE", DAY.last_visible, 336, 50)
    assert first is FORECAST_CACHE.get_or_compute(f, forecast_key("ISNE", DAY.last_visible, 336, 50), None)
    shorter = cached_quantiles(f, DAY.series_id, DAY.history[-168:], DAY.last_visible, 50)  # another request
    assert shorter is not first and len(f.seen) == 2 and len(f.seen[1][0]) == 168
    other = Recorder()  # another instance (e.g. another revision) has its own entries
    assert covering_forecast(DAY, other) is not first and len(other.seen) == 1


def test_predict_replaces_the_forecaster_call_on_a_miss():
    f = Recorder()
    q = covering_forecast(WEEK, f, predict=lambda c, h: np.full((h, 9), float(len(c))))
    assert f.seen == [] and q.shape == (194, 9) and np.all(q == 336.0)


def test_target_rows_and_the_plan_on_them():
    q = covering_forecast(DAY, Recorder())
    rows = target_quantiles(DAY, q)
    assert rows.shape == (24, 9) and np.array_equal(rows, q[26:50])
    assert target_quantiles(DAY, q[:49]) is None and plan_on_forecast(DAY, q[:49]) is None
    assert np.array_equal(target_quantiles(DAY, np.vstack([q, q])), q[26:50])  # a longer forecast: the same rows
    got = plan_on_forecast(DAY, q / 80.0)
    want = optimal_plan(q[26:50] / 80.0, DAY.scale, DAY.shortage, QUANTILE_MASSES)
    assert np.array_equal(got.plan.indices, want.plan.indices) and got.expected_loss == want.expected_loss
    assert np.array_equal(got.cost, want.cost)


def _fwgym_imports(module: str) -> set[str]:
    """The fwgym modules ``module`` imports, read from its source (every import statement, any depth)."""
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if importlib.util.find_spec(node.module).submodule_search_locations)
    return {m for m in out if m.startswith("fwgym.") and importlib.util.find_spec(m) is not None}


def test_the_recipe_knows_no_env_and_no_tool():
    seen, todo = set(), ["fwgym.forecasters.covering"]
    while todo:  # the transitive closure of fwgym imports (the package's own __init__ registers envs: not followed)
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(_fwgym_imports(m))
    assert "fwgym.forecasters.registry" in seen and "fwgym.core.cases" in seen
    assert not [m for m in seen if m.startswith(("fwgym.envs", "fwgym.tools", "fwgym.agents", "fwgym.wrappers",
                                                 "fwgym.baselines", "fwgym.evaluation", "fwgym.cli"))], sorted(seen)
