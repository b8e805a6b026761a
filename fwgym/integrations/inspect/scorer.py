"""The inspect-ai scorer of the fwgym tasks and its metrics: fwgym's own record, score and aggregation.

:func:`fwgym_scorer` returns, per sample, the episode's S (``Score.value``; lower is better) with the record's R,
loss, floor, credits, calls, valid and status as metadata (and the whole record under ``"record"``: what
``fwgym import-inspect`` reads). The episode was scored by the env (:func:`fwgym.agents.run_episode`); the scorer
only reports it.

The metrics aggregate the samples' records the way ``fwgym leaderboard`` does, with the same code:
:func:`fwgym.evaluation.leaderboard.leaderboard` (the cohort weights and series x lead groups of
:func:`fwgym.core.scoring.case_weights`) for ``S``, ``R``, ``loss``, ``credits`` and ``valid`` (the share of valid
episodes), and :class:`fwgym.evaluation.bootstrap.ClusterBootstrap` (series clusters resampled within each domain,
10,000 draws, seed 1701) for the 95 % percentile interval of S (``S_lo``, ``S_hi``). Samples without a record
(errored in inspect) are not in any aggregate.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT, ClusterBootstrap
from fwgym.evaluation.leaderboard import leaderboard

try:  # the metrics' annotation (inspect reads it); aggregate_records needs no inspect
    from inspect_ai.scorer import SampleScore
except ImportError:  # pragma: no cover - the inspect extra is not installed
    SampleScore = Any  # type: ignore[misc,assignment]

__all__ = ["fwgym_scorer", "aggregate_records", "registry_name", "sample_score", "METRIC_NAMES", "SCORER_NAME"]

#: the scorer's name in inspect's registry; logs key the scores by its unqualified name (``score``)
SCORER_NAME = "fwgym/score"


def sample_score(sample) -> Any:
    """The fwgym ``Score`` of a logged sample (``None`` when it has none): the key is the scorer's name as the log
    spells it (``score``, or ``fwgym/score``)."""
    scores = getattr(sample, "scores", None) or {}
    return scores.get("score", scores.get(SCORER_NAME))

#: the metrics reported per task
METRIC_NAMES = ("S", "S_lo", "S_hi", "R", "loss", "credits", "valid")


def registry_name(name: str) -> str:
    """``fwgym/<name>`` as inspect's registry will spell it: inspect prefixes the package name itself when it sees
    fwgym as an installed package, and not when fwgym is imported from a source folder (the current directory of a
    checkout, whose ``fwgym.egg-info`` hides the install), so the prefix is added here only then."""
    try:
        from inspect_ai._util.package import get_installed_package_name

        installed = get_installed_package_name(registry_name) == "fwgym"
    except Exception:  # noqa: BLE001 - another inspect: let it prefix (the documented behaviour)
        installed = True
    return name if installed else f"fwgym/{name}"


def aggregate_records(records: Sequence[Mapping], n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> dict[str, float]:
    """``{S, S_lo, S_hi, R, loss, credits, valid}`` of one policy's records: the leaderboard's weighted aggregates
    and the cluster-bootstrap 95 % interval of S (module docstring); NaN for no records.

    Raises:
        ValueError: records of several policies, or a case twice (as the leaderboard).
    """
    if not records:
        return dict.fromkeys(METRIC_NAMES, float("nan"))
    rows = leaderboard(records)
    if len(rows) != 1:
        raise ValueError(f"the records are of {len(rows)} policies; aggregate one at a time")
    row = rows[0]
    draws = ClusterBootstrap(records, n_boot, seed).draws(np.array([float(r["S"]) for r in records]))[:, 0]
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return {"S": float(row["S"]), "S_lo": float(lo), "S_hi": float(hi), "R": float(row["R"]),
            "loss": float(row["loss"]), "credits": float(row["credits"]),
            "valid": sum(bool(r["valid"]) for r in records) / len(records)}


def _records(scores: Sequence[Any]) -> list[dict]:
    out = []
    for s in scores:
        meta = s.score.metadata or {}
        rec = meta.get("record")
        if isinstance(rec, Mapping) and rec.get("S") is not None:
            out.append(dict(rec))
    return out


def _metric(name: str):
    from inspect_ai.scorer import metric

    @metric(name=registry_name(name))
    def make():
        def compute(scores: list[SampleScore]) -> float:
            return aggregate_records(_records(scores))[name]
        return compute

    return make


def fwgym_scorer():
    """The scorer (``@scorer`` of inspect; metrics :data:`METRIC_NAMES`)."""
    from inspect_ai.scorer import Score, scorer

    @scorer(metrics=[_metric(n)() for n in METRIC_NAMES], name=registry_name("score"))
    def make():
        async def score(state, target):
            record = (state.metadata or {}).get("fwgym_record")
            if record is None:
                return Score(value=float("nan"), explanation="the episode did not finish (no fwgym record)")
            detail = {k: record.get(k) for k in ("R", "loss", "floor", "credits", "calls", "valid", "status")}
            answer = record.get("levels") if record.get("levels") is not None else record.get("submission")
            return Score(value=float(record["S"]) if record.get("S") is not None else float("nan"),
                         answer=None if answer is None else str(answer)[:2000],
                         explanation=f"{record['status']}" + (f": {record['reason']}" if record.get("reason") else ""),
                         metadata={**detail, "record": dict(record)})
        return score

    return make()
