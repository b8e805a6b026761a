"""Re-scored results (DESIGN §9 trust; issue 17.4): every stored record is re-scored before it is aggregated.

Re-scoring (submission -> score from the packaged data) is all this module checks; what vouches for a row
beyond it (the manifest's hashes, a replay of the episodes) is :mod:`fwgym.evaluation.marks`.

A record states its case, what was submitted (``levels`` of a decision plan, or the forecast in
``submission``), the credits charged and its score. :func:`verify_record` rebuilds the case from the
packaged data (and the case's scenario from the run's scenario seed, in the context and forecast
suites), validates the submission again with the env's own validators, and scores it with the ONE
scorer the env used (:func:`fwgym.core.scorer.score_submission`), so the check follows any change of the
scoring rules automatically. A record whose stored ``loss``, ``floor``, ``R`` or ``S`` (and, in the
forecast suite, ``rcrps``, ``crps``, ``alpha``, ``rcrps_no_violation``, ``rcrps_fair``) differ from the re-computed ones is refused, as are
non-finite scores, invalid submissions, inconsistent statuses and credits outside ``[0, budget]``.

Tolerance. The re-computation runs the same code on the same inputs, so on one machine it is bit for
bit equal; across machines and library builds, NumPy's and numba's reductions may add the 24 hourly
terms (or the sample pairs of a CRPS) in another order or with another SIMD width, which moves a
result by a few units in the last place (at most about ``n * 2**-52`` relative for n terms, n <= 10,000
samples: ~2e-12 in the very worst case, ~1e-14 for the 24-hour sums). A stored value is accepted when
``|stored - recomputed| <= 1e-12 * max(1, |recomputed|)`` (:data:`RTOL`): a billion times finer than the
fourth decimal the leaderboard prints, so no edit that could change a ranking passes, and no honest
record is refused for rounding. Credits are integers and compared exactly.

What is taken as recorded: the credits and the submission (they cannot be re-derived without playing
the agent again); the run manifest's per-record hashes, count and statuses (:mod:`fwgym.evaluation.results`)
catch edits of those, and deleted or added records, unless the manifest is rewritten too. Without the
manifest nothing does: a source without one is refused unless the caller accepts it as NOT HASH-CHECKED
(``allow_unverified``, ``--allow-unverified``), and an edited submission re-scored consistently
(e.g. the hindsight plan with its S = 0) then passes this module's check.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from fwgym.core.cases import build_cases
from fwgym.core.contract import GRID, PlanError, validate_forecast, validate_levels
from fwgym.evaluation.records import is_scored
from fwgym.context.alpha import case_alpha
from fwgym.context.scenarios import Scenario, make_scenario
from fwgym.core.scorer import score_submission
from fwgym.core.scoring import BUDGET
from fwgym.suites import get_suite
from fwgym.validation import is_int, is_number

__all__ = ["RTOL", "VERIFIED_FIELDS", "ENV_STATUSES", "RunSettings", "same_value", "settings_of", "verify_record", "rescore"]

#: relative tolerance of a stored score against its re-computation (see the module docstring)
RTOL = 1e-12
#: the fields compared, per task
VERIFIED_FIELDS: dict[str, tuple[str, ...]] = {"decision": ("loss", "floor", "R", "S"),
                                               "forecast": ("loss", "floor", "R", "S", "rcrps", "crps", "alpha",
                                                            "rcrps_no_violation", "rcrps_fair")}
#: statuses the env ends a scored episode with
ENV_STATUSES: tuple[str, ...] = ("submitted", "invalid_submission", "abstained", "call_limit_exceeded")


class RunSettings(dict):
    """The settings a record set was scored under: ``suite`` (decision, context, forecast), ``sigma``
    ({domain: sigma_d}), ``budget``, ``scenario_seed``, ``credit_weight`` (forecast suite). A ``dict``."""

    @property
    def task(self) -> str:
        return get_suite(self["suite"]).task

    @property
    def scenarios(self) -> bool:
        return get_suite(self["suite"]).scenarios


def same_value(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal, numbers (not bools) within :data:`RTOL` relative to ``b`` (ints exactly,
    NaN equal to NaN), lists/tuples and mappings element by element: how replays and trace checks compare what was
    recorded with what they find."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b or (math.isnan(a) and math.isnan(b))
    return abs(a - b) <= RTOL * max(1.0, abs(b))


def settings_of(manifest: Mapping | None) -> RunSettings | None:
    """The :class:`RunSettings` a run manifest's records were scored under (``None`` when the manifest does not
    say: no ``settings`` with a suite and a sigma)."""
    st = (manifest or {}).get("settings") or {}
    if not isinstance(st, Mapping) or st.get("suite") not in ("decision", "context", "forecast") or not isinstance(
            st.get("sigma"), Mapping):
        return None
    return RunSettings(suite=st["suite"], split=st.get("split"), sigma=dict(st["sigma"]),
                       budget=st.get("budget", BUDGET), scenario_seed=st.get("scenario_seed", 0),
                       credit_weight=st.get("credit_weight", 0.0))


@lru_cache(maxsize=None)
def _index(domain: str, split: str) -> dict:
    return {c.case_id: c for c in build_cases(domain, split)}


@lru_cache(maxsize=65536)
def _scenario(case_id: str, domain: str, split: str, seed: int) -> Scenario:
    return make_scenario(_index(domain, split)[case_id], seed)


def _close(stored, fresh) -> bool:
    if fresh is None or stored is None:
        return stored is None and fresh is None
    if not is_number(stored):
        return False
    if not math.isfinite(stored):
        return False
    return abs(stored - fresh) <= RTOL * max(1.0, abs(fresh))


def rescore(record: Mapping, settings: RunSettings) -> dict:
    """The score fields of ``record`` re-computed from the packaged data (what the env would have stored).

    Raises:
        ValueError: the record's case is not in the packaged split, its case fields disagree with the
            case, its submission is not valid (edited), or its credits are not an integer in
            ``[0, budget]`` (the message says what).
    """
    domain, split, cid = record["domain"], record["split"], record["case_id"]
    try:
        case = _index(domain, split)[cid]
    except (KeyError, ValueError):
        raise ValueError(f"case {cid!r} is not a case of {domain}/{split} in the packaged data") from None
    for f in ("cohort", "series_id", "lead"):
        if record[f] != getattr(case, f):
            raise ValueError(f"{f} {record[f]!r} is not the case's ({getattr(case, f)!r})")
    budget = int(settings.get("budget", BUDGET))
    credits = record["credits"]
    if not is_int(credits) or not 0 <= credits <= max(budget, 0):
        raise ValueError(f"credits {credits!r} is not an integer in [0, {budget}]")
    if "budget_left" in record and record["budget_left"] != budget - credits:
        raise ValueError(f"budget_left {record['budget_left']!r} != budget - credits = {budget - credits}")
    scenario = _scenario(cid, domain, split, int(settings.get("scenario_seed", 0))) if settings.scenarios else None
    if scenario is not None and "scenario" in record and record["scenario"] != scenario.family:
        raise ValueError(f"scenario {record['scenario']!r} is not the case's ({scenario.family!r} with scenario seed "
                         f"{settings.get('scenario_seed', 0)})")
    if not settings.scenarios and record.get("scenario") is not None:
        raise ValueError(f"a {settings['suite']}-suite record has scenario {record['scenario']!r}")
    status, valid = record["status"], record["valid"]
    if status not in ENV_STATUSES:
        raise ValueError(f"status {status!r} is not one the env ends a scored episode with {list(ENV_STATUSES)}")
    if bool(valid) != (status == "submitted"):
        raise ValueError(f"valid {valid!r} contradicts status {status!r}")
    task = settings.task
    submission = _decision_submission(record, case, valid) if task == "decision" else \
        _forecast_submission(record, case, valid)
    sigma = settings["sigma"][domain]
    return score_submission(case, scenario, task, submission, credits, sigma=sigma, budget=budget,
                            credit_weight=float(settings.get("credit_weight", 0.0)),
                            alpha=case_alpha(case, scenario) if task == "forecast" else None)


def _decision_submission(record: Mapping, case, valid: bool):
    """The decision record's plan, re-validated from its ``levels`` (``None`` for an invalid episode)."""
    if "rcrps" in record:
        raise ValueError("a forecast-task record (it has rcrps) in a decision-suite run")
    levels = record["levels"]
    if not valid:
        if levels is not None:
            raise ValueError(f"an invalid episode has levels {levels!r}")
        return None
    try:
        submission = validate_levels(levels, case.scale)
    except PlanError as exc:
        raise ValueError(f"levels {levels!r} are not a valid plan ({exc.code}: {exc.message})") from None
    if [float(GRID[i]) for i in submission.indices] != [float(x) for x in levels]:
        raise ValueError(f"levels {levels!r} are not exactly grid levels")
    return submission


def _forecast_submission(record: Mapping, case, valid: bool):
    """The forecast record's submission, re-validated (``None`` for an invalid episode)."""
    if "rcrps" not in record:
        raise ValueError("a decision-task record (no rcrps) in a forecast-suite run")
    sub = record.get("submission")
    if not valid:
        if sub is not None:
            raise ValueError("an invalid episode holds a submission")
        return None
    if not isinstance(sub, Mapping) or sub.get("kind") not in ("quantiles", "samples"):
        raise ValueError("a valid forecast record holds no submission {'kind', 'values'} to re-score")
    try:
        return validate_forecast({sub["kind"]: sub.get("values")}, case.scale)
    except PlanError as exc:
        raise ValueError(f"its submission is not a valid forecast ({exc.code}: {exc.message})") from None


def verify_record(record: Mapping, settings: RunSettings, where: str = "") -> None:
    """Refuse a record whose stored score is not the re-computed one (:func:`rescore`).

    Args:
        record: one record (a harness_error record has no score and is not re-scored here; the
            readers refuse it as incomplete).
        settings: the run's :class:`RunSettings`.
        where: ``"file:line"`` for the message.

    Raises:
        ValueError: naming ``where``, the record (policy, case) and the field: ``stored X, re-scored Y``.
    """
    if not is_scored(record):
        return
    head = (f"{where + ': ' if where else ''}record of policy {record.get('policy')!r} on case "
            f"{record.get('case_id')!r}")
    for f in VERIFIED_FIELDS[settings.task][:4]:
        v: Any = record.get(f)  # any JSON value until checked
        if not is_number(v) or not math.isfinite(v):
            raise ValueError(f"{head}: {f} = {v!r} is not a finite number (refused)")
    try:
        fresh = rescore(record, settings)
    except ValueError as exc:
        raise ValueError(f"{head}: {exc} (refused: the record was edited or belongs to other settings)") from None
    for f in VERIFIED_FIELDS[settings.task]:
        if f in fresh and not _close(record.get(f), fresh[f]):
            raise ValueError(f"{head}: stored {f} = {record.get(f)!r} but re-scored {f} = {fresh[f]!r} from the "
                             "packaged data (refused: the record was edited or scored under other settings)")
    if settings.task == "decision" and record.get("levels") is not None:
        if not np.array_equal(np.asarray(record["levels"], dtype=float), np.asarray(fresh["levels"], dtype=float)):
            raise ValueError(f"{head}: levels do not round-trip through the plan validator (refused)")
