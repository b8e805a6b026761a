"""fwgym.rl.recorded: the guide-table case draw equals ``np.searchsorted(side="right")`` exactly."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fwgym.rl.recorded import Outcomes, _guide_table


def _searcher(bounds: np.ndarray, max_k: int = 1 << 14) -> Outcomes:
    out = Outcomes.__new__(Outcomes)  # only the draw state: no env needed
    out._guide, out._guide_k, out._guide_m, out._guide_bounds = _guide_table(bounds, max_k)
    return out


def _bounds(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    b = np.cumsum(w) / w.sum()
    b[-1] = np.inf  # as Outcomes.draw_bounds
    return b


def _probes(bounds: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Uniforms at every place an off-by-one hides: the bounds and their float neighbours, bucket edges, 0, 1-."""
    finite = bounds[np.isfinite(bounds) & (bounds < 1)]
    edges = np.arange(k, dtype=np.float64) / k
    near = np.concatenate([finite, np.nextafter(finite, 0), np.nextafter(finite, 1), edges, np.nextafter(edges[1:], 0)])
    u = np.concatenate([near, rng.random(20_000), [0.0, np.nextafter(1.0, 0)]])
    return u[(u >= 0) & (u < 1)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), st.floats(1e-9, 1e3)), min_size=1, max_size=300).filter(lambda w: sum(w) > 0),
       st.integers(0, 2**32 - 1))
def test_the_guide_table_draws_the_searchsorted_case(weights, seed):
    bounds = _bounds(weights)
    out = _searcher(bounds)
    u = _probes(bounds, out._guide_k, np.random.default_rng(seed))
    np.testing.assert_array_equal(out.case_index(u), np.searchsorted(bounds, u, side="right"))


def test_crowded_bounds_take_more_comparisons_and_stay_exact():
    # 2,000 bounds packed into [0.5, 0.5 + 1e-9): no bucket size separates them, M grows instead
    w = np.concatenate([[0.5e9], np.full(2000, 1e-3 / 2000), [0.5e9 - 1e-3]])
    bounds = _bounds(w)
    out = _searcher(bounds)
    assert out._guide_m > 2 and out._guide_k == 1 << 14
    u = _probes(bounds, out._guide_k, np.random.default_rng(0))
    np.testing.assert_array_equal(out.case_index(u), np.searchsorted(bounds, u, side="right"))


def test_uniform_weights_need_one_comparison():
    out = _searcher(_bounds(np.ones(1000)))
    assert (out._guide_k, out._guide_m) == (4096, 1)
    assert out.case_index(np.array([0.0, 0.0005, 0.001, 0.9995, np.nextafter(1.0, 0)])).tolist() == [0, 0, 1, 999, 999]
