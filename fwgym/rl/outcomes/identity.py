"""What an outcome table is for, and what its outcomes depend on: :func:`table_identity` and :func:`table_fingerprint`.

* The **identity** names the table: variant and split, and the env settings that change an outcome (budget, call
  limit, reward mode, tools, forecast pool, sigma, termination rules, scenarios). The case pool (domains, lead,
  stations, ``case_ids``) is not part of it: a table holds every case of its split, and an env over any pool of
  that split reads the cases it draws. The default directory of a table is named by its identity.
* The **fingerprint** is what its outcomes were computed with: the source code of every fwgym room an episode
  runs (:data:`CODE_ROOMS`, :data:`RL_MODULES`, :data:`ROOT_MODULES`: each file's sha256), the packaged data (the sha256 manifest of
  :mod:`fwgym.data`), the forecast pool (each model's :meth:`~fwgym.forecasters.base.QuantileForecaster.fingerprint`
  and availability), the prices (each model's tariff rows and their source), the feature names and version, the
  menu, and the versions of Python, NumPy, numba and Gymnasium. A table whose fingerprint differs from the
  running code's is **stale** and refused (:mod:`fwgym.rl.outcomes.read`).
"""
from __future__ import annotations

import ast
import hashlib
import json
import platform
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from fwgym.forecasters.base import package_versions

__all__ = ["RL_ENV_SETTINGS", "build_command", "CODE_ROOMS", "RL_MODULES", "ROOT_MODULES", "table_identity", "table_fingerprint", "code_digest", "digest"]

PACKAGE_DIR = Path(__file__).resolve().parents[2]
#: the package rooms whose source an RL episode runs (a change in any of their files makes a table stale)
CODE_ROOMS = ("core", "context", "data", "domains", "envs", "forecasters", "tools", "config")
#: the modules of the RL room that compute an outcome (the wrappers, features and menus); the modules that store and
#: serve tables (outcomes/, infos, values, recorded, vector, table_env) are covered by the table format's version
RL_MODULES = ("rl/env.py", "rl/features.py", "rl/macro.py", "rl/tracker.py")
#: package-root modules an episode imports
ROOT_MODULES = ("__init__.py", "errors.py", "validation.py", "version.py", "jsonl.py", "traces.py", "ray_session.py",
                "suites.py", "warn.py")
_SUFFIXES = (".py", ".json")


def digest(data: Any) -> str:
    """Hex sha256 of ``data``'s canonical JSON (sorted keys, no spaces): the forecast store's rule."""
    from fwgym.forecasters.store import fingerprint_digest

    return fingerprint_digest(data)


def code_digest() -> dict:
    """``{"rooms", "rl_modules", "files", "sha256"}``: the sha256 over (relative path, digest) of every ``.py`` and
    ``.json`` file of :data:`CODE_ROOMS`, :data:`RL_MODULES` and :data:`ROOT_MODULES` (a ``.py`` file's digest is
    that of its syntax tree without docstrings, so comments and documentation do not make a table stale; the data
    files themselves are covered by ``data/sha256.json``, one of them). Computed once per process (the code a process runs is the code it imported)."""
    return dict(_code_digest())


@lru_cache(maxsize=1)
def _code_digest() -> dict:
    files = [PACKAGE_DIR / m for m in ROOT_MODULES + RL_MODULES if (PACKAGE_DIR / m).is_file()]
    for room in CODE_ROOMS:
        files += [p for p in (PACKAGE_DIR / room).rglob("*") if p.suffix in _SUFFIXES and p.is_file()
                  and "__pycache__" not in p.parts]
    h = hashlib.sha256()
    for p in sorted(files, key=lambda q: q.relative_to(PACKAGE_DIR).as_posix()):
        h.update(p.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + _source_digest(p))
    return {"rooms": list(CODE_ROOMS), "rl_modules": list(RL_MODULES), "files": len(files), "sha256": h.hexdigest()}


def _source_digest(path: Path) -> bytes:
    """sha256 of a ``.py`` file's syntax tree without docstrings (comments, formatting and documentation do not
    change an outcome), of any other file's bytes."""
    raw = path.read_bytes()
    if path.suffix != ".py":
        return hashlib.sha256(raw).digest()
    tree = ast.parse(raw)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, annotate_fields=False, include_attributes=False).encode()).digest()


def table_identity(variant: str, env) -> dict:
    """The identity of the table that serves ``env`` (a macro wrapper over :class:`~fwgym.envs.fwbench.FWBenchEnv`,
    as :func:`fwgym.rl.make_rl_env` builds it): its variant, split and outcome-relevant settings, read from the
    env itself (so the env's defaults are the table's)."""
    inner = env.unwrapped
    return {"variant": variant, "split": inner.split, "task": inner.task, "budget": int(inner.budget),
            "max_calls": int(inner.max_calls), "reward": inner.reward_mode, "tools": list(inner.tools),
            "models": list(inner.models), "sigma": {str(k): float(v) for k, v in sorted(inner.sigma.items())},
            "invalid_submission": inner.invalid_submission, "call_limit": inner.call_limit,
            "forecast_timeout": inner.forecast_timeout, "scenarios": bool(inner.scenarios),
            "scenario_seed": int(inner.scenario_seed), "credit_weight": float(inner.credit_weight),
            "text_observations": bool(inner.text_observations)}


#: the outcome-relevant settings :func:`fwgym.rl.make_rl_env` gives :class:`~fwgym.envs.fwbench.FWBenchEnv` other
#: than its own defaults (tested equal to the identity of the env ``fwgym rl build`` plays)
RL_ENV_SETTINGS: dict[str, Any] = {"reward": "dense", "text_observations": False}


@lru_cache(maxsize=8)
def _default_identity(split: str, variant: str) -> str:
    """The identity (canonical JSON) of the table ``fwgym rl build --split split --variant variant`` builds: that
    of the inner env of :func:`fwgym.rl.make_rl_env` with no settings."""
    from fwgym.domains import DOMAINS
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv(domain=tuple(DOMAINS), split=split, **RL_ENV_SETTINGS)
    try:
        return json.dumps(table_identity(variant, env), sort_keys=True)
    finally:
        env.close()


def build_command(identity: Mapping, root: Path | str | None = None, limit: int | None = None,
                  overwrite: bool = True) -> str:
    """The command that (re)builds the table of ``identity`` (a manifest's or an env's,
    :func:`~fwgym.rl.outcomes.identity.table_identity`) at ``root`` (``None``: its default directory).

    ``fwgym rl build --split S --variant V`` with ``--pool`` when its forecast pool is another of
    :data:`fwgym.forecasters.registry.POOLS`, ``--limit`` for a partial table, ``--out`` when ``root`` is not the
    identity's default directory, and ``--overwrite`` (unless ``overwrite`` is false: a table not built yet). When
    the identity has settings the command line cannot give (a budget, tools, reward ... other than the defaults, a
    pool that is none of the registry's), the :func:`~fwgym.rl.outcomes.build.build_table` call with those ``env_kwargs`` instead. Never
    raises (the identity may come from a manifest that does not verify)."""
    from fwgym.forecasters.registry import POOLS
    from fwgym.rl.outcomes.format import default_root, table_dir

    split, variant = identity.get("split", "SPLIT"), identity.get("variant", "macro")
    limit = limit if type(limit) is int else None
    try:
        default = json.loads(_default_identity(split, variant))
    except Exception:  # noqa: BLE001 - an unknown split or variant (a malformed manifest): no settings to compare
        default = None
    other = {k: v for k, v in identity.items() if default is not None and k not in ("variant", "split")
             and k in default and v != default[k]}
    models = other.get("models")
    pool = None if models is None else next((n for n, m in POOLS.items() if isinstance(models, (list, tuple))
                                             and list(m) == list(models)), "")
    default_root_ = default_root()
    here = None if root is None or (default_root_ is not None and {"split", "variant"} <= set(identity)
                                    and Path(root) == table_dir(default_root_, identity)) else str(root)
    if set(other) - {"models"} or pool == "":
        args = [repr(split), repr(variant), repr(here)] + ([f"limit={limit}"] if limit is not None else []) + \
            (["overwrite=True"] if overwrite else []) + [f"env_kwargs={other!r}"]
        return (f"fwgym.rl.outcomes.build_table({', '.join(args)}) (its settings {sorted(other)} are not the command "
                "line's)")
    cmd = f"fwgym rl build --split {split} --variant {variant}"
    cmd += f" --pool {pool}" if pool else ""
    cmd += f" --limit {limit}" if limit is not None else ""
    cmd += f" --out {here}" if here is not None else ""
    return cmd + (" --overwrite" if overwrite else "")


def table_fingerprint(env, menu: list[str], features: list[str]) -> dict:
    """What the outcomes of ``env`` are computed with (module docstring): code, data, pool, prices, features,
    menu and library versions."""
    from fwgym.core.tariff import tariff_rows, tariff_source
    from fwgym.data import MANIFEST_PATH
    from fwgym.forecasters.registry import get_forecaster
    from fwgym.rl.features import FEATURE_VERSION

    inner = env.unwrapped
    pool = {}
    for m in inner.models:
        f = inner.forecasters.get(m) or get_forecaster(m)
        available = bool(f.availability().available)
        pool[m] = {"available": available, "fingerprint": f.fingerprint() if available else None,
                   "tariff": {str(c): list(p) for c, p in sorted(tariff_rows(m).items())}, "tariff_source": tariff_source(m)}
    return {"code": code_digest(), "data_sha256": hashlib.sha256(MANIFEST_PATH.read_bytes()).hexdigest(), "pool": pool,
            "feature_version": FEATURE_VERSION, "features": list(features), "menu": list(menu),
            "versions": {"python": platform.python_version(), **package_versions(("numpy", "numba", "gymnasium"))}}
