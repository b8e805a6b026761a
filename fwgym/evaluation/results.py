"""Results files: reading, checking and re-scoring what runs wrote (DESIGN §9, trust), and writing a
finished record set as a run directory.

A result source is a run directory (``results.jsonl`` beside its ``manifest.json``, see
:mod:`fwgym.evaluation.rundir` and :mod:`fwgym.evaluation.manifest`) or a bare ``results.jsonl``.
:func:`load_results` reads sources for a leaderboard, a report or a plot and refuses, with a message
naming the file and line or the difference:

* a run that is not finished (interrupted, killed, or with ``harness_error`` episodes): the message
  gives the count and ``fwgym evaluate --resume DIR``; a bare file with harness_error records too;
* a record that does not fit the schema, malformed JSON;
* a record whose score differs from its re-scoring from the packaged data
  (:func:`fwgym.evaluation.verify.verify_record`), NaN scores;
* a record whose content differs from the hash the manifest holds for its line (an edit the
  re-scoring cannot see, e.g. of the credits together with S), a truncated file;
* a record that contradicts the trace of its episode in the run's ``traces.jsonl`` (LLM agents, ``fwgym mcp``,
  inspect imports: its submit, submission, levels or score; :mod:`fwgym.evaluation.trace_check`), or a record
  of such a policy without a trace: a record edited with the manifest re-hashed;
* runs that differ in suite, split, sigma, budget, scenario seed, credit weight, forecast pool (the
  models the envs priced: ``fwgym evaluate --pool`` / ``--models``; protocol for runs that do not say) or fwgym version
  (this one only unless ``allow_mixed_versions``; the difference is then a note for the table), and
  runs scored by another scorer version than this fwgym's;
* a (policy, case) pair twice; policies on different cases (unless ``common_cases``: the set is then
  restricted to the cases every policy has, and a note says so).

* a source without a manifest (a run directory whose ``manifest.json`` was deleted, a bare
  ``results.jsonl``, a run directory of fwgym 0.1.0): nothing says which records the run wrote, with
  which statuses and hashes, so it is refused unless ``allow_unverified`` (``--allow-unverified``).

An unverified source (``allow_unverified``) is read with the packaged settings (sigma, budget,
scenario seed 0) and its suite is inferred from its records (a 0.1.0 run: the suite its ``meta.json``
names); its fwgym version is unknown. Its records are still re-scored from their submissions, but an
edit of a submission together with its scores, or a deleted record, cannot be seen: the result set's
notes (and every table's header) say ``NOT HASH-CHECKED``.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from fwgym.errors import HARNESS_ERROR
from fwgym.evaluation.bootstrap import BOOT_SEED, N_BOOT
from fwgym.evaluation.header import make_header
from fwgym.evaluation.leaderboard import AUTO, leaderboard, write_leaderboard_files
from fwgym.evaluation.marks import format_marks, history_line, merge_marks, row_marks
from fwgym.evaluation.manifest import (COMPARED_SETTINGS, MANIFEST_FILE, MANIFEST_VERSION, environment, file_sha256,
                                       new_run_id, now, read_manifest, record_sha256, write_manifest)
from fwgym.evaluation.records import CORE_FIELDS, by_policy, check_record, check_result_set, coverage, stored_record
from fwgym.evaluation.rundir import RESULTS_FILE, status_counts
from fwgym.evaluation.trace_check import TraceCheck, check_traces
from fwgym.evaluation.verify import RunSettings, verify_record
from fwgym.forecasters.registry import PRICED_MODELS, registered_prices
from fwgym.jsonl import iter_jsonl, read_json, write_jsonl
from fwgym.core.cases import SEALED_SPLIT
from fwgym.core.scoring import BUDGET, SCORER_VERSION, load_sigma
from fwgym.domains import is_domain
from fwgym.suites import SUITE_NAMES, infer_suite, suite_metric
from fwgym.validation import is_int, is_number

__all__ = ["RESULTS_FILE", "ALLOW_UNVERIFIED_FLAG", "ALLOW_PARTIAL_FLAG", "ResultSource", "ResultSet", "load_source", "load_results",
           "read_results", "write_results", "run_meta", "infer_suite"]

UNKNOWN = "unknown"


@dataclass
class ResultSource:
    """One result source: its records file, manifest (``None`` for a bare file), records with their
    line numbers, the settings it was scored under and its fwgym version."""

    path: Path
    manifest: dict | None
    records: list[dict]
    lines: list[int]
    settings: RunSettings
    fwgym_version: str
    declared_subset: bool = False
    #: whether a manifest vouches for the records (their hashes, count and statuses); ``False``: an
    #: unverified source read with ``allow_unverified``
    verified: bool = True
    #: ``{policy: marks}`` (:func:`fwgym.evaluation.marks.row_marks`)
    marks: dict = field(default_factory=dict)
    #: what the records were cross-checked against their episodes' traces (:func:`fwgym.evaluation.trace_check.check_traces`;
    #: ``None``: not checked, a source without a manifest or ``verify=False``)
    traces: TraceCheck | None = None

    @property
    def run_dir(self) -> Path:
        return self.path.parent


@dataclass
class ResultSet:
    """Records checked and merged by :func:`load_results`, their sources, and the notes a table must show."""

    records: list[dict]
    sources: list[ResultSource]
    settings: RunSettings
    notes: list[str] = field(default_factory=list)
    common_cases: int | None = None

    @property
    def unverified(self) -> list[Path]:
        """The sources read without a manifest (``allow_unverified``): not hash-checked."""
        return [src.path for src in self.sources if not src.verified]

    @property
    def marks(self) -> dict[str, dict]:
        """``{policy: marks}`` of the rows (:mod:`fwgym.evaluation.marks`), the sources' merged."""
        return merge_marks([src.marks for src in self.sources])


def _not_cross_checked(src: "ResultSource") -> str | None:
    """A note for the traced records of a source that were not cross-checked against their traces (a killed session's
    records without one; traces written to ``--trace-out``), else ``None``."""
    t = src.traces
    if t is None or not (t.untraced or t.elsewhere):
        return None
    parts = [f"{p!r} {n} record(s) of killed sessions without a trace" for p, n in t.untraced.items()]
    parts += [f"{p!r} (traces written to --trace-out)" for p in t.elsewhere]
    return f"{src.run_dir}: NOT CROSS-CHECKED against traces: " + "; ".join(parts)


def _finish_hint(where: Path, origin: Mapping | None) -> str:
    """How to finish an incomplete run: ``fwgym evaluate --resume`` for its own runs; for MCP and inspect run
    directories, playing the failed cases again into the same directory."""
    kind = (origin or {}).get("kind") if isinstance(origin, Mapping) else None
    if kind == "mcp":
        return (f"serve each unscored case again with `fwgym mcp serve --case-id ID --out {where}` (same --policy-name) "
                "and play it to the end")
    if kind == "inspect":
        return f"re-run the errored samples in inspect and `fwgym import-inspect LOG --out {where}` again"
    return f"finish it with `fwgym evaluate --resume {where}`"


def _unfinished(where: Path, status: str, counts: Mapping | None, origin: Mapping | None = None) -> ValueError:
    c = counts or {}
    parts = []
    if c.get("harness_error"):
        parts.append(f"{c['harness_error']} harness_error episode(s), never scored")
    if c.get("missing"):
        parts.append(f"{c['missing']} of {c.get('expected')} episode(s) not played")
    what = "; ".join(parts) or {"running": "still running, or killed before it finished",
                                "interrupted": "interrupted"}.get(status, status)
    return ValueError(f"incomplete run {where}: status {status} ({what}); {_finish_hint(where, origin)} before "
                      "ranking it")


def _legacy_meta(run_dir: Path) -> dict:
    try:
        meta = read_json(run_dir / "meta.json")
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _check_settings(settings: Mapping, where: Path) -> None:
    """Refuse a manifest whose scoring settings have the wrong JSON types (an edited or foreign file),
    before any record is re-scored with them."""
    def number(v) -> bool:
        return is_number(v) and math.isfinite(v)

    sigma = settings.get("sigma")
    problems = []
    if settings.get("suite") not in SUITE_NAMES:
        problems.append(f"suite {settings.get('suite')!r}")
    split = settings.get("split")
    if not (isinstance(split, str) or (isinstance(split, list) and split and all(isinstance(s, str) for s in split))):
        problems.append(f"split {settings.get('split')!r}")
    if not (isinstance(sigma, dict) and sigma and all(isinstance(k, str) and number(v) and v > 0 for k, v in sigma.items())):
        problems.append(f"sigma {sigma!r} (expected {{domain: a number > 0}})")
    for key, ok in (("budget", lambda v: is_int(v) and v >= 0),
                    ("scenario_seed", is_int),
                    ("credit_weight", lambda v: number(v) and v >= 0)):
        if not ok(settings.get(key)):
            problems.append(f"{key} {settings.get(key)!r}")
    if problems:
        raise ValueError(f"{where}: malformed run settings: " + "; ".join(problems))


#: the flag of the command lines that accepts sources without a manifest
ALLOW_UNVERIFIED_FLAG = "--allow-unverified"
#: the flag of ``fwgym leaderboard`` that accepts a set covering only part of its split (``allow_partial``)
ALLOW_PARTIAL_FLAG = "--allow-partial"


def _unverifiable(p: Path) -> ValueError:
    where = f"run directory {p.parent}" if p.name == RESULTS_FILE else f"results file {p}"
    return ValueError(f"{where} has no {MANIFEST_FILE}, so its records cannot be checked against the hashes, count "
                      f"and statuses the run wrote (was it deleted?); refused. {ALLOW_UNVERIFIED_FLAG} ranks it "
                      "anyway, re-scored from its submissions but not hash-checked, marked NOT HASH-CHECKED")


def load_source(path: str | os.PathLike, verify: bool = True, allow_unverified: bool = False) -> ResultSource:
    """Read and check one result source (see the module docstring).

    Args:
        path: a run directory or a ``results.jsonl`` file.
        verify: re-score every record (only tests turn it off).
        allow_unverified: accept a source without a manifest (:attr:`ResultSource.verified` is then ``False``).

    Raises:
        FileNotFoundError: no such file or directory. ValueError: as the module docstring says (a source
            without a manifest unless ``allow_unverified``).
    """
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS_FILE
    if not p.is_file():
        raise FileNotFoundError(f"no results file {p}")
    manifest = read_manifest(p.parent) if p.name == RESULTS_FILE else None
    if manifest is None and not allow_unverified:
        raise _unverifiable(p)
    if manifest is not None and manifest.get("status") != "complete":
        raise _unfinished(p.parent, manifest.get("status", "?"), manifest.get("counts"), manifest.get("origin"))
    records, lines = [], []
    for n, r in iter_jsonl(p):
        check_record(r, required=CORE_FIELDS, where=f"{p}:{n}")
        records.append(r)
        lines.append(n)
    harness = [r for r in records if r["status"] == HARNESS_ERROR or r.get("scored") is False]
    if harness:
        per = {pol: len(rs) for pol, rs in by_policy(harness).items()}
        raise ValueError(f"incomplete result set {p}: {len(harness)} harness_error episode(s) with no score ("
                         + ", ".join(f"policy {k!r}: {v}" for k, v in per.items())
                         + f"); finish the run with `fwgym evaluate --resume {p.parent}`")
    if manifest is not None:
        st = manifest.get("settings") or {}
        if st.get("scorer_version") != SCORER_VERSION:
            raise ValueError(f"run {p.parent} was scored by scorer version {st.get('scorer_version')!r}; this fwgym "
                             f"scores with version {SCORER_VERSION!r}: its scores are not comparable, evaluate again")
        settings = RunSettings(suite=st.get("suite"), split=st.get("split"), sigma=st.get("sigma"),
                               budget=st.get("budget", BUDGET), scenario_seed=st.get("scenario_seed", 0),
                               credit_weight=st.get("credit_weight", 0.0),
                               forecast_pool=st.get("forecast_pool", list(PRICED_MODELS)),
                               registered_prices=st.get("registered_prices"),
                               forecast_store=st.get("forecast_store"), plugin_code=st.get("plugin_code"),
                               scorer_version=SCORER_VERSION, fwgym_version=st.get("fwgym_version", UNKNOWN))
        _check_settings(settings, p.parent / "manifest.json")
        declared_subset = not (manifest.get("coverage") or {}).get("complete", False)
        version = str(st.get("fwgym_version", UNKNOWN))
    else:
        meta = _legacy_meta(p.parent) if p.name == RESULTS_FILE else {}
        suite = meta.get("suite") if meta.get("suite") in SUITE_NAMES else infer_suite(records)
        splits = sorted({r["split"] for r in records})
        settings = RunSettings(suite=suite, split=splits[0] if len(splits) == 1 else splits, sigma=load_sigma(domains={r["domain"] for r in records}),
                               budget=BUDGET, scenario_seed=0, credit_weight=0.0, forecast_pool=list(PRICED_MODELS),
                               scorer_version=SCORER_VERSION, fwgym_version=UNKNOWN)
        declared_subset = not ((meta.get("results") or {}).get("coverage") or {}).get("complete", True)
        version = UNKNOWN
    bad_split = [(n, r) for n, r in zip(lines, records) if r["split"] != settings["split"]]
    if bad_split and manifest is not None:
        n, r = bad_split[0]
        raise ValueError(f"{p}:{n}: a record of split {r['split']!r} in a run of split {settings['split']!r}")
    if verify:
        for n, r in zip(lines, records):
            verify_record(r, settings, where=f"{p}:{n}")
    if manifest is not None:
        _check_hashes(p, manifest, records, lines)
    traces = check_traces(p, manifest, records, lines) if manifest is not None and verify else None
    if settings["split"] == SEALED_SPLIT:
        exposed = next(((n, r) for n, r in zip(lines, records) if r.get("exposed")), None)
        if exposed:
            n, r = exposed
            raise ValueError(f"{p}:{n}: record of policy {r['policy']!r} on case {r['case_id']!r} is exposed: it was "
                             "replayed after a prompt holding its target had been sent to the agent; the sealed split "
                             "refuses exposed records (evaluate the agent again in a new run)")
    return ResultSource(p, manifest, records, lines, settings, version, declared_subset, verified=manifest is not None,
                        marks=row_marks(manifest, records, _replayed(p)), traces=traces)


def _replayed(p: Path) -> list[str]:
    """The policies ``fwgym verify --replay`` replayed in full for this very records file (its ``replay.json``)."""
    from fwgym.evaluation.replay import REPLAY_FILE

    path = p.parent / REPLAY_FILE
    if p.name != RESULTS_FILE or not path.is_file():
        return []
    try:
        doc = read_json(path)
    except ValueError:
        return []
    if not isinstance(doc, dict) or doc.get("records_sha256") != file_sha256(p) or doc.get("problems"):
        return []
    pols = doc.get("policies")
    if not isinstance(pols, dict):
        return []
    return [k for k, v in pols.items() if isinstance(v, dict) and v.get("episodes") and v.get("matched") == v.get(
        "episodes")]


def _check_hashes(p: Path, manifest: Mapping, records: Sequence[Mapping], lines: Sequence[int]) -> None:
    """Refuse a records file that is not the one the run wrote: the file's sha256, else record by record
    against the manifest's per-line hashes, naming the first edited record, or the records missing from
    (or added to) the file when the rest are the run's in its order."""
    info = manifest.get("records") or {}
    if not info:
        raise ValueError(f"{p.parent / MANIFEST_FILE} holds no record hashes; the run did not finish writing")
    if file_sha256(p) == info.get("sha256"):
        return
    by_line = list(info.get("sha256_by_line") or [])
    hashes = [record_sha256(r) for r in records]
    wrote = info.get("count", len(by_line))
    counted = f"the manifest counts {wrote} records, the file has {len(records)}"
    if len(hashes) < len(by_line):
        missing = _unmatched(by_line, hashes)
        if missing is not None:
            raise ValueError(f"{p}: {len(missing)} record(s) missing ({counted}): the run's record(s) "
                             f"{_numbers(missing)} (by line) are not in the file{_missing_keys(manifest, records)}; "
                             "it was truncated or lines were deleted")
    elif len(hashes) > len(by_line):
        added = _unmatched(hashes, by_line)
        if added is not None:
            first = records[added[0]]
            raise ValueError(f"{p}: {len(added)} record(s) the run did not write ({counted}): line(s) "
                             f"{_numbers([lines[i] - 1 for i in added])}, e.g. policy {first.get('policy')!r} on case "
                             f"{first.get('case_id')!r}; lines were added")
    for i, (n, r) in enumerate(zip(lines, records)):
        if i >= len(by_line) or hashes[i] != by_line[i]:
            extra = "" if len(records) == len(by_line) else f"; {counted}"
            raise ValueError(f"{p}:{n}: record of policy {r.get('policy')!r} on case {r.get('case_id')!r} differs from "
                             f"the one the run wrote (its sha256 is not the manifest's){extra}; the file was edited")
    raise ValueError(f"{p}: {counted} (or the file was reformatted); it was truncated or edited")


def _unmatched(longer: Sequence[str], shorter: Sequence[str]) -> list[int] | None:
    """Indices of ``longer`` left over when ``shorter`` is matched to it in order (``None`` when ``shorter``
    is not a subsequence of ``longer``: records were edited or reordered, not only removed or added)."""
    left, j = [], 0
    for i, h in enumerate(longer):
        if j < len(shorter) and shorter[j] == h:
            j += 1
        else:
            left.append(i)
    return left if j == len(shorter) else None


def _numbers(indices: Sequence[int], shown: int = 10) -> str:
    """1-based numbers of 0-based ``indices``, the first ``shown`` of them."""
    out = ", ".join(str(i + 1) for i in indices[:shown])
    return out + (f" and {len(indices) - shown} more" if len(indices) > shown else "")


def _missing_keys(manifest: Mapping, records: Sequence[Mapping], shown: int = 5) -> str:
    """``": policy 'p' on case 'c', ..."`` of the (policy, case) pairs the run's settings expect and the file
    lacks ("" when the manifest does not list its policies and cases)."""
    st = manifest.get("settings") or {}
    policies, cases = st.get("policies"), st.get("cases")
    if not (isinstance(policies, list) and isinstance(cases, list)):
        return ""
    have = {(r.get("policy"), r.get("case_id")) for r in records}
    gone = [(pol, c) for pol in policies for c in cases if (pol, c) not in have]
    if not gone:
        return ""
    more = f" and {len(gone) - shown} more" if len(gone) > shown else ""
    return ": " + ", ".join(f"policy {pol!r} on case {c!r}" for pol, c in gone[:shown]) + more


def load_results(paths: Iterable[str | os.PathLike], *, allow_partial: bool = True, verify: bool = True,
                 common_cases: bool = False, allow_mixed_versions: bool = False,
                 allow_unverified: bool = False) -> ResultSet:
    """Read, check, re-score and merge result sources (module docstring).

    Args:
        paths: run directories or ``results.jsonl`` files.
        allow_partial: accept a set that covers only part of its split; without it the set must
            cover the whole frozen split index unless every source is a run that declared a subset
            (a case limit, lead or domain filter).
        verify: re-score every record (:mod:`fwgym.evaluation.verify`); only tests turn it off.
        common_cases: restrict to the cases every policy has (e.g. a ``--limit`` agent run beside the
            full baseline run) instead of refusing policies on different cases.
        allow_mixed_versions: accept runs of different fwgym versions (a note says which).
        allow_unverified: accept sources without a manifest (``--allow-unverified``); the first note then
            says ``NOT HASH-CHECKED`` and names them (:attr:`ResultSet.unverified`).

    Raises:
        FileNotFoundError, ValueError: as the module docstring says.
    """
    sources = [load_source(p, verify=verify, allow_unverified=allow_unverified) for p in paths]
    notes: list[str] = []
    unverified = [str(src.path.parent if src.path.name == RESULTS_FILE else src.path) for src in sources
                  if not src.verified]
    if unverified:
        notes.append(f"NOT HASH-CHECKED: {', '.join(unverified)} ha{'s' if len(unverified) == 1 else 've'} no "
                     f"{MANIFEST_FILE}: records re-scored from their submissions, but not checked against the run's "
                     "hashes, count and statuses")
    if not sources:
        raise ValueError("no results given")
    first = sources[0]
    _check_same_settings(sources, allow_mixed_versions=allow_mixed_versions)
    counts = {p: len(rs) for p, rs in by_policy(r for src in sources for r in src.records).items()}
    notes += [line for line in format_marks(merge_marks([src.marks for src in sources]), counts)
              if line.startswith(("EXPOSED", "RETRIED AFTER SPEND", "MIXED CODE", "IN-PROCESS", "NO SANDBOX"))]
    notes += [f"{src.run_dir}: {line}" for src in sources if (line := history_line(src.manifest))]
    notes += [line for src in sources if (line := _not_cross_checked(src))]
    versions = sorted({s.fwgym_version for s in sources})
    if len(versions) > 1:
        notes.append(f"MIXED fwgym versions {', '.join(versions)} (--allow-mixed-versions)")
    if first.settings.get("sigma") != load_sigma(domains=[d for d in first.settings.get("sigma") or {}
                                                          if is_domain(d)]):
        notes.append(f"sigma {first.settings.get('sigma')} is not the packaged calibration")
    records = _merged_records(sources)
    common = None
    if records and common_cases:
        records, common, dropped = _common_cases_only(records)
        if dropped:
            notes.append(f"restricted to the {common} cases common to every policy (--common-cases; "
                         f"{dropped} records of other cases left out)")
    if records:
        check_result_set(records)  # duplicates, unscored records, policies on different cases
        if not allow_partial and not all(s.declared_subset for s in sources) and common is None:
            try:
                check_result_set(records, complete=True)  # only the coverage of the split can fail now
            except ValueError as exc:
                raise ValueError(f"{exc} with {ALLOW_PARTIAL_FLAG} (allow_partial=True; the table then says "
                                 "PARTIAL)") from None
    return ResultSet(records, sources, RunSettings(first.settings), notes, common)


def _check_same_settings(sources: Sequence[ResultSource], *, allow_mixed_versions: bool) -> None:
    """Refuse sources whose :data:`COMPARED_SETTINGS` differ from the first source's (the fwgym version too, unless
    ``allow_mixed_versions``); settings are compared as canonical JSON.

    Raises:
        ValueError: naming the setting, both runs and both values.
    """
    first = sources[0]
    for src in sources[1:]:
        for k in COMPARED_SETTINGS:
            if k == "fwgym_version" and allow_mixed_versions:
                continue
            a, b = first.settings.get(k), src.settings.get(k)
            if json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
                hint = (" (--allow-mixed-versions accepts it, noted in the table)" if k == "fwgym_version" else "")
                raise ValueError(f"runs differ in {k}: {first.run_dir} has {a!r}, {src.run_dir} has {b!r}; only runs "
                                 f"of one {k} share a leaderboard{hint}")


def _merged_records(sources: Sequence[ResultSource]) -> list[dict]:
    """The records of every source, in order.

    Raises:
        ValueError: a (policy, case) pair appears twice (naming both files).
    """
    records: list[dict] = []
    seen: dict[tuple[str, str], Path] = {}
    for src in sources:
        for r in src.records:
            key = (r["policy"], r["case_id"])
            if key in seen:
                raise ValueError(f"duplicated result set: policy {key[0]!r} on case {key[1]!r} appears in "
                                 f"{seen[key]} and {src.path}: two runs name their agents alike (give each run its "
                                 "own name: fwgym evaluate --agent ... --agent-name NAME), or one run is merged twice")
            seen[key] = src.path
        records += src.records
    return records


def _common_cases_only(records: list[dict]) -> tuple[list[dict], int, int]:
    """``--common-cases``: ``(the records of the cases every policy has, how many such cases, records dropped)``.

    Raises:
        ValueError: the policies have no case in common.
    """
    groups = by_policy(records)
    shared = frozenset.intersection(*(frozenset(r["case_id"] for r in rs) for rs in groups.values()))
    if not shared:
        raise ValueError("--common-cases: the policies have no case in common")
    kept = [r for r in records if r["case_id"] in shared]
    return kept, len(shared), len(records) - len(kept)


def read_results(paths: Iterable[str | os.PathLike], allow_partial: bool = True, **kwargs) -> list[dict]:
    """The records of :func:`load_results` (same arguments and errors)."""
    return load_results(paths, allow_partial=allow_partial, **kwargs).records


def write_results(records: Sequence[Mapping], out_dir: str | os.PathLike, meta: dict | None = None,
                  reference: str | None = AUTO) -> dict[str, Path]:
    """Write a finished record set as a run directory: ``results.jsonl`` (one record per line, every
    schema field it holds, keys sorted), ``leaderboard.md`` (with breakdowns and bootstrap intervals
    against ``reference``), ``leaderboard.csv`` and ``manifest.json`` (status complete, settings,
    environment, counts, record hashes), replacing those files in ``out_dir`` (created if needed).

    For record sets made with :func:`fwgym.evaluation.evaluate` in Python (``fwgym evaluate`` writes
    its run directory as it goes, :mod:`fwgym.evaluation.rundir`).

    Args:
        records: result records, e.g. from :func:`fwgym.evaluation.evaluate`.
        out_dir: the run directory.
        meta: provenance (e.g. :func:`run_meta`); its ``suite`` (default: inferred from the records),
            ``sigma`` (default: the packaged calibration), ``budget``, ``scenario_seed``,
            ``credit_weight`` and ``forecast_pool`` (the env's ``models``; default the protocol's) are
            the settings the records were scored under; all of it is kept as the manifest's ``extra``.
        reference: the intervals' reference as :func:`~fwgym.evaluation.leaderboard.reference_policy`
            takes it (default ``"auto"``).

    Returns:
        ``{"results", "markdown", "csv", "manifest"}`` paths.

    Raises:
        ValueError: a record that does not fit the schema; as
            :func:`~fwgym.evaluation.records.check_result_set`; a named ``reference`` not among the policies.
    """
    out = Path(out_dir)
    paths = {k: out / n for k, n in (("results", RESULTS_FILE), ("markdown", "leaderboard.md"),
                                     ("csv", "leaderboard.csv"), ("manifest", "manifest.json"))}
    stored = [stored_record(r) for r in records]
    rows = leaderboard(stored, reference=reference)
    groups = by_policy(stored)
    meta = dict(meta or {})
    env = environment()
    splits = sorted({r["split"] for r in stored})
    settings = {"suite": meta.get("suite") or infer_suite(stored), "split": splits[0] if len(splits) == 1 else splits,
                "sigma": meta.get("sigma") or load_sigma(domains={r["domain"] for r in stored}), "budget": meta.get("budget", BUDGET),
                "scenario_seed": meta.get("scenario_seed", 0), "credit_weight": meta.get("credit_weight", 0.0),
                "forecast_pool": list(meta.get("forecast_pool") or PRICED_MODELS), "policies": list(groups),
                "fwgym_version": env["fwgym_version"], "scorer_version": SCORER_VERSION}
    prices = meta.get("registered_prices") or registered_prices(settings["forecast_pool"])
    if prices:  # plug-in prices of the pool (fwgym.forecasters.registry.registered_prices)
        settings["registered_prices"] = prices
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(paths["results"], stored, sort_keys=True)
    header = make_header(stored, suite=settings["suite"], formula=suite_metric(
        settings["suite"], settings["credit_weight"] if settings["suite"] == "forecast" else None).formula,
        checked="written by fwgym.evaluation.write_results", reference=rows[0].get("reference") if rows else None,
        n_boot=N_BOOT, seed=BOOT_SEED)
    write_leaderboard_files(out, rows, header, settings["suite"])
    first = next(iter(groups.values()))
    stamp = now()
    manifest = {"manifest_version": MANIFEST_VERSION, "run_id": new_run_id(), "status": "complete", "created": stamp,
                "command": None, "args": None, "settings": settings, "environment": env, "extra": meta,
                "sessions": [], "counts": {"expected": len(stored), "recorded": len(stored), "missing": 0,
                                           **status_counts(stored)},
                "records": {"file": RESULTS_FILE, "count": len(stored), "sha256": file_sha256(paths["results"]),
                            "sha256_by_line": [record_sha256(r) for r in stored], "superseded": 0},
                "coverage": coverage(first)}
    write_manifest(out, manifest)
    (out / "meta.json").unlink(missing_ok=True)  # a run directory has one manifest
    return paths


def run_meta(split: str, policies: Sequence, workers: int, sigma: dict | None = None) -> dict:
    """Provenance for :func:`write_results`: fwgym version, split, policies, workers, sigma, creation
    time (UTC, ISO 8601) and the machine's CPU count."""
    from fwgym.version import __version__

    return {"fwgym_version": __version__, "split": split, "policies": [str(p) for p in policies], "workers": workers,
            "sigma": sigma or load_sigma(), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpu_count": os.cpu_count()}

