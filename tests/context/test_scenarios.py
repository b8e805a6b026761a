"""Scenario families: determinism, plausibility, RoI matching the stated hours, no realised values in text."""
import re

import numpy as np
import pytest

from fwgym.core.cases import build_cases
from fwgym.context.scenarios import FAMILIES, local_hours, make_scenario


@pytest.fixture(scope="module")
def test_cases():
    return build_cases("electricity", "test") + build_cases("cycle_hire", "test")


def test_deterministic_under_seed(test_cases):
    for c in test_cases[::50]:
        a, b = make_scenario(c, seed=3), make_scenario(c, seed=3)
        assert a.text == b.text and np.array_equal(a.roi, b.roi) and a.params == b.params
        np.testing.assert_array_equal(a.apply(c.target()), b.apply(c.target()))
    assert any(make_scenario(c, 0).text != make_scenario(c, 1).text for c in test_cases[:20])


def test_every_family_occurs_and_values_stay_plausible(test_cases):
    seen = set()
    for c in test_cases:
        s = make_scenario(c)
        seen.add(s.family)
        y = s.apply(c.target())
        assert np.all(y >= 0) and np.all(np.isfinite(y))
        if c.domain == "cycle_hire":
            assert np.array_equal(y, np.rint(y))
        idx = np.flatnonzero(s.roi)
        assert len(idx) >= 1 and np.all(np.diff(idx) == 1)
        if s.family != "temperature_table":  # (a covariate table scales every hour by its own temperature)
            np.testing.assert_array_equal(y[~s.roi], c.target()[~s.roi])  # only the announced hours change
    assert seen == set(FAMILIES["electricity"]) | set(FAMILIES["cycle_hire"])


def test_roi_matches_stated_utc_hours(test_cases):
    # the UTC span forms (seen: local with UTC in brackets; held out: UTC only) name exactly the announced hours
    for c in test_cases[::5] + build_cases("electricity", "dev")[::9]:
        for fam in FAMILIES[c.domain]:
            if fam in ("temperature_table", "rain_table"):
                continue
            form = "local_utc" if c.split == "dev" else "utc_to"
            s = make_scenario(c, family=fam, phrasing={"span": form, "distractor": "none"})
            utc = re.search(r"\((\d{2}):00-(\d{2}):00 UTC\)" if form == "local_utc" else r"from (\d{2}):00 to (\d{2}):00 UTC",
                            s.text, re.IGNORECASE)
            a = (int(utc.group(1)) - c.target_start % 24) % 24
            b = (int(utc.group(2)) - c.target_start % 24) % 24 or 24
            expected = np.zeros(24, bool)
            expected[a:b] = True
            named = s.roi if fam != "peak_pricing" else s.roi & ~np.roll(s.roi & ~np.roll(s.roi, 1), 0) | expected
            np.testing.assert_array_equal(expected & s.roi, expected, err_msg=s.text)
            if fam != "peak_pricing":
                np.testing.assert_array_equal(named, expected, err_msg=s.text)


@pytest.mark.parametrize("family,check", [
    ("station_closure", lambda y, t, s: np.all(y[s.roi] == 0)),
    ("heavy_rain", lambda y, t, s: np.array_equal(y[s.roi], np.rint(t[s.roi] * s.params["factor"]))),
    ("event_surge", lambda y, t, s: np.array_equal(y[s.roi], np.rint(t[s.roi] * s.params["factor"]))),
])
def test_cycle_families_by_hand(family, check):
    c = build_cases("cycle_hire", "test")[0]
    s = make_scenario(c, family=family)
    assert check(s.apply(c.target()), c.target(), s)


def test_electricity_families_by_hand():
    c = build_cases("electricity", "test")[10]
    t = c.target()
    s = make_scenario(c, family="temperature_advisory")
    np.testing.assert_allclose(s.apply(t)[s.roi], t[s.roi] * (1 + s.params["pct"] / 100))
    s = make_scenario(c, family="industrial_outage")
    np.testing.assert_allclose(s.apply(t)[s.roi], np.maximum(t[s.roi] - s.params["mw"], 0))
    s = make_scenario(c, family="transmission_limit")
    assert np.all(s.apply(t)[s.roi] <= s.params["cap"]) and np.all(s.upper[s.roi] == s.params["cap"])
    assert np.all(np.isnan(s.upper[~s.roi]))
    with pytest.raises(ValueError):
        make_scenario(c, family="station_closure")


def test_text_does_not_depend_on_realised_values(test_cases):
    """Counterfactual probe: change every value after the cut-off; the note must not change."""
    from dataclasses import replace

    from fwgym.core.series import Series

    for c in test_cases[::7]:
        v = np.array(c.series.values)
        cut = c.as_of - 2 - c.series.start_hour
        v[cut:] = v[cut:] * 1.37 + 11
        altered = replace(c, series=Series(c.series.series_id, c.series.domain, c.series.name, c.series.unit,
                                           c.series.start_hour, v))
        assert not np.allclose(altered.target(), c.target())
        a, b = make_scenario(c), make_scenario(altered)
        assert a.text == b.text and np.array_equal(a.roi, b.roi) and a.params == b.params


def test_local_hours_equal_hour_by_hour_conversion_including_clock_changes():
    # the fast path (constant UTC offset over the target) against converting every hour, on all test and
    # dev cases and on train cases around the clock changes (US: 2nd Sun of March / 1st Sun of Nov; UK: last Suns)
    from datetime import date

    from fwgym.core.cases import build_cases
    from fwgym.context.scenarios import local_zone
    from fwgym.core.series import hour_to_datetime

    changes = {date(2023, 3, 12), date(2023, 11, 5), date(2022, 3, 13), date(2022, 11, 6), date(2015, 3, 29),
               date(2015, 10, 25), date(2015, 3, 28), date(2015, 10, 24), date(2023, 3, 11), date(2023, 11, 4)}
    checked = shifted = 0
    for domain in ("electricity", "cycle_hire"):
        cases = list(build_cases(domain, "test")) + list(build_cases(domain, "dev"))
        cases += [c for c in build_cases(domain, "train") if c.target_date in changes]
        for case in cases:
            tz = local_zone(case)
            ref = [hour_to_datetime(int(h)).astimezone(tz).hour for h in case.target_hours]
            assert local_hours(case).tolist() == ref, case.case_id
            checked += 1
            shifted += len(set((b - a) % 24 for a, b in zip(ref, ref[1:]))) > 1
    assert checked > 2500 and shifted > 0  # some targets do span a clock change
