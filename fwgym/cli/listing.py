"""``fwgym list [envs|suites|policies|models|pools|agents]``: what this install offers, with ``--json``.

* ``envs``: the Gymnasium ids (the tool-call envs and the RL ids) with their settings;
* ``suites``: the evaluation suites (``fwgym evaluate --suite``): env settings, metric, default policies;
* ``policies``: every name ``fwgym evaluate --policies`` accepts: kind, models it buys, task, suites and
  pools whose defaults include it;
* ``models``: the priced forecasters (built-in and plug-ins): pools, tariff, and whether they can run
  here (weights found, packages installed; from the local directory or the Hugging Face cache — with
  ``HF_HUB_OFFLINE=1`` the hub is not asked);
* ``pools``: the named forecast pools (``fwgym evaluate --pool``);
* ``agents``: the agent kinds of ``fwgym evaluate --agent`` (shipped ones whose extra is installed, plug-ins).

(The module is ``listing``, not ``list``: a submodule named ``list`` would shadow the built-in in
:mod:`fwgym.cli`.)
"""
from __future__ import annotations

import argparse
import json

from fwgym.cli.tables import AUTO, MARKDOWN, TABLE

NAME = "list"
HELP = "list env ids, suites, policies, forecast models (with availability), pools and agent kinds"
SECTIONS: tuple[str, ...] = ("envs", "suites", "policies", "models", "pools", "agents")


def _section(value: str) -> str:
    if value not in SECTIONS:
        raise argparse.ArgumentTypeError(f"invalid section {value!r} (choose from {', '.join(SECTIONS)})")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``fwgym list``."""
    p.add_argument("what", nargs="*", type=_section, default=[], metavar="SECTION",
                   help=f"what to list: some of {', '.join(SECTIONS)} (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object {section: [rows]} instead of tables")
    p.add_argument("--format", choices=(AUTO, TABLE, MARKDOWN), default=AUTO,
                   help="tables: aligned text on a terminal, Markdown elsewhere (default auto)")
    p.add_argument("--no-check", action="store_true",
                   help="models: do not look for weights or packages (availability shown as unchecked)")


def envs() -> list[dict]:
    """The registered env ids: ``{"id", "kind" ("tool-call" | "rl"), "entry_point", "kwargs"}``."""
    from fwgym.envs import ENV_IDS, RL_ENV_IDS

    rows = [{"id": k, "kind": "tool-call", "entry_point": "fwgym.envs.fwbench:FWBenchEnv", "kwargs": dict(v)}
            for k, v in ENV_IDS.items()]
    rows += [{"id": k, "kind": "rl", "entry_point": "fwgym.rl.env:make_rl_env", "kwargs": dict(v)}
             for k, v in RL_ENV_IDS.items()]
    for r in rows:
        r["kwargs"] = {k: list(v) if isinstance(v, (tuple, list)) else v for k, v in r["kwargs"].items()}
    return rows


def suites() -> list[dict]:
    """The evaluation suites: ``{"suite", "env_kwargs", "loss", "formula", "default_policies" (per pool,
    TSFM policies excluded: they join when their weights load)}``."""
    from fwgym.baselines.registry import suite_policies
    from fwgym.forecasters.registry import POOLS
    from fwgym.suites import SUITES, TSFM_GROUP

    out = []
    for s, spec in SUITES.items():
        m = spec.metric()
        out.append({"suite": s, "env_kwargs": spec.env_kwargs, "loss": m.loss_label, "formula": m.formula,
                    "default_policies": {pool: suite_policies(s, include_tsfm=False, pool=pool)[0] for pool in POOLS},
                    "tsfm_policies_when_weights_load": TSFM_GROUP in spec.default_policies})
    return out


def _policy_kind(name: str) -> str:
    from fwgym.baselines.registry import CONTEXT_POLICIES, HINDSIGHT_POLICIES, SELECTOR_POLICIES
    from fwgym.forecasters.classical import CLASSICAL_METHODS
    from fwgym.forecasters.registry import PRICED_MODELS, STATISTICAL_MODELS

    if name in CLASSICAL_METHODS:
        return "fixed, free classical method"
    if name in PRICED_MODELS:
        return "fixed, priced model"
    if name in STATISTICAL_MODELS:
        return "fixed, statsmodels model"
    if name in SELECTOR_POLICIES:
        return "backtest selector"
    if name == "routing_reference":
        return "routing reference"
    if name in HINDSIGHT_POLICIES:
        return "hindsight oracle"
    if name in CONTEXT_POLICIES:
        return "context baseline"
    if name == "seasonal_empirical_quantiles":
        return "forecast baseline, bought quantiles"
    return "fixed, plug-in model"


def policies() -> list[dict]:
    """Every policy name: ``{"policy", "kind", "models" (priced models it may buy), "task" ("decision" or
    "decision, forecast"), "default_in" (``"suite/pool"`` defaults that include it; TSFM policies: when
    their weights load), "needs_weights" (a TSFM policy: a default only where its weights load)}``."""
    from fwgym.baselines.registry import (FORECAST_TASK_POLICIES, TSFM_POLICIES, policy_models, policy_names,
                                          suite_policies)
    from fwgym.forecasters.registry import POOLS
    from fwgym.suites import SUITES

    defaults = {f"{s}/{pool}": set(suite_policies(s, include_tsfm=False, pool=pool)[0]) for s in SUITES for pool in POOLS}
    rows = []
    for name in policy_names():
        default_in = [k for k, v in defaults.items() if name in v]
        if name in TSFM_POLICIES:
            default_in = [k for k in defaults if not k.startswith("forecast/")]
        rows.append({"policy": name, "kind": _policy_kind(name), "models": list(policy_models(name)),
                     "task": "decision, forecast" if name in FORECAST_TASK_POLICIES else "decision",
                     "default_in": default_in, "needs_weights": name in TSFM_POLICIES})
    return rows


def models(check: bool = True) -> list[dict]:
    """The priced forecasters: ``{"model", "origin" (``fwgym (built-in)``, ``entry point DIST:MODULE:ATTR``
    or ``registered in-process``: :func:`fwgym.forecasters.registry.model_origin`), "pools", "tariff"
    (protocol / extended / registered), "model_id" (Hugging Face id, TSFMs), "available" (``None``
    unchecked), "source" (where the availability check found the model), "reason"}``.

    ``available`` asks each forecaster's ``availability()``: packages installed, weights in the
    local directory or the Hugging Face cache (the hub only when ``HF_HUB_OFFLINE`` is unset and it
    answers); it does not load weights.
    """
    from fwgym.core import tariff
    from fwgym.forecasters.registry import POOLS, get_forecaster, known_models, model_origin

    rows = []
    for name in known_models():
        f = get_forecaster(name)
        row = {"model": name, "origin": model_origin(name), "pools": [p for p, ms in POOLS.items() if name in ms], "tariff": tariff.tariff_source(name),
               "model_id": getattr(f, "model_id", None), "available": None, "source": "", "reason": ""}
        if check:
            av = f.availability()
            row.update(available=bool(av.available), source=av.source or "", reason=av.reason or "")
        rows.append(row)
    return rows


def pools() -> list[dict]:
    """The named forecast pools: ``{"pool", "models", "default"}``."""
    from fwgym.forecasters.registry import POOLS

    return [{"pool": k, "models": list(v), "default": k == "protocol"} for k, v in POOLS.items()]


def agents() -> list[dict]:
    """The agent kinds of ``fwgym evaluate --agent``: ``{"kind", "help", "module"}``."""
    from fwgym.cli.agent_kinds import agent_kinds

    return [{"kind": k, "help": m.HELP, "module": m.__name__} for k, m in sorted(agent_kinds().items())]


def _tables(data: dict) -> list:
    from fwgym.evaluation.leaderboard import Table

    def t(title, cols, rows, right=()):
        return Table(title, tuple(cols), tuple("r" if c in right else "l" for c in cols),
                     tuple(tuple(str(x) for x in r) for r in rows))

    out = []
    if "envs" in data:
        out.append(t("env ids (gymnasium.make):", ("id", "kind", "settings"),
                     [(r["id"], r["kind"], ", ".join(f"{k}={'+'.join(v) if isinstance(v, list) else v}"
                                                     for k, v in r["kwargs"].items())) for r in data["envs"]]))
    if "suites" in data:
        out.append(t("evaluation suites (fwgym evaluate --suite):", ("suite", "env settings", "score", "default policies"),
                     [(r["suite"], ", ".join(f"{k}={v}" for k, v in r["env_kwargs"].items()) or "(protocol envs)",
                       r["formula"], f"{len(r['default_policies']['protocol'])} (protocol pool), "
                                     f"{len(r['default_policies']['extended'])} (extended)"
                       + (" + TSFM policies whose weights load" if r["tsfm_policies_when_weights_load"] else ""))
                      for r in data["suites"]]))
    if "policies" in data:
        out.append(t("policies (fwgym evaluate --policies):", ("policy", "kind", "buys", "task", "default in"),
                     [(r["policy"], r["kind"], ", ".join(r["models"]) or "-", r["task"],
                       (", ".join(r["default_in"]) or "-") + (" (where its weights load)" if r["needs_weights"] else ""))
                      for r in data["policies"]]))
    if "models" in data:
        def avail(r):
            if r["available"] is None:
                return "unchecked"
            if r["available"]:  # "builtin": nothing to find (no weights, no extra package)
                return f"yes ({r['source']})" if r["source"] and r["source"] != "builtin" else "yes"
            why = r["reason"].split(": ", 1)[-1] if r["reason"].startswith(r["model"] + ":") else r["reason"]
            return "no: " + why.split("; ")[0]

        out.append(t("forecast models (priced tools):", ("model", "from", "pools", "tariff", "weights", "available"),
                     [(r["model"], r["origin"], ", ".join(r["pools"]) or "-", r["tariff"], r["model_id"] or "-",
                       avail(r)) for r in data["models"]]))
    if "pools" in data:
        out.append(t("forecast pools (fwgym evaluate --pool):", ("pool", "models"),
                     [(r["pool"] + (" (default)" if r["default"] else ""), ", ".join(r["models"])) for r in data["pools"]]))
    if "agents" in data:
        out.append(t("agent kinds (fwgym evaluate --agent KIND):", ("kind", "what"),
                     [(r["kind"], r["help"]) for r in data["agents"]]))
    return out


def collect(sections=SECTIONS, check: bool = True) -> dict:
    """``{section: rows}`` for the named sections (:data:`SECTIONS`), JSON-safe."""
    fns = {"envs": envs, "suites": suites, "policies": policies, "models": lambda: models(check), "pools": pools,
           "agents": agents}
    return {s: fns[s]() for s in SECTIONS if s in sections}


def run(args) -> int:
    """Print the chosen sections as tables (or one JSON object with ``--json``)."""
    from fwgym.cli.tables import print_table

    data = collect(tuple(args.what) or SECTIONS, check=not args.no_check)
    if args.json:
        print(json.dumps(data, indent=1, ensure_ascii=False))
        return 0
    for i, table in enumerate(_tables(data)):
        if i:
            print()
        print(table.title)
        print_table(table.__class__(None, table.columns, table.align, table.rows), args.format)
    missing = [r for r in data.get("models", ()) if r["available"] is False and r["model_id"]]
    if missing:
        print("\nweights: hf download MODEL_ID (into the Hugging Face cache), or FWGYM_<MODEL>_PATH=DIR; "
              "`fwgym list models --json` gives each reason in full")
    return 0


__all__ = ["NAME", "HELP", "SECTIONS", "add_arguments", "run", "collect", "envs", "suites", "policies", "models",
           "pools", "agents"]
