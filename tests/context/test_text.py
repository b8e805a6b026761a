"""The context text gives the contract at full precision: a capacity read from the text is on the grid."""
import re

import numpy as np
import pytest

from fwgym.core.cases import build_cases
from fwgym.context.text import render_context
from fwgym.core.contract import GRID, validate_decisions


def _contract_numbers(text: str) -> tuple[float, list[float]]:
    scale = float(re.search(r"scale = (\S+) ", text).group(1))
    grid_line = next(line for line in text.splitlines() if line.startswith("Capacity grid"))
    grid = [float(v) for v in grid_line.split("): ", 1)[1].rstrip(".").split(", ")]
    return scale, grid


@pytest.mark.parametrize("domain", ["electricity", "cycle_hire"])
def test_scale_and_grid_in_the_text_are_exact(domain):
    for case in build_cases(domain, "test")[::25]:
        text = render_context(case, 113726, 12, ("catalog", "submit"))
        scale, grid = _contract_numbers(text)
        assert scale == case.scale  # repr round-trips the float
        assert len(grid) == 33
        np.testing.assert_array_equal(grid, GRID * case.scale)
        # a plan copied from the text, and one computed from the text's scale, both validate
        idx = [0, 6, 12, 18, 24, 30, 32, 26]
        for values in ([grid[k] for k in idx], [scale * float(GRID[k]) for k in idx]):
            plan = validate_decisions([{"decision_id": f"b{b:02d}", "value": v} for b, v in enumerate(values)], case.scale)
            assert plan.indices.tolist() == idx


def test_six_significant_digits_would_be_off_grid():
    # the previous text printed the scale as %.6g; a capacity computed from it misses the grid at level 2.00
    from fwgym.core.contract import PlanError

    case = next(c for c in build_cases("electricity", "test") if c.scale > 10_000)
    rounded = float(f"{case.scale:.6g}")
    with pytest.raises(PlanError) as exc:
        validate_decisions({f"b{b:02d}": rounded * 2.0 for b in range(8)}, case.scale)
    assert exc.value.code == "off_grid"


def test_forecast_task_text_has_no_grid():
    case = build_cases("cycle_hire", "test")[0]
    assert "Capacity grid" not in render_context(case, 113726, 12, ("submit",), None, "forecast")
