"""Building a forecast store (:mod:`fwgym.forecasters.store`): :func:`build_store` computes forecasts with a
forecaster (in this process, a process pool or Ray; batch-native forecasters batched and checked against
the single-series path) and adds them as shards to a store directory.

A TSFM's forecast depends at the level of float32 rounding on the torch thread count and the
hardware (the single-series path itself does); a store fixes one answer: the build's, recorded with
its ``torch_threads``. Statistical forecasts fitted under a time bound are stored when the fit
finished in time at build time.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fwgym.forecasters.base import N_QUANTILES, QuantileForecaster
from fwgym.forecasters.store.format import (FORMAT, FORMAT_VERSION, MANIFEST, ROWS_PER_SHARD, ForecastRequest,
                                            StoreError, StoreMismatch, batch_native, context_digest,
                                            fingerprint_diff, fingerprint_digest)
from fwgym.forecasters.store.read import ForecastStore, forget_opened
from fwgym.ray_session import ray_session
from fwgym.validation import check_int

__all__ = ["build_store"]


def _compute_chunk(forecaster: QuantileForecaster, contexts: list[np.ndarray], horizon: int, batch_size: int,
                   check: str) -> tuple[list, list, list, dict]:
    """Forecasts of one chunk of a (context length, horizon) group.

    With a batch-native forecaster (:func:`batch_native`) and ``batch_size > 1``, each batch goes
    through ``predict_quantiles_batch`` and rows of it are recomputed by the single-series
    ``predict_quantiles`` and compared byte for byte: ``check="first"``: every row of the chunk's
    first batch and one row (rotating) of each later batch; ``"sample"``: one row of each batch;
    ``"all"``: every row (an audit: slower than the single-series path alone). A difference ends batching for the chunk: that batch
    and the rest are computed one series at a time, and the caller recomputes the group's batched
    rows the same way. Without batching every row is ``predict_quantiles``, i.e. the live path.
    A batch that fails is computed row by row, so one failing context does not take its batch down.

    Returns:
        ``(arrays or None, errors or None, batched flags, stats)`` per row, stats
        ``{"batched_rows", "single_rows", "checked_rows", "mismatch"}`` (largest relative difference seen, or None).
    """
    n = len(contexts)
    out: list = [None] * n
    errors: list = [None] * n
    via_batch = [False] * n
    stats: dict[str, Any] = {"batched_rows": 0, "single_rows": 0, "checked_rows": 0, "mismatch": None}

    def single(i: int) -> None:
        try:
            out[i] = forecaster.predict_quantiles(contexts[i], horizon)
        except Exception as exc:  # not stored; the live path fails the same way
            errors[i] = f"{type(exc).__name__}: {str(exc)[:300]}"
        stats["single_rows"] += 1

    batched = batch_native(forecaster) and batch_size > 1
    for b, start in enumerate(range(0, n, batch_size)):
        rows = list(range(start, min(n, start + batch_size)))
        got = None
        if batched:
            try:
                got = forecaster.predict_quantiles_batch([contexts[i] for i in rows], horizon)
            except Exception:
                got = None
        if got is None:
            for i in rows:
                single(i)
            continue
        checked = range(len(rows)) if check == "all" or (check == "first" and b == 0) else (b % len(rows),)
        worst = 0.0
        for k in checked:
            stats["checked_rows"] += 1
            try:
                ref = forecaster.predict_quantiles(contexts[rows[k]], horizon)
            except Exception:
                worst = math.inf
                continue
            g = np.ascontiguousarray(got[k], dtype=np.float64)
            if ref.shape != g.shape:
                worst = math.inf
            elif ref.tobytes() != g.tobytes():
                rel = np.abs(ref - g) / np.maximum(np.abs(ref), np.finfo(np.float64).tiny)
                worst = max(worst, float(np.max(rel)) or np.finfo(np.float64).tiny)
        if worst > 0.0:
            stats["mismatch"] = max(stats["mismatch"] or 0.0, worst)
            batched = False
            for i in rows:
                single(i)
            continue
        for k, i in enumerate(rows):
            out[i] = got[k]
            via_batch[i] = True
        stats["batched_rows"] += len(rows)
    return out, errors, via_batch, stats


def _shard_table(model: str, fp_sha: str, ctx: int, horizon: int, rows: list[tuple[ForecastRequest, bytes, np.ndarray]]):
    import pyarrow as pa

    q = np.stack([r[2] for r in rows]).reshape(len(rows), horizon * N_QUANTILES)
    as32 = q.astype(np.float32)
    lossless = bool(np.array_equal(as32.astype(np.float64), q) and
                    np.array_equal(np.signbit(as32), np.signbit(q)))
    values = as32 if lossless else q
    vtype = pa.float32() if lossless else pa.float64()
    qcol = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1), type=vtype), horizon * N_QUANTILES)
    meta = {"model": model, "fingerprint_sha256": fp_sha, "context_steps": str(ctx), "horizon": str(horizon),
            "values": "float32" if lossless else "float64", "format": FORMAT, "format_version": str(FORMAT_VERSION)}
    schema = pa.schema([("series_id", pa.string()), ("origin", pa.int64()), ("context_steps", pa.int32()),
                        ("horizon", pa.int32()), ("case_id", pa.string()), ("context_sha256", pa.binary(32)),
                        ("quantiles", qcol.type)], metadata=meta)
    return pa.record_batch([
        pa.array([r[0].series_id for r in rows], type=pa.string()),
        pa.array([int(r[0].origin) for r in rows], type=pa.int64()),
        pa.array([ctx] * len(rows), type=pa.int32()),
        pa.array([horizon] * len(rows), type=pa.int32()),
        pa.array([r[0].case_id for r in rows], type=pa.string()),
        pa.array([r[1] for r in rows], type=pa.binary(32)),
        qcol,
    ], schema=schema), ("float32" if lossless else "float64")


def _write_shard(path: Path, batch) -> tuple[str, int]:
    import pyarrow as pa

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    os.replace(tmp, path)
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return digest, path.stat().st_size


def _write_manifest(root: Path, doc: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".manifest-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # as a file opened for writing (mkstemp makes it private)
    os.replace(tmp, root / MANIFEST)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _torch_threads() -> int | None:
    import sys

    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def build_store(out: str | os.PathLike, forecaster: QuantileForecaster, requests: Sequence[ForecastRequest], *,  # noqa: C901 - argument checks, resume/overwrite rules and the local/Ray task loop of one build; split with the store refactor (issue 20)
                batch_size: int = 64, workers: int = 1, backend: str = "local", ray_address: str | None = None,
                rows_per_shard: int = ROWS_PER_SHARD, overwrite: bool = False, check: str = "first",
                progress: Callable[[int], None] | None = None, info: Mapping | None = None) -> dict:
    """Compute the forecasts of ``requests`` with ``forecaster`` and add them to the store at ``out``.

    Requests are deduplicated by key; keys the store already holds for this forecaster are skipped
    (a store grows build by build, e.g. the train split, then dev). Requests are grouped by (context
    steps, horizon) and computed in chunks of ``8 * batch_size`` in this process (``workers`` 1),
    in a process pool, or as Ray tasks; a batch-native forecaster (the TSFMs) runs whole batches
    through its pipeline, checked against the single-series path (:func:`_compute_chunk`: stored
    values are the single-series values bit for bit; a group where batching changed a bit is
    computed one series at a time and the manifest says so). Requests whose forecast fails are not
    stored (the live path then fails the same way); the manifest counts them.

    Args:
        out: the store directory (created if needed).
        forecaster: the forecaster (its ``name`` is the model; loaded here, or in each worker).
        requests: the forecasts to compute.
        batch_size: series per backend call (1: one by one).
        workers: processes (``backend="local"``) or Ray CPUs of a local cluster; 1 = this process.
        backend: ``"local"`` or ``"ray"``.
        ray_address: an existing Ray cluster (default: start a local one).
        rows_per_shard: rows per shard file.
        overwrite: replace the model's rows when the store holds it with another fingerprint (or to
            rebuild it from scratch); without it such a store is refused.
        check: how batched results are checked against the single-series path (:func:`_compute_chunk`):
            ``"first"`` (every row of each group's first batch, then one row of every later batch) or
            ``"all"`` (every row).
        progress: called with the number of requests finished, as they finish.
        info: JSON data recorded with this build in the manifest (e.g. split, domains, command).

    Returns:
        the build's record in the manifest (requests, stored, skipped, failed, groups, timing).

    Raises:
        StoreError: bad arguments; a malformed existing store.
        StoreMismatch: the store holds the model with another fingerprint (without ``overwrite``).
        StoreIntegrityError: an existing shard of the model is tampered.
        ModelUnavailable: the forecaster's weights cannot be found.
    """
    from fwgym.version import __version__
    from fwgym.forecasters.base import ModelUnavailable

    batch_size = check_int("batch_size", batch_size, minimum=1, error=StoreError)
    workers = check_int("workers", workers, minimum=1, error=StoreError)
    if backend not in ("local", "ray"):
        raise StoreError(f"backend must be 'local' or 'ray', got {backend!r}")
    if check not in ("first", "all"):
        raise StoreError(f"check must be 'first' or 'all', got {check!r}")
    rows_per_shard = check_int("rows_per_shard", rows_per_shard, minimum=1, error=StoreError)
    model = forecaster.name
    av = forecaster.availability()
    if not av.available:
        raise ModelUnavailable(av.reason or f"{model} is unavailable")
    fp = forecaster.fingerprint()
    if "weights" in fp and fp["weights"] is None:
        raise ModelUnavailable(f"{model}: the identity of its weights cannot be established (not on this machine yet)")
    fp_sha = fingerprint_digest(fp)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    doc: dict[str, Any] | None = ({"format": FORMAT, "format_version": FORMAT_VERSION, "fwgym_version": __version__,
                                   "created": _now(), "models": {}} if not (root / MANIFEST).exists() else None)
    existing: set = set()
    if doc is None:
        store = ForecastStore(root)
        doc = store.manifest
        entry = doc["models"].get(model)
        if entry is not None:
            if entry["fingerprint_sha256"] != fp_sha and not overwrite:
                diff = fingerprint_diff(entry["fingerprint"], fp)
                raise StoreMismatch(f"forecast store {root} holds {model} forecasts of another forecaster "
                                    f"({'; '.join(diff)}); pass overwrite=True (--overwrite) to replace them")
            if overwrite:
                for s in entry["shards"]:
                    (root / s["file"]).unlink(missing_ok=True)
                del doc["models"][model]
            else:
                existing = store.keys(model)
    entry = doc["models"].setdefault(model, {"fingerprint": fp, "fingerprint_sha256": fp_sha,
                                             "revision": forecaster.revision, "builds": [], "shards": []})

    unique: dict[tuple, ForecastRequest] = {}
    for r in requests:
        k = r.key
        if k not in existing and k not in unique:
            unique[k] = r
    groups: dict[tuple[int, int], list[ForecastRequest]] = {}
    for r in unique.values():
        groups.setdefault((len(r.context), int(r.horizon)), []).append(r)

    chunk = 8 * batch_size
    tasks = [(ctx_h, reqs[i : i + chunk], check if check == "all" or i == 0 else "sample")
             for ctx_h, reqs in sorted(groups.items()) for i in range(0, len(reqs), chunk)]
    if workers == 1 and backend == "local":
        forecaster.load()
    results = _run_tasks(forecaster, tasks, batch_size, workers, backend, ray_address, progress)

    group_stats: dict[tuple, dict] = {}
    for (ctx_h, _reqs, _check), (_arrays, _errors, _flags, stats) in zip(tasks, results):
        g = group_stats.setdefault(ctx_h, {"context_steps": ctx_h[0], "horizon": ctx_h[1], "rows": 0, "failed": 0,
                                           "batched_rows": 0, "single_rows": 0, "checked_rows": 0, "batch_mismatch": None})
        for name in ("batched_rows", "single_rows", "checked_rows"):
            g[name] += stats[name]
        if stats["mismatch"] is not None:
            g["batch_mismatch"] = max(g["batch_mismatch"] or 0.0, stats["mismatch"])
    redo = [(t, r) for t, r in zip(tasks, results) if group_stats[t[0]]["batch_mismatch"] is not None and any(r[2])]
    if redo:  # batching changed a bit somewhere in these groups: their batched rows again, one series at a time
        again_tasks = [(ctx_h, [q for q, f in zip(reqs, res[2]) if f], "sample") for (ctx_h, reqs, _c), res in redo]
        again = _run_tasks(forecaster, again_tasks, 1, workers, backend, ray_address, None)
        for ((ctx_h, _reqs, _c), res), (arrays, errors, _f, _stats) in zip(redo, again):
            where = [i for i, f in enumerate(res[2]) if f]
            for j, i in enumerate(where):
                res[0][i], res[1][i], res[2][i] = arrays[j], errors[j], False
            g = group_stats[ctx_h]
            g["batched_rows"] -= len(where)
            g["single_rows"] += len(where)

    seq = 1 + max([int(p.stem.rsplit("-", 1)[-1]) for p in (root / model).glob("*.arrow")
                   if p.stem.rsplit("-", 1)[-1].isdigit()] or [-1])
    failures: list[str] = []
    pending: dict[tuple, list] = {}
    stored = failed = 0

    def flush(ctx_h, rows):
        nonlocal seq
        c, h = ctx_h
        batch, vtype = _shard_table(model, fp_sha, c, h, rows)
        rel = f"{model}/{c:03d}x{h:03d}-{seq:05d}.arrow"
        seq += 1
        digest, size = _write_shard(root / rel, batch)
        entry["shards"].append({"file": rel, "sha256": digest, "rows": len(rows), "context_steps": c, "horizon": h,
                                "values": vtype, "bytes": size})

    for (ctx_h, reqs, _check), (arrays, errors, _flags, _stats) in zip(tasks, results):
        g = group_stats[ctx_h]
        rows = pending.setdefault(ctx_h, [])
        for r, q, err in zip(reqs, arrays, errors):
            if q is None:
                failed += 1
                g["failed"] += 1
                if len(failures) < 20:
                    failures.append(f"{r.case_id} ({r.series_id} @ {r.origin}, {len(r.context)}x{r.horizon}): {err}")
                continue
            rows.append((r, context_digest(r.context), q))
            g["rows"] += 1
            stored += 1
            if len(rows) >= rows_per_shard:
                flush(ctx_h, rows)
                rows = pending[ctx_h] = []
    for ctx_h, rows in pending.items():
        if rows:
            flush(ctx_h, rows)

    seconds = time.perf_counter() - t0
    distinct = {r.key for r in requests}
    record = {
        "created": _now(), "fwgym_version": __version__, "requests": len(requests), "distinct": len(distinct),
        "skipped_existing": len(distinct & existing), "stored": stored, "failed": failed, "failures": failures,
        "batch_size": batch_size, "check": check, "workers": workers, "backend": backend,
        "torch_threads": _torch_threads(),
        "groups": [{**g, "mode": ("single" if not g["batched_rows"] else "batched" if not g["single_rows"]
                                  else "mixed")} for g in group_stats.values()],
        "seconds": round(seconds, 3),
        "forecasts_per_second": round((stored + failed) / seconds, 3) if seconds > 0 else None,
        **({"info": dict(info)} if info else {}),
    }
    entry["builds"].append(record)
    doc["fwgym_version"] = __version__
    doc["updated"] = _now()
    _write_manifest(root, doc)
    forget_opened(root)  # the directory changed: later open_store calls read it again
    return record


def _task(args):
    return _compute_chunk(*args)


def _run_tasks(forecaster, tasks, batch_size, workers, backend, ray_address, progress) -> list:
    """Run the chunks (in order) in this process, a process pool or Ray; report progress."""
    payloads = [(forecaster, [r.context for r in reqs], ctx_h[1], batch_size, check) for ctx_h, reqs, check in tasks]
    done = []
    if backend == "ray":
        with ray_session(workers, ray_address) as ray:
            remote = ray.remote(_task)
            refs = [remote.remote(p) for p in payloads]
            for ref, p in zip(refs, payloads):
                done.append(ray.get(ref))
                if progress:
                    progress(len(p[1]))
        return done
    if workers == 1:
        unequal: set = set()  # groups where batching changed a bit: their later chunks go one series at a time
        for (ctx_h, _reqs, _check), p in zip(tasks, payloads):
            res = _task(p if ctx_h not in unequal else (*p[:3], 1, p[4]))
            if res[3]["mismatch"] is not None:
                unequal.add(ctx_h)
            done.append(res)
            if progress:
                progress(len(p[1]))
        return done
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for p, res in zip(payloads, pool.map(_task, payloads)):
            done.append(res)
            if progress:
                progress(len(p[1]))
    return done
