"""The run manifest (``manifest.json``): what a run directory was produced with, and hashes of what it holds.

Every run of ``fwgym evaluate`` writes one into its directory when it starts and rewrites it
(atomically) when a session ends, so a reader knows the command, every setting, the code and
package versions, the model revisions and the agents' preflight answers, and can check that the
records are the ones the run wrote. Format (``manifest_version`` 1; JSON, keys sorted)::

    {
      "manifest_version": 1,
      "run_id": "<32 hex>",                      # random, fixed for the run
      "status": "running" | "interrupted" | "incomplete" | "complete",
      "created": ISO time, "updated": ISO time,
      "command": ["fwgym", "evaluate", ...],     # the first session's command line
      "args": {...},                             # its options (what --resume rebuilds the run from)
      "settings": {                              # what makes records comparable; --resume refuses a change
        "suite", "split", "domains", "lead", "limit", "cases": [ids], "cases_sha256", "n_cases",
        "policies": [row names], "agents": {name: factory settings (no credentials)},
        "env_kwargs", "sigma", "budget", "scenario_seed", "credit_weight", "forecast_pool",
        "registered_prices"?,                    # plug-in tariff rows and min_context (describe_pool)
        "forecast_store"?: {"sha256", "models"}, # the --forecast-store's manifest (compared: no merge across stores)
        "plugin_code"?: {model: sha256},         # plug-in forecasters' code (fwgym.forecasters.hosted)
        "fwgym_version", "scorer_version"
      },
      "environment": {"fwgym_version", "scorer_version", "python", "platform", "packages": {name: version},
                      "code_sha256",             # the fwgym package's files (package_sha256): the code version
                      "git": {"commit", "dirty", "diff_sha256"} | null},  # diff_sha256: of `git diff HEAD` (dirty)
      "models": {model: {"class", "model_id", "revision", "snapshot", "available", "source", "reason", "loaded"}},
      "forecast_pool": {"pool", "models", "tariff", "plugins"?, ...},  # fwgym.forecasters.describe_pool
      "preflight": {policy: dict},               # the agent factories' preflight() answers
      "policies_without_model": {policy: why},
      "sessions": [{"session", "started", "ended", "command", "workers", "concurrency", "backend",
                    "episodes", "status", "environment"}],
      "counts": {"expected", "recorded", "missing", "by_status": {...}, "harness_error", "agent_error", "scored"},
      "records": {"file": "results.jsonl", "count", "sha256", "sha256_by_line": [...], "superseded"},
      "coverage": {...}                          # fwgym.evaluation.records.coverage of the first policy
    }

``records.sha256`` is the sha256 of the whole records file; ``sha256_by_line[i]`` that of the canonical
JSON (:func:`canonical_json`) of the record on line ``i + 1``. Credentials are never written: agent
settings are the factories' own (which hold the name of the key's environment variable, never the key),
and :func:`write_manifest` refuses to write a manifest containing the value of a variable they name.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import uuid
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from fwgym.jsonl import read_json, to_jsonable

__all__ = ["MANIFEST_FILE", "MANIFEST_VERSION", "PACKAGES", "COMPARED_SETTINGS", "run_settings", "canonical_json",
           "record_sha256",
           "file_sha256", "now", "new_run_id", "environment", "git_info", "package_sha256", "code_changed",
           "model_revisions", "describe_policy", "write_manifest", "read_manifest", "settings_differences"]

#: name of a run directory's manifest
MANIFEST_FILE = "manifest.json"
#: version of the manifest format above
MANIFEST_VERSION = 1
#: distributions whose versions the manifest records (when installed)
PACKAGES: tuple[str, ...] = ("numpy", "numba", "gymnasium", "torch", "chronos-forecasting", "timesfm", "openai",
                             "statsmodels", "transformers", "stable-baselines3", "scoringrules")
#: the settings that must be equal for runs to share a leaderboard (fwgym.evaluation.results)
COMPARED_SETTINGS: tuple[str, ...] = ("suite", "split", "sigma", "budget", "scenario_seed", "credit_weight",
                                      "forecast_pool", "registered_prices", "forecast_store", "plugin_code",
                                      "scorer_version", "fwgym_version")


def run_settings(*, suite: str, split: str, domains: Sequence[str], lead: str | None, limit: int | None,
                 cases: list[str], policies: list[str], agents: Mapping[str, Any], env_kwargs: Mapping[str, Any],
                 max_calls: int) -> dict:
    """The manifest's ``settings`` of a run (the layout of the module docstring; what :data:`COMPARED_SETTINGS`
    compares): the suite, split, cases (with their sha256), policies and agents as given, and from ``env_kwargs``
    (the suite's env settings, :data:`fwgym.evaluation.SUITES`, plus ``models`` when the pool is not the
    protocol's) the budget, scenario seed, credit weight and forecast pool, with the packaged sigma, this fwgym's
    version and scorer version, and the plug-in prices and code of the pool when it has any. ``sigma`` is the packaged
    calibration plus each domain of ``domains`` outside it (a plug-in domain's own :attr:`fwgym.domains.Domain.sigma`)."""
    from fwgym.core.scoring import BUDGET, SCORER_VERSION, load_sigma
    from fwgym.forecasters.registry import PRICED_MODELS, plugin_codes, registered_prices
    from fwgym.version import __version__

    settings = {
        "suite": suite, "split": split, "domains": list(domains), "lead": lead, "limit": limit, "cases": list(cases),
        "cases_sha256": hashlib.sha256("\n".join(cases).encode()).hexdigest(), "n_cases": len(cases),
        "policies": list(policies), "agents": dict(agents), "env_kwargs": dict(env_kwargs),
        "sigma": load_sigma(domains=domains),
        "budget": env_kwargs.get("budget", BUDGET), "scenario_seed": env_kwargs.get("scenario_seed", 0),
        "credit_weight": env_kwargs.get("credit_weight", 0.0),
        "forecast_pool": list(env_kwargs.get("models") or PRICED_MODELS), "max_calls": max_calls,
        "fwgym_version": __version__, "scorer_version": SCORER_VERSION}
    prices = registered_prices(settings["forecast_pool"])
    if prices:  # plug-in prices are a setting (only when there are some: other runs' settings are unchanged)
        settings["registered_prices"] = prices
    codes = plugin_codes(settings["forecast_pool"])
    if codes:  # plug-ins' code is a setting too: --resume refuses an edited plug-in (fwgym.forecasters.hosted)
        settings["plugin_code"] = codes
    return settings


def canonical_json(value: Any) -> str:
    """The canonical JSON text of ``value`` (keys sorted, no whitespace, ASCII): what record hashes cover."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=to_jsonable)


def record_sha256(record: Mapping) -> str:
    """sha256 (hex) of a record's canonical JSON."""
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 (hex) of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    """A random run id (32 hex digits)."""
    return uuid.uuid4().hex


@functools.lru_cache(maxsize=None)
def git_info(path: str | None = None) -> dict | None:
    """``{"commit", "dirty", "diff_sha256"}`` of the git checkout holding ``path`` (default: the fwgym package):
    ``diff_sha256`` is the sha256 of ``git diff HEAD`` (the uncommitted edits of tracked files; ``None`` when
    clean), so two dirty sessions on one commit are told apart. ``None`` outside a checkout (an installed wheel)
    or without git."""
    where = Path(path) if path else Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        diff = subprocess.run(["git", "-C", str(where), "diff", "HEAD", "--binary"], capture_output=True,
                              timeout=60, check=True).stdout if dirty else b""
    except (OSError, subprocess.SubprocessError):
        return None
    if not commit:
        return None
    return {"commit": commit, "dirty": bool(dirty), "diff_sha256": hashlib.sha256(diff).hexdigest() if dirty else None}


@functools.lru_cache(maxsize=None)
def package_sha256(root: str | None = None) -> str:
    """The code version of the fwgym package at ``root`` (default: the one imported): the sha256 over its files'
    paths (relative, sorted) and bytes, every file but the caches (``__pycache__``: bytecode, numba). The same for
    a git checkout and an installed wheel; an edit of any module, template or packaged file changes it, a change
    outside the package (tests, docs) does not.

    Raises:
        OSError: a file cannot be read.
    """
    base = Path(root) if root else Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted(q for q in base.rglob("*") if q.is_file() and "__pycache__" not in q.relative_to(base).parts):
        h.update(f.relative_to(base).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def code_changed(a: Mapping | None, b: Mapping | None) -> bool | None:
    """Whether two sessions' environments (:func:`environment`) ran different fwgym code: their ``code_sha256``
    (:func:`package_sha256`) when both have one (manifests written before it lack it), else their git state
    (another commit, or another ``dirty`` / ``diff_sha256``); ``None`` when that cannot be told (no checkout, or
    two dirty sessions without diff hashes)."""
    a, b = a or {}, b or {}
    if a.get("code_sha256") and b.get("code_sha256"):
        return a["code_sha256"] != b["code_sha256"]
    ga, gb = a.get("git"), b.get("git")
    if not (isinstance(ga, Mapping) and isinstance(gb, Mapping) and ga.get("commit") and gb.get("commit")):
        return None
    if ga["commit"] != gb["commit"] or bool(ga.get("dirty")) != bool(gb.get("dirty")):
        return True
    if not ga.get("dirty"):
        return False
    da, db = ga.get("diff_sha256"), gb.get("diff_sha256")
    return None if not (da and db) else da != db


def environment() -> dict:
    """Versions of what produced the records: fwgym, the scorer, Python, the platform, :data:`PACKAGES`
    (installed ones), the code version of the fwgym package (``code_sha256``: :func:`package_sha256`) and the git
    state of the fwgym checkout (:func:`git_info`; ``None`` outside one)."""
    from fwgym.version import __version__
    from fwgym.core.scoring import SCORER_VERSION

    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"fwgym_version": __version__, "scorer_version": SCORER_VERSION, "python": platform.python_version(),
            "platform": platform.platform(), "packages": packages, "code_sha256": package_sha256(), "git": git_info()}


def _snapshot(model_id: str, revision: str | None) -> str | None:
    """The Hugging Face cache snapshot (commit) a hub model resolves to, if cached."""
    try:
        from huggingface_hub import try_to_load_from_cache

        path = try_to_load_from_cache(model_id, "config.json", revision=revision)
    except Exception:  # noqa: BLE001 - provenance only
        return None
    if not isinstance(path, str):
        return None
    parts = Path(path).parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts and parts[-1] == "config.json" else None


def model_revisions(models: Iterable[str]) -> dict[str, dict]:
    """Provenance of each priced forecast model of the pool in this process: its forecaster class,
    hub id, pinned revision, the cache snapshot it resolves to, whether weights are available (and
    why not), whether it was loaded here (``loaded``; forecasts made in worker processes load
    there) and, for a hosted plug-in, its ``health`` (isolation, calls and failures in this process, its
    probe's error: :meth:`fwgym.forecasters.hosted.HostedForecaster.health`)."""
    from fwgym.forecasters.registry import get_forecaster

    out = {}
    for m in models:
        try:
            f = get_forecaster(m)
            av = f.availability()
        except Exception as exc:  # noqa: BLE001 - provenance only
            out[m] = {"available": False, "reason": f"{type(exc).__name__}: {str(exc)[:300]}"}
            continue
        model_id = getattr(f, "model_id", None) or None
        local_dir = getattr(f, "local_dir", None)
        cls = getattr(f, "plugin_class", None) or f"{type(f).__module__}.{type(f).__qualname__}"  # hosted: the plug-in's
        out[m] = {"class": cls, "model_id": model_id,
                  "revision": getattr(f, "revision", None), "local_dir": str(local_dir) if local_dir else None,
                  "snapshot": _snapshot(model_id, f.revision) if model_id and av.source == "hf-cache" else None,
                  "available": bool(av.available), "source": av.source, "reason": av.reason[:500],
                  "loaded": getattr(f, "_model", None) is not None}
        health = getattr(f, "health", None)
        if callable(health):  # a hosted plug-in (fwgym.forecasters.hosted): isolation, calls, failures, probe
            out[m]["health"] = health()
    return out


_SECRET_KEYS = frozenset({"api_key", "apikey", "key", "password", "secret", "token", "authorization", "auth"})


def describe_policy(policy: Any) -> Any:
    """A JSON description of a policy for the manifest: a name as is; a dict factory (e.g.
    :class:`fwgym.agents.factory.LLMAgentFactory`) as its items (keys that name a credential dropped);
    a ``functools.partial`` as its function, arguments and keywords; a class or function as its
    qualified name; anything else as its type's qualified name. Stable across processes (no addresses)."""
    if isinstance(policy, str):
        return policy
    if isinstance(policy, Mapping):
        return {str(k): describe_policy(v) if callable(v) else v for k, v in policy.items()
                if str(k).lower() not in _SECRET_KEYS}
    if isinstance(policy, functools.partial):
        return {"partial": describe_policy(policy.func), "args": [describe_policy(a) if callable(a) else a
                                                                  for a in policy.args],
                "keywords": {k: describe_policy(v) if callable(v) else v for k, v in policy.keywords.items()
                             if k.lower() not in _SECRET_KEYS}}
    if isinstance(policy, type) or callable(policy) and hasattr(policy, "__qualname__"):
        return f"{getattr(policy, '__module__', '?')}.{policy.__qualname__}"
    return f"{type(policy).__module__}.{type(policy).__qualname__}"


def _secret_values(manifest: Mapping) -> list[str]:
    """Values of the environment variables the manifest's agents name as key variables (``*_env`` settings)."""
    names = set()

    def walk(o):
        if isinstance(o, Mapping):
            for k, v in o.items():
                if isinstance(k, str) and k.endswith("key_env") and isinstance(v, str):
                    names.add(v)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(manifest)
    return [os.environ[n] for n in names if len(os.environ.get(n) or "") >= 8]


def write_manifest(run_dir: str | os.PathLike, manifest: Mapping) -> Path:
    """Write ``manifest.json`` into ``run_dir`` atomically (a temporary file, fsync, ``os.replace``).

    Raises:
        ValueError: the manifest holds the value of an API-key variable an agent setting names.
        OSError: it cannot be written.
    """
    path = Path(run_dir) / MANIFEST_FILE
    text = json.dumps(manifest, indent=1, sort_keys=True, default=to_jsonable) + "\n"
    leaked = [v for v in _secret_values(manifest) if v in text]
    if leaked:
        raise ValueError("refusing to write a run manifest that contains an API key (an agent setting holds the "
                         "value of its key variable); pass keys through the environment only")
    tmp = path.with_name(f".{MANIFEST_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def read_manifest(run_dir: str | os.PathLike) -> dict | None:
    """The manifest of ``run_dir`` (``None`` when it has none).

    Raises:
        ValueError: ``manifest.json`` is not a JSON object of a known manifest version, or one of its
            fields has the wrong JSON type (e.g. ``settings`` not an object).
    """
    path = Path(run_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except ValueError as exc:
        raise ValueError(f"{exc} (not a JSON run manifest)") from None
    if not isinstance(data, dict) or data.get("manifest_version") != MANIFEST_VERSION:
        raise ValueError(f"{path}: not a run manifest of version {MANIFEST_VERSION} "
                         f"(manifest_version {data.get('manifest_version') if isinstance(data, dict) else None!r})")
    for key, kind in _MANIFEST_SHAPE.items():
        if key in data and data[key] is not None and not isinstance(data[key], kind):
            raise ValueError(f"{path}: malformed run manifest: {key!r} is a {type(data[key]).__name__}, expected a "
                             f"{'JSON object' if kind is dict else 'list'}")
    return data


#: the manifest fields readers index into, and their JSON types (checked by :func:`read_manifest`)
_MANIFEST_SHAPE: dict[str, type] = {"settings": dict, "environment": dict, "args": dict, "records": dict,
                                    "counts": dict, "coverage": dict, "models": dict, "preflight": dict,
                                    "policies_without_model": dict, "sessions": list, "command": list}


def settings_differences(old: Mapping, new: Mapping, keys: Iterable[str] | None = None) -> list[str]:
    """``["name: old -> new", ...]`` for every setting (of ``keys``, default all of both) that differs."""
    names = list(keys) if keys is not None else sorted(set(old) | set(new))
    out = []
    for k in names:
        a, b = old.get(k), new.get(k)
        if canonical_json(a) != canonical_json(b):
            if k == "cases":
                a_ids, b_ids = set(a or ()), set(b or ())
                out.append(f"cases: {len(a_ids)} -> {len(b_ids)} case ids ({len(a_ids - b_ids)} dropped, "
                           f"{len(b_ids - a_ids)} new)")
            else:
                out.append(f"{k}: {_short(a)} -> {_short(b)}")
    return out


def _short(v: Any, limit: int = 160) -> str:
    text = canonical_json(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."
