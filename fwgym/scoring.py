"""Per-case scores and cohort-weighted aggregation (DESIGN §5; FWBench protocol §5).

Per case ``i`` with decision loss ``loss_i``, perfect-demand floor ``F_i``, credits spent ``c_i``::

    R_i = (loss_i - F_i) / sigma_d          (normalised excess loss, sigma_d per domain)
    S_i = 0.5 * (R_i + c_i / B)             (B = 113,726 credits)

``sigma_d`` is the mean excess loss of the hour-of-day empirical policy on the pre-test (dev)
cases of domain ``d``, computed by ``fwgym calibrate-sigma`` and frozen in
``fwgym/config/sigma.json``.

Aggregation (protocol §5.3): every domain present gets an equal share, every cohort inside a
domain an equal share of it (the test split: each electricity cohort 1/6, cycle hire 1/2); inside a
cohort, cases are averaged within each (series x lead) group and the groups averaged equally.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

BUDGET = 113_726  #: credits per case
SIGMA_PATH = Path(__file__).resolve().parent / "config" / "sigma.json"
#: values reported by the FWBench paper on its own data, for comparison only
REFERENCE_SIGMA = {"electricity": 0.054206794827132906, "cycle_hire": 0.04340576638915502}


def load_sigma(path: str | Path | None = None) -> dict[str, float]:
    """Frozen per-domain sigma from ``fwgym/config/sigma.json`` (or ``path``).

    Raises:
        FileNotFoundError: no calibration file (run ``fwgym calibrate-sigma``).
        ValueError: the file lacks a domain or holds a non-positive value.
    """
    p = Path(path) if path is not None else SIGMA_PATH
    if not p.is_file():
        raise FileNotFoundError(f"sigma calibration file {p} is missing; run `fwgym calibrate-sigma` to create it")
    try:
        data = json.loads(p.read_text())
        sig = {str(d): float(v) for d, v in data["sigma"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{p}: not a sigma calibration file ({type(exc).__name__}: {exc}); "
                         "expected {\"sigma\": {\"electricity\": x, \"cycle_hire\": y}}") from None
    for d in ("electricity", "cycle_hire"):
        if d not in sig or not (np.isfinite(sig[d]) and sig[d] > 0):
            raise ValueError(f"{p}: sigma for domain {d!r} missing or not > 0")
    return sig


def case_score(loss: float, floor: float, credits: float, sigma: float, budget: float = BUDGET) -> tuple[float, float]:
    """``(R, S)`` of one case: ``R = (loss - floor)/sigma``, ``S = (R + credits/budget)/2``.

    Raises:
        ValueError: sigma or budget not > 0, or a non-finite input.
    """
    if not sigma > 0 or not budget > 0:
        raise ValueError(f"sigma and budget must be > 0 (got {sigma!r}, {budget!r})")
    if not all(np.isfinite(x) for x in (loss, floor, credits)):
        raise ValueError("loss, floor and credits must be finite")
    r = (loss - floor) / sigma
    return float(r), float(0.5 * (r + credits / budget))


def case_weights(records: Sequence[Mapping]) -> np.ndarray:
    """Aggregation weight of each record (sums to 1), from its ``domain``, ``cohort``, ``series_id``, ``lead``.

    Records must belong to one policy (each case once).

    Raises:
        ValueError: empty input or a case id repeated.
    """
    if not records:
        raise ValueError("no records to weight")
    ids = [r["case_id"] for r in records]
    if len(set(ids)) != len(ids):
        raise ValueError("case ids repeat: pass the records of one policy only")
    tree: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, r in enumerate(records):
        tree[r["domain"]][r["cohort"]][(r["series_id"], r["lead"])].append(i)
    w = np.zeros(len(records))
    for cohorts in tree.values():
        for groups in cohorts.values():
            for members in groups.values():
                w[members] = 1.0 / len(tree) / len(cohorts) / len(groups) / len(members)
    return w


def aggregate(records: Sequence[Mapping], fields: Iterable[str] = ("S", "R", "loss", "floor", "credits", "calls")) -> dict[str, float]:
    """Weighted means of ``fields`` over one policy's records (weights of :func:`case_weights`),
    plus ``n`` (cases) and ``valid`` (count of valid plans)."""
    w = case_weights(records)
    out: dict[str, float] = {f: float(np.dot(w, [float(r[f]) for r in records])) for f in fields}
    out["n"] = len(records)
    out["valid"] = int(sum(bool(r["valid"]) for r in records))
    return out
