"""Loss-cost weight sensitivity (FWBench paper §4.5): saved decisions re-scored with
``S = W*R + (1 - W)*c/B`` for a loss weight ``W`` other than the protocol's 1/2.

A record of a decision suite holds what was decided (its plan, re-scored from the packaged data when it
is read: :mod:`fwgym.evaluation.verify`), its loss, perfect-demand floor and credits. Re-weighting
recomputes each case's S with the one formula of the score, :func:`fwgym.core.scoring.case_score`
(``loss_weight=W``), from those fields and the run's sigma and budget; the aggregates and the paired
bootstrap intervals then follow from the re-scored records as for the protocol's S. ``W = 1/2``
reproduces the stored S bit for bit. The forecast suite's S (``R + w*c/B``) has its own credit weight,
set when the run is made (``credit_weight``), so it is not re-weighted here.

:func:`sensitivity` ranks the policies at several weights at once (the paper: the best agent stays
first; Bolt Tiny overtakes hour-of-day when the loss weighs more), with Kendall's tau-b of each ranking
against the protocol's (``scipy.stats.kendalltau``).
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

from fwgym.core.scoring import BUDGET, LOSS_WEIGHT, case_score
from fwgym.evaluation.formats import Table

__all__ = ["LOSS_WEIGHT", "DECISION_SUITES", "check_loss_weight", "weighted_formula", "reweight", "sensitivity",
           "sensitivity_table"]

#: the suites whose S is ``(R + c/B)/2`` and can be re-weighted
DECISION_SUITES: tuple[str, ...] = ("decision", "context")


def check_loss_weight(w: float) -> float:
    """``w`` as a float, refused unless a finite number in [0, 1].

    Raises:
        ValueError: anything else.
    """
    try:
        x = float(w)
    except (TypeError, ValueError):
        raise ValueError(f"the loss weight W must be a number in [0, 1], got {w!r}") from None
    if not (math.isfinite(x) and 0.0 <= x <= 1.0) or isinstance(w, bool):
        raise ValueError(f"the loss weight W must be a number in [0, 1], got {w!r}")
    return x


def weighted_formula(loss_weight: float) -> str:
    """The decision suites' score formula at ``loss_weight`` W: ``"S = (R + c/B)/2, R = (loss − F)/σ"``
    at the protocol's W = 1/2, else ``"S = W·R + (1−W)·c/B, R = (loss − F)/σ"`` with the numbers."""
    w = check_loss_weight(loss_weight)
    s = "S = (R + c/B)/2" if w == LOSS_WEIGHT else f"S = {w:g}·R + {1 - w:g}·c/B"
    return f"{s}, R = (loss − F)/σ"


def reweight(records: Sequence[Mapping], loss_weight: float, sigma: Mapping[str, float], budget: float = BUDGET,
             suite: str = "decision") -> list[dict]:
    """Copies of decision-suite ``records`` with ``S`` re-computed at ``loss_weight`` W by
    :func:`fwgym.core.scoring.case_score` from each record's ``loss``, ``floor`` and ``credits``
    (``R`` is re-computed the same way and checked against the stored one).

    Args:
        records: scored records of a decision or context suite run (verified, e.g. by
            :func:`fwgym.evaluation.load_results`).
        loss_weight: W in [0, 1] (the protocol's: 0.5, which returns the stored S unchanged).
        sigma: ``{domain: sigma_d}`` the run was scored with (its manifest's ``settings.sigma``).
        budget: the run's budget B. suite: the run's suite.

    Raises:
        ValueError: the forecast suite (its S is not ``(R + c/B)/2``), a weight outside [0, 1], a domain
            without sigma, or a stored R that the run's settings do not reproduce.
    """
    if suite not in DECISION_SUITES:
        raise ValueError(f"the loss weight re-scores decision suites ({', '.join(DECISION_SUITES)}); the {suite} "
                         "suite's S = R + w·c/B has its own credit weight, set when the run is made")
    w = check_loss_weight(loss_weight)
    out = []
    for r in records:
        if r["domain"] not in sigma:
            raise ValueError(f"no sigma for domain {r['domain']!r} in the run's settings")
        R, S = case_score(float(r["loss"]), float(r["floor"]), float(r["credits"]), float(sigma[r["domain"]]),
                          float(budget), loss_weight=w)
        if abs(R - float(r["R"])) > 1e-9 * max(1.0, abs(R)):
            raise ValueError(f"record of {r['policy']!r} on {r['case_id']!r}: R {r['R']!r} is not (loss - floor)/sigma "
                             f"= {R!r} with the run's sigma; it cannot be re-weighted")
        out.append({**r, "S": S})
    return out


def sensitivity(records: Sequence[Mapping], weights: Sequence[float], sigma: Mapping[str, float],
                budget: float = BUDGET, suite: str = "decision", reference: str | None = None, n_boot: int = 10_000,
                seed: int = 1701) -> tuple[list[dict], dict[float, float | None]]:
    """The leaderboard at each loss weight of ``weights``.

    Returns:
        ``(rows, tau)``: one row per policy in the order of the protocol's S (W = 1/2, whether or not it
        is among ``weights``), with ``policy`` and, per weight ``w``, ``S@w``, ``rank@w`` (1 =
        best; ties share the better rank) and, with a ``reference``, ``dS@w``, ``dS_lo@w``, ``dS_hi@w``
        (paired series-cluster bootstrap of ``policy - reference``, :func:`fwgym.evaluation.leaderboard`);
        ``tau``: ``{w: Kendall's tau-b of the ranking at w against the protocol's}`` (``None`` with
        fewer than two policies).

    Raises:
        ValueError: as :func:`reweight`; no weights; a weight given twice.
    """
    from scipy.stats import kendalltau

    from fwgym.evaluation.leaderboard import leaderboard

    ws = [check_loss_weight(w) for w in weights]
    if not ws:
        raise ValueError("no loss weight given")
    if len(set(ws)) != len(ws):
        raise ValueError(f"a loss weight is given twice: {ws}")
    base = LOSS_WEIGHT  # ranks and tau against the protocol's ranking, shown or not
    per: dict[float, dict[str, dict]] = {}
    for w in dict.fromkeys([*ws, base]):
        rows = leaderboard(reweight(records, w, sigma, budget, suite), reference=reference, n_boot=n_boot, seed=seed)
        per[w] = {r["policy"]: r for r in rows}
    order = sorted(per[base], key=lambda p: (per[base][p]["S"], p))
    out = []
    for p in order:
        row: dict = {"policy": p}
        for w in ws:
            r = per[w][p]
            row[f"S@{w:g}"] = r["S"]
            row[f"rank@{w:g}"] = 1 + sum(q["S"] < r["S"] for q in per[w].values())
            if reference is not None:
                for k in ("dS", "dS_lo", "dS_hi"):
                    row[f"{k}@{w:g}"] = r.get(k)
        out.append(row)
    tau: dict[float, float | None] = {}
    for w in ws:
        if len(order) < 2:
            tau[w] = None
            continue
        t = kendalltau([per[base][p]["S"] for p in order], [per[w][p]["S"] for p in order]).statistic
        tau[w] = None if t is None or not math.isfinite(t) else float(t)
    return out, tau


def sensitivity_table(rows: Sequence[Mapping], weights: Sequence[float], tau: Mapping[float, float | None],
                      reference: str | None = None) -> Table:
    """The sensitivity rows of :func:`sensitivity` as a :class:`~fwgym.evaluation.formats.Table`: the
    policy, then per weight ``S (W=w)``, its rank ``#`` and, with a ``reference`` (the rows then carry
    ``dS@w``, ``dS_lo@w``, ``dS_hi@w``), the paired bootstrap difference ``ΔS vs <reference> (W=w) [95% CI]``
    (``(reference)`` in the reference's row); a last row gives Kendall's tau-b of each ranking against the
    protocol's (W = 0.5). A narrow terminal splits the table (every column is kept).

    Raises:
        ValueError: a weight outside [0, 1]; ``reference`` given but the rows carry no ``dS@w``.
    """
    ws = [check_loss_weight(w) for w in weights]
    if reference is not None and any(f"dS@{w:g}" not in r for r in rows for w in ws):
        raise ValueError(f"the sensitivity rows carry no intervals against {reference!r} (sensitivity(reference=...))")
    head, short = ["policy"], ["policy"]
    for w in ws:
        head += [f"S (W={w:g})", f"rank (W={w:g})"]
        short += [f"S@{w:g}", "#"]
        if reference is not None:
            head.append(f"ΔS vs {reference} (W={w:g}) [95% CI]")
            short.append(f"ΔS@{w:g} [95% CI]")

    def cells(r: Mapping, w: float) -> list[str]:
        out = [f"{r[f'S@{w:g}']:.4f}", str(r[f'rank@{w:g}'])]
        if reference is not None:
            out.append("(reference)" if r["policy"] == reference else
                       f"{r[f'dS@{w:g}']:+.4f} [{r[f'dS_lo@{w:g}']:+.4f}, {r[f'dS_hi@{w:g}']:+.4f}]")
        return out

    body = [tuple([r["policy"]] + [c for w in ws for c in cells(r, w)]) for r in rows]
    body.append(tuple([f"Kendall tau-b vs W={LOSS_WEIGHT:g}"] + [c for w in ws for c in (
        ["" if tau.get(w) is None else f"{tau[w]:.3f}", ""] + ([""] if reference is not None else []))]))
    return Table(None, tuple(head), ("l",) + ("r",) * (len(head) - 1), tuple(body), tuple(short))
