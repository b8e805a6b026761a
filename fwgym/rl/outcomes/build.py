"""Building an outcome table: every menu entry of every case of a split, played once through the real env.

:func:`build_table` (``fwgym rl build``) makes :func:`fwgym.rl.make_rl_env` (``outcome_table=False``: the macro
wrapper over :class:`~fwgym.envs.fwbench.FWBenchEnv`, its tools, ledger and scorer) and plays, for each case,
``reset(options={"case_id": ...})`` and each menu entry from that reset (a macro episode is one step, so these
are whole episodes; for the sequential menu, the first step of each entry). What is recorded is what the env
returned: observations, rewards, terminations, truncations, infos and action masks (:func:`play_case`).

Cases are split into chunks played in this process, in a process pool (``workers``) or as Ray tasks
(``backend="ray"``); each finished chunk is written to ``<out>/.parts/`` at once, so an interrupted build
resumes where it stopped (a rerun skips the parts on disk whose sha256 matches the progress file). When every
chunk is there the table is assembled (one info store over all rows), written, its manifest last, and the parts
removed.
"""
from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fwgym.rl.outcomes.format import (FILES, FORMAT, FORMAT_VERSION, MANIFEST, TableError, default_root, file_sha256,
                                      now, pack_rows, read_arrow, table_dir, write_arrow, write_manifest)
from fwgym.rl.features import episode_fixed
from fwgym.rl.outcomes.identity import digest, table_fingerprint, table_identity
from fwgym.validation import check_int

__all__ = ["build_table", "play_case", "table_env"]

PARTS = ".parts"
PROGRESS = "progress.json"
_ENVS: dict = {}  # a worker's env per spec (process pool and Ray workers play many chunks)


def _evenly_spaced(cases, limit: int) -> list[str]:
    """At most ``limit`` case ids per domain, evenly spaced in split order (``fwgym evaluate --limit``'s rule, so a
    partial table holds the cases an evaluation with the same limit plays; tested against it).

    Raises:
        TableError: ``limit`` < 1.
    """
    if limit < 1:
        raise TableError(f"limit must be >= 1, got {limit}")
    out = []
    for d in dict.fromkeys(c.domain for c in cases):
        group = [c for c in cases if c.domain == d]
        if len(group) > limit:
            step = len(group) / limit
            group = [group[int(i * step)] for i in range(limit)]
        out += [c.case_id for c in group]
    return out


def _table_manifest(out: Path) -> dict | None:
    """The outcome table manifest at ``out`` (valid JSON naming this format; of any version), or ``None``: a
    ``manifest.json`` of anything else is another program's file, never replaced."""
    try:
        doc = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def table_env(split: str, variant: str, env_kwargs: dict | None = None):
    """The env a table of ``split`` and ``variant`` is played on: :func:`fwgym.rl.make_rl_env` over every case of
    the split (both domains and leads, every station), all features, no table."""
    from fwgym.rl.env import building_tables, make_rl_env

    kw = dict(env_kwargs or {})
    for k in ("domain", "lead", "cycle_hire_stations", "features", "outcome_table", "variant", "split"):
        kw.pop(k, None)
    with building_tables():  # a table of a held-out split is the evaluator's to build: not a training env
        return make_rl_env(domain="all", split=split, variant=variant, features="all", outcome_table=False, **kw)


def play_case(env, case_id: str, n_fixed: int) -> dict:
    """Play ``case_id``'s reset and each menu entry from it through ``env`` (a macro wrapper).

    Returns:
        ``{"fixed": (n_fixed,) float32, "obs": (E+1, d) float32, "reward": (E+1,), "terminated", "truncated":
        (E+1,) bool, "mask": (E+1, E) bool, "info": [E+1 dicts]}``; row ``e < E`` is entry ``e``, row ``E`` the reset.

    Raises:
        RuntimeError: a feature fixed within an episode changed (the table's layout would not hold).
    """
    E = env.action_space.n
    obs, info = env.reset(options={"case_id": case_id})
    fixed = np.array(obs[:n_fixed], dtype=np.float32)
    out: dict[str, Any] = {
        "fixed": fixed, "obs": np.zeros((E + 1, len(obs) - n_fixed), dtype=np.float32), "reward": np.zeros(E + 1),
        "terminated": np.zeros(E + 1, dtype=bool), "truncated": np.zeros(E + 1, dtype=bool),
        "mask": np.zeros((E + 1, E), dtype=bool), "info": [None] * (E + 1)}
    out["obs"][E], out["mask"][E], out["info"][E] = obs[n_fixed:], env.action_masks(), info
    for e in range(E):
        if e:
            env.reset(options={"case_id": case_id})
        obs, reward, terminated, truncated, info = env.step(e)
        if not np.array_equal(obs[:n_fixed], fixed):  # pragma: no cover - the features' own rule
            raise RuntimeError(f"{case_id}: an episode-fixed feature changed within the episode")
        out["obs"][e], out["reward"][e], out["terminated"][e], out["truncated"][e] = obs[n_fixed:], reward, terminated, truncated
        out["mask"][e], out["info"][e] = env.action_masks(), info
    return out


def _record_chunk(spec: dict, case_ids: list[str]) -> dict:
    """Play a chunk of cases in a (worker) process; infos as tagged JSON text (:mod:`fwgym.rl.values`)."""
    from fwgym.rl.values import dumps_value

    key = json.dumps(spec, sort_keys=True, default=str)
    env = _ENVS.get(key)
    if env is None:
        env = _ENVS[key] = table_env(spec["split"], spec["variant"], spec["env_kwargs"])
    n_fixed = episode_fixed(env.controller.feature_names)
    cases = [play_case(env, cid, n_fixed) for cid in case_ids]
    cat = {k: np.concatenate([c[k] for c in cases]) for k in ("obs", "reward", "terminated", "truncated", "mask")}
    return {"case_id": list(case_ids), "fixed": np.stack([c["fixed"] for c in cases]), **cat,
            "info": [dumps_value(i) for c in cases for i in c["info"]]}


def _run(spec: dict, chunks: dict[int, list[str]], workers: int, backend: str, ray_address: str | None,
         done: Callable[[int, dict], None]) -> None:
    if backend == "ray":
        from fwgym.ray_session import ray_session

        with ray_session(workers, ray_address) as ray:
            remote = ray.remote(_record_chunk)
            refs = {remote.remote(spec, ids): k for k, ids in chunks.items()}
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                done(refs[ready[0]], ray.get(ready[0]))
        return
    if workers == 1:
        for k, ids in chunks.items():
            done(k, _record_chunk(spec, ids))
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_record_chunk, spec, ids): k for k, ids in chunks.items()}
        for f in as_completed(futures):
            done(futures[f], f.result())


def build_table(split: str = "train", variant: str = "macro", out: str | Path | None = None, *, workers: int = 1,  # noqa: C901 - argument checks, resume rules, the chunk loop and the assembly of one build
                backend: str = "local", ray_address: str | None = None, chunk_size: int = 1024, limit: int | None = None,
                overwrite: bool = False, progress: bool | Callable[[int], None] = True,
                env_kwargs: dict | None = None) -> dict:
    """Play every case of ``split`` x every menu entry once and store the outcomes as a table (module docstring).

    Args:
        split: ``"train"``, ``"dev"`` or ``"test"``.
        variant: ``"macro"`` or ``"sequential"`` (the first step of each sequential entry).
        out: the table directory (default: the default table of this identity, :func:`~fwgym.rl.outcomes.format.default_root`).
        workers: processes (``backend="local"``) or Ray CPUs of a local cluster; 1 = this process.
        backend: ``"local"`` or ``"ray"``. ray_address: an existing Ray cluster (default: start a local one).
        chunk_size: cases per chunk (the unit of work, of progress and of resuming).
        limit: at most this many cases per domain (evenly spaced, as ``fwgym evaluate --limit``): a partial table.
        overwrite: replace a table (or a partial build) of another fingerprint or case list at ``out``.
        progress: a tqdm bar on stderr (``True``), nothing, or a callable given the cases finished.
        env_kwargs: further :func:`fwgym.rl.make_rl_env` arguments (budget, max_calls, tools, models, sigma, ...).

    Returns:
        the manifest's build record (cases, rows, seconds, cases per second, bytes, workers, backend).

    Raises:
        TableError: bad arguments, ``out`` a file or a non-empty directory that holds no table nor partial build
            (even with ``overwrite``), or a table / partial build of another fingerprint or case list at ``out``
            (without ``overwrite``).
    """
    from fwgym.rl.infos import InfoStore
    from fwgym.rl.values import decode_value
    from fwgym.version import __version__

    if variant not in ("macro", "sequential"):
        raise TableError(f"variant must be 'macro' or 'sequential', got {variant!r}")
    if backend not in ("local", "ray"):
        raise TableError(f"backend must be 'local' or 'ray', got {backend!r}")
    workers = check_int("workers", workers, minimum=1, error=TableError)
    chunk_size = check_int("chunk_size", chunk_size, minimum=1, error=TableError)
    t0 = time.perf_counter()
    kwargs = dict(env_kwargs or {})
    spec = {"split": split, "variant": variant, "env_kwargs": kwargs}
    env = table_env(split, variant, kwargs)
    menu = [e.name for e in env.menu]
    features = list(env.controller.feature_names)
    identity, fingerprint = table_identity(variant, env), table_fingerprint(env, menu, features)
    env_cases = env.unwrapped.cases
    pool_ids = [c.case_id for c in env_cases]
    env.close()
    if limit is not None:
        pool_ids = _evenly_spaced(env_cases, limit)
    if out is None:
        root = default_root()
        if root is None:
            raise TableError("no table directory: give out=DIR (--out), or unset FWGYM_OUTCOME_TABLES=off")
        out = table_dir(root, identity)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise TableError(f"{out} is a file, not a table directory")
    if (out / PARTS).exists() and not (out / PARTS).is_dir():
        raise TableError(f"{out / PARTS} is a file, not an outcome table's partial build: give another directory")
    old = _table_manifest(out)
    if out.is_dir() and old is None and not (out / PARTS).is_dir() and any(out.iterdir()):
        raise TableError(f"{out} is a non-empty directory that holds no outcome table nor a partial build: give a new or "
                         "empty directory (a build never writes among, or deletes, other files)")
    E, n = len(menu), len(pool_ids)
    cases_sha = digest(pool_ids)
    key = {"identity_sha256": digest(identity), "fingerprint_sha256": digest(fingerprint), "cases_sha256": cases_sha,
           "chunk_size": chunk_size, "format_version": FORMAT_VERSION}
    if old is not None:
        same = ("identity_sha256", "fingerprint_sha256", "format_version")
        if {k: old.get(k) for k in same} == {k: key[k] for k in same} \
                and old.get("layout", {}).get("cases_sha256") == cases_sha and not overwrite:
            return {**old.get("build", {}), "skipped": "already built"}
        if not overwrite:
            raise TableError(f"{out} holds an outcome table of another fingerprint, case list or format version "
                             f"({old.get('format_version')!r}; this fwgym writes {FORMAT_VERSION}); pass overwrite=True "
                             "(--overwrite) to replace it")
        for name in (MANIFEST, *FILES, "infos.arrow"):  # infos.arrow: format version 1's
            (out / name).unlink(missing_ok=True)
    parts = out / PARTS
    state = json.loads((parts / PROGRESS).read_text()) if (parts / PROGRESS).exists() else None
    if state is not None and {k: state.get(k) for k in key} != key:
        if not overwrite:
            raise TableError(f"{parts} holds a partial build of another table (fingerprint, cases, chunk size or format version); pass "
                             "overwrite=True (--overwrite) to start over")
        shutil.rmtree(parts)
        state = None
    if state is None:
        state = {**key, "parts": {}}
    parts.mkdir(parents=True, exist_ok=True)
    (parts / PROGRESS).write_text(json.dumps(state))
    chunks = {k: pool_ids[i: i + chunk_size] for k, i in enumerate(range(0, n, chunk_size))}
    for k, entry in list(state["parts"].items()):  # resume: keep the parts whose files are intact
        part_files = [parts / f"{int(k):05d}.{f}.arrow" for f in ("cases", "rows")]
        if all(p.is_file() for p in part_files) and [file_sha256(p) for p in part_files] == entry:
            chunks.pop(int(k), None)
        else:
            del state["parts"][k]
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, initial=n - sum(len(v) for v in chunks.values()), unit="case",
                   desc=f"outcome table {variant}/{split}")

    def done(k: int, res: dict) -> None:
        a = write_arrow(parts / f"{k:05d}.cases.arrow", {"case_id": res["case_id"], "fixed": res["fixed"]})
        b = write_arrow(parts / f"{k:05d}.rows.arrow", {x: res[x] for x in ("obs", "reward", "terminated", "truncated",
                                                                              "mask", "info")})
        state["parts"][str(k)] = [a["sha256"], b["sha256"]]
        (parts / PROGRESS).write_text(json.dumps(state))
        if bar is not None:
            bar.update(len(res["case_id"]))
        elif callable(progress):
            progress(len(res["case_id"]))

    t_play = time.perf_counter()
    try:
        _run(spec, chunks, workers, backend, ray_address, done)
    finally:
        if bar is not None:
            bar.close()
    t_play = time.perf_counter() - t_play

    # -- assemble: one info store over every row, the arrays in slot order ---------------------------------------
    t_asm = time.perf_counter()
    R = 1 + n * (E + 1)
    store = InfoStore(capacity=R + 1)
    fixed: np.ndarray | None = None  # (cases, n_fixed) float32
    dyn: np.ndarray | None = None  # (rows, d) float32
    reward, term, trunc, mask = np.zeros(R), np.zeros(R, dtype=bool), np.zeros(R, dtype=bool), np.zeros((R, E), dtype=bool)
    ids: list[str] = []
    row = 1
    for k in range(len(range(0, n, chunk_size))):
        cases = read_arrow(parts / f"{k:05d}.cases.arrow")
        rows = read_arrow(parts / f"{k:05d}.rows.arrow")
        if fixed is None or dyn is None:
            fixed = np.zeros((n, cases["fixed"].shape[1]), dtype=np.float32)
            dyn = np.zeros((R, rows["obs"].shape[1]), dtype=np.float32)
        c = len(cases["case_id"])
        fixed[len(ids): len(ids) + c] = cases["fixed"]
        ids += cases["case_id"]
        m = len(rows["reward"])
        dyn[row: row + m], reward[row: row + m] = rows["obs"], rows["reward"]
        term[row: row + m], trunc[row: row + m], mask[row: row + m] = rows["terminated"], rows["truncated"], rows["mask"]
        for text in rows["info"]:
            store.add(decode_value(json.loads(text)))
        row += m
    if fixed is None or dyn is None or ids != pool_ids or row != R:  # pragma: no cover - the parts are the chunks of pool_ids
        raise TableError(f"{parts}: the parts do not hold the table's cases in order")
    fixed_dyn = dyn[1 + np.arange(n) * (E + 1) + E]  # the reset rows' varying features
    from fwgym.rl.infos_export import export_store

    arrays, info_parts = export_store(store)
    info_cols = {("info_pattern" if k == "row_pattern" else f"{k[0]}:{k.split(':', 1)[1]}"): v for k, v in arrays.items()
                 if k == "row_pattern" or k.startswith(("array:", "table:"))}  # a:<node> (rows, *shape), t:<group> (rows, columns)
    record, record_fields = pack_rows({"obs": dyn, "reward": reward, "terminated": term, "truncated": trunc, "mask": mask,
                                       **info_cols})
    del dyn, info_cols
    reset_obs = np.concatenate((fixed, fixed_dyn), axis=1)
    files = {
        "cases.arrow": write_arrow(out / "cases.arrow", {"case_id": ids, "reset_obs": reset_obs}),
        "rows.arrow": write_arrow(out / "rows.arrow", {"record": record}),
        "pool.arrow": write_arrow(out / "pool.arrow", {"value": info_parts["pool"]}),
    }
    seconds = time.perf_counter() - t0
    build = {"created": now(), "fwgym_version": __version__, "cases": n, "rows": R, "entries": E, "workers": workers,
             "backend": backend, "chunk_size": chunk_size, "limit": limit, "partial": n < len(env_cases),
             "seconds": round(seconds, 1),
             "play_seconds": round(t_play, 1), "assemble_seconds": round(time.perf_counter() - t_asm, 1),
             "cases_per_second": round(n / max(t_play, 1e-9), 1),
             "bytes": sum(f["bytes"] for f in files.values())}
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "fwgym_version": __version__, "created": now(),
           "identity": identity, "identity_sha256": digest(identity), "fingerprint": fingerprint,
           "fingerprint_sha256": digest(fingerprint),
           "layout": {"variant": variant, "split": split, "menu": menu, "features": features,
                      "n_fixed": int(fixed.shape[1]), "cases": n, "cases_sha256": cases_sha, "rows": R,
                      "record": record_fields},
           "infos": {**info_parts["meta"], "patterns": arrays["patterns"].tolist()}, "files": files, "build": build}
    write_manifest(out, doc)
    shutil.rmtree(parts, ignore_errors=True)
    return build
