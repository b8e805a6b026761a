"""Export benchmark cases as Parquet files (``fwgym cases export``), for forecasting offline.

A forecasting researcher exports a split once, runs any model on the visible histories outside
fwgym, and submits the forecasts through the forecast suite (``fwgym evaluate --suite forecast
--agent my_forecasts.py:make``; README "Commands"), where they are scored by the one scorer.
Everything an agent of the chosen suite sees is exported; the hindsight targets only for the
train and dev splits, and for the test split only when asked (they are its answer key).

Files of an export directory (:data:`SCHEMA` gives every column):

* ``cases.parquet``: one row per case, in split order: the case's metadata (id, domain, series,
  unit, lead, split, cohort, ``as_of``, the history and target windows, forecast steps, scale), the
  context text the suite's env shows (``observation["context"]``) and, in the context and forecast
  suites, the scenario: family, note, Region of Interest (24 bools) and bounds (24 values, null where
  unbounded); in the decision and context suites the day's shortage weights (24);
* ``history.parquet``: the 336 visible hours of each case, long format (``case_id, timestamp,
  position, value``; raw units, float64; ``value`` cast to float32 is ``observation["history"]``),
  the layout of Nixtla's ``unique_id, ds, y`` and AutoGluon's ``item_id, timestamp, target``;
* ``targets.parquet`` (train/dev, or test with ``targets=True``): the 24 target hours (``case_id,
  timestamp, hour, step, target, observed``): ``target`` is what the suite scores (the
  scenario-transformed series in the context and forecast suites), ``observed`` the series as recorded;
* ``manifest.json``: what was exported (split, suite, domains, lead, limit, scenario seed, case count
  and the sha256 of the case-id list as ``fwgym evaluate`` records it), fwgym's version, whether
  targets are included, and the sha256, size and row count of every file.

Timestamps are UTC hour starts (``timestamp[s, tz=UTC]``).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from fwgym.jsonl import read_json
from fwgym.core.cases import HISTORY_HOURS
from fwgym.core.contract import TARGET_HOURS
from fwgym.data import sha256_file
from fwgym.domains import DOMAINS

__all__ = ["FORMAT", "FORMAT_VERSION", "FILES", "SCHEMA", "MANIFEST_FILE", "export_cases", "read_manifest"]

FORMAT, FORMAT_VERSION = "fwgym-cases", 1
MANIFEST_FILE = "manifest.json"
CASES_FILE, HISTORY_FILE, TARGETS_FILE = "cases.parquet", "history.parquet", "targets.parquet"
FILES = (CASES_FILE, HISTORY_FILE, TARGETS_FILE)

#: every column of every file: ``{file: {column: description}}`` (also written into the manifest)
SCHEMA: dict[str, dict[str, str]] = {
    CASES_FILE: {
        "case_id": "string: the case id, e.g. elec-ISNE-2024-07-25-day_ahead (the TARGET date)",
        "domain": "string: electricity | cycle_hire",
        "series_id": "string: balancing authority or station id",
        "series_name": "string: its name",
        "unit": "string: MW (electricity) or departures/hour (cycle hire)",
        "lead": "string: day_ahead | week_ahead",
        "split": "string: train | dev | test",
        "cohort": "string: the aggregation cohort, e.g. electricity-february",
        "as_of": "timestamp[s, UTC]: decision time",
        "history_start": "timestamp[s, UTC]: first visible hour",
        "last_visible": "timestamp[s, UTC]: last visible hour (as_of - 3 h; as_of - 2 h and - 1 h are never visible)",
        "target_start": "timestamp[s, UTC]: first target hour",
        "target_end": "timestamp[s, UTC]: end of the target window (exclusive; target_start + 24 h)",
        "target_date": "date32: the target day (the local London day for cycle hire)",
        "target_weekday": "int8: weekday of the target day, Monday = 0",
        "horizon": "int16: forecast steps after the last visible hour that cover the target (50 or 194)",
        "target_step_first": "int16: first forecast step of the target window (27 or 171)",
        "target_step_last": "int16: last forecast step of the target window (50 or 194)",
        "scale": "float64: mean of the 336 visible values (raw units); decision loss and CRPS are divided by it",
        "context": "string: the context text the suite's env shows (observation['context'])",
        "scenario": "string, null: the scenario family (context and forecast suites), null without one",
        "scenario_text": "string, null: the scenario's note (also part of context)",
        "roi": "list<bool>[24], null: Region of Interest of the scenario over the 24 target hours",
        "lower": "list<float64>[24], null: lower bound per target hour (raw units; null entries: unbounded)",
        "upper": "list<float64>[24], null: upper bound per target hour (raw units; null entries: unbounded)",
        "shortage_weights": "list<float64>[24], null: shortage weight w_h per target hour (decision and context "
                            "suites; null in the forecast suite)",
    },
    HISTORY_FILE: {
        "case_id": "string (dictionary): the case",
        "timestamp": "timestamp[s, UTC]: the hour",
        "position": "int16: index 0..335 in the observation's history (335 = the last visible hour)",
        "value": "float64: the observed value, raw units",
    },
    TARGETS_FILE: {
        "case_id": "string (dictionary): the case",
        "timestamp": "timestamp[s, UTC]: the target hour",
        "hour": "int8: index 0..23 in the target window",
        "step": "int16: forecast step after the last visible hour (27..50 or 171..194)",
        "target": "float64: the value the suite scores (raw units; scenario-transformed in the context and "
                  "forecast suites)",
        "observed": "float64: the series as recorded (equal to target without a scenario)",
    },
}


def _schemas():
    import pyarrow as pa

    ts = pa.timestamp("s", tz="UTC")
    l24 = pa.list_(pa.float64(), TARGET_HOURS)
    cases = pa.schema([
        ("case_id", pa.string()), ("domain", pa.string()), ("series_id", pa.string()), ("series_name", pa.string()),
        ("unit", pa.string()), ("lead", pa.string()), ("split", pa.string()), ("cohort", pa.string()),
        ("as_of", ts), ("history_start", ts), ("last_visible", ts), ("target_start", ts), ("target_end", ts),
        ("target_date", pa.date32()), ("target_weekday", pa.int8()), ("horizon", pa.int16()),
        ("target_step_first", pa.int16()), ("target_step_last", pa.int16()), ("scale", pa.float64()),
        ("context", pa.string()), ("scenario", pa.string()), ("scenario_text", pa.string()),
        ("roi", pa.list_(pa.bool_(), TARGET_HOURS)), ("lower", l24), ("upper", l24), ("shortage_weights", l24)])
    history = pa.schema([("case_id", pa.dictionary(pa.int32(), pa.string())), ("timestamp", ts),
                         ("position", pa.int16()), ("value", pa.float64())])
    targets = pa.schema([("case_id", pa.dictionary(pa.int32(), pa.string())), ("timestamp", ts), ("hour", pa.int8()),
                         ("step", pa.int16()), ("target", pa.float64()), ("observed", pa.float64())])
    return cases, history, targets


def _bounds(a: np.ndarray | None) -> list | None:
    if a is None:
        return None
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(a, dtype=np.float64)]


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"-o {out} is a file, not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ValueError(f"-o {out} is not empty; exports are never replaced silently: choose a new directory or "
                             "pass --overwrite")
        stray = [p.name for p in out.iterdir() if p.name not in FILES + (MANIFEST_FILE,)]
        if stray:
            raise ValueError(f"-o {out} holds files that are not an export's ({sorted(stray)[:5]}); --overwrite "
                             "replaces an export only")
        for name in FILES + (MANIFEST_FILE,):
            (out / name).unlink(missing_ok=True)


def export_cases(out: str | os.PathLike, split: str, suite: str = "forecast", domains: Sequence[str] = DOMAINS,
                 lead: str | None = None, limit: int | None = None, targets: bool | None = None,
                 overwrite: bool = False, progress: bool = False, command: Sequence[str] | None = None) -> dict:
    """Write the cases of ``split`` as seen in ``suite`` to the directory ``out`` (module docstring).

    Args:
        out: the export directory; must not exist or be empty (``overwrite``: replace an export there).
        split: ``"train"``, ``"dev"`` or ``"test"``.
        suite: ``"decision"``, ``"context"`` or ``"forecast"`` (:data:`fwgym.evaluation.SUITES`): which
            env's context text and scenarios are exported.
        domains, lead, limit: which cases, as ``fwgym evaluate`` selects them
            (:func:`fwgym.evaluation.select_cases`: ``limit`` cases per domain, evenly spaced).
        targets: write ``targets.parquet``; default ``None``: for train and dev, not for test (the
            test targets are the benchmark's answer key: only with ``targets=True``).
        overwrite: replace an existing export in ``out``.
        progress: show a progress bar (tqdm) on stderr.
        command: the command line, for the manifest.

    Returns:
        The manifest written to ``out/manifest.json``.

    Raises:
        ValueError: unknown split, suite, domain or lead; no case selected; ``out`` is a file or a
            non-empty directory (without ``overwrite``, or holding other files).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fwgym.version import __version__
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.evaluation.runner import SUITES, select_cases
    from fwgym.core.scorer import realised_target

    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; expected one of {list(SUITES)}")
    selected = select_cases(split, list(domains), lead, limit)
    if not selected:
        raise ValueError("no case selected")
    targets = (split != "test") if targets is None else bool(targets)
    out = Path(out)
    _check_out(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    env_kwargs = dict(SUITES[suite])
    envs: dict[str, FWBenchEnv] = {}
    cases_cols: dict[str, list] = {name: [] for name in SCHEMA[CASES_FILE]}
    hist_ids, hist_hours, hist_values, tgt_ids, tgt_hours, tgt_steps, tgt_values, tgt_observed = ([] for _ in range(8))
    iterator = selected
    if progress:
        from tqdm import tqdm

        iterator = tqdm(selected, desc=f"export {split}/{suite}", unit="case")
    for i, (domain, case_id) in enumerate(iterator):
        env = envs.get(domain)
        if env is None:
            env = envs[domain] = FWBenchEnv(domain=domain, split=split, lead=lead, **env_kwargs)
        obs, _ = env.reset(options={"case_id": case_id})
        ep = env.episode
        if ep is None:  # reset() always starts one
            raise RuntimeError(f"{domain}/{split}: the env has no episode after reset(case_id={case_id!r})")
        case, sc = ep.case, ep.scenario
        s = case.summary()
        row = {"case_id": case.case_id, "domain": case.domain, "series_id": case.series_id,
               "series_name": s["series_name"], "unit": s["unit"], "lead": case.lead, "split": case.split,
               "cohort": case.cohort, "as_of": case.as_of * 3600, "history_start": case.history_start * 3600,
               "last_visible": case.last_visible * 3600, "target_start": case.target_start * 3600,
               "target_end": (case.target_start + TARGET_HOURS) * 3600, "target_date": case.target_date,
               "target_weekday": case.target_weekday, "horizon": case.horizon,
               "target_step_first": case.target_steps[0], "target_step_last": case.target_steps[1],
               "scale": case.scale, "context": obs["context"],
               "scenario": sc.family if sc is not None else None, "scenario_text": sc.text if sc is not None else None,
               "roi": [bool(x) for x in sc.roi] if sc is not None else None,
               "lower": _bounds(sc.lower) if sc is not None else None,
               "upper": _bounds(sc.upper) if sc is not None else None,
               "shortage_weights": [float(w) for w in case.shortage] if env.task == "decision" else None}
        for k, v in row.items():
            cases_cols[k].append(v)
        hist_ids.append(np.full(HISTORY_HOURS, i, dtype=np.int32))
        hist_hours.append(case.history_hours)
        hist_values.append(np.asarray(case.history, dtype=np.float64))
        if targets:
            tgt_ids.append(np.full(TARGET_HOURS, i, dtype=np.int32))
            tgt_hours.append(case.target_hours)
            tgt_steps.append(np.arange(case.target_steps[0], case.target_steps[1] + 1, dtype=np.int16))
            tgt_values.append(realised_target(case, sc))
            tgt_observed.append(np.asarray(case.target(), dtype=np.float64))
    cases_schema, history_schema, targets_schema = _schemas()
    ids = pa.array(cases_cols["case_id"], pa.string())

    def long(indices, hours) -> tuple:
        idx = pa.array(np.concatenate(indices), pa.int32())
        return pa.DictionaryArray.from_arrays(idx, ids), pa.array(np.concatenate(hours) * 3600, pa.timestamp("s", tz="UTC"))

    written = {}
    tables = {CASES_FILE: pa.Table.from_pydict(cases_cols, schema=cases_schema)}
    cid, ts = long(hist_ids, hist_hours)
    tables[HISTORY_FILE] = pa.Table.from_arrays(
        [cid, ts, pa.array(np.tile(np.arange(HISTORY_HOURS, dtype=np.int16), len(selected))),
         pa.array(np.concatenate(hist_values))], schema=history_schema)
    if targets:
        cid, ts = long(tgt_ids, tgt_hours)
        tables[TARGETS_FILE] = pa.Table.from_arrays(
            [cid, ts, pa.array(np.tile(np.arange(TARGET_HOURS, dtype=np.int8), len(selected))),
             pa.array(np.concatenate(tgt_steps)), pa.array(np.concatenate(tgt_values)),
             pa.array(np.concatenate(tgt_observed))], schema=targets_schema)
    for name, table in tables.items():
        path = out / name
        pq.write_table(table, path, compression="zstd")
        written[name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size, "rows": table.num_rows}
    case_ids = cases_cols["case_id"]
    first_env = next(iter(envs.values()))
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "fwgym_version": __version__,
        "command": list(command) if command is not None else None,
        "split": split, "suite": suite, "env_kwargs": env_kwargs, "domains": list(domains), "lead": lead,
        "limit": limit, "scenario_seed": first_env.scenario_seed, "budget": first_env.budget,
        "max_calls": first_env.max_calls, "n_cases": len(case_ids),
        "cases_sha256": hashlib.sha256("\n".join(case_ids).encode()).hexdigest(),
        "targets": targets, "files": written, "schema": {k: v for k, v in SCHEMA.items() if k in written},
    }
    tmp = out / f".{MANIFEST_FILE}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, out / MANIFEST_FILE)
    return manifest


def read_manifest(out: str | os.PathLike, verify: bool = True) -> dict:
    """The manifest of an export directory, with every listed file's sha256 checked (``verify``).

    Raises:
        FileNotFoundError: no manifest. ValueError: not an export's manifest, or a file that is missing
            or differs from its digest.
    """
    out = Path(out)
    path = out / MANIFEST_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no export manifest {path}")
    manifest = read_json(path)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or not isinstance(manifest.get("files"), dict):
        raise ValueError(f"{path}: not the manifest of a `fwgym cases export`")
    if verify:
        for name, info in manifest["files"].items():
            p = out / name
            if not p.is_file():
                raise ValueError(f"{p}: listed in the export's manifest but missing")
            if sha256_file(p) != info.get("sha256"):
                raise ValueError(f"{p}: its sha256 differs from the export's manifest; the file was changed")
    return manifest
