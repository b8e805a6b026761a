"""Measure the extended tariff: credits = reference CPU microseconds of fit + forecast (issue 20).

The protocol prices a forecast in "reference CPU microsecond credits" per (context bucket, horizon
bucket) (PROTOCOL §2.2). This module measures the statsmodels forecasters the same way and writes the
frozen rows of ``fwgym/config/tariff_extended.json`` with the machine and the method::

    python -m fwgym.forecasters.pricing --write          # measure, write the file, pin its sha256 in fwgym/core/tariff.py
    python -m fwgym.forecasters.pricing --out t.json --models ets --contexts 96 --horizons 24 --cases 2

Method (recorded in the file):

* one fresh child process with ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``,
  ``VECLIB_MAXIMUM_THREADS`` and ``NUMEXPR_NUM_THREADS`` set to 1 (one thread), one warm-up forecast per
  model (imports, first-call costs) not counted;
* for each model and bucket (context bucket c, horizon bucket h): on each real case (the dev split,
  ``--cases`` per domain, evenly spaced over the split's case list), the CPU time
  (``time.process_time_ns``) of ``predict_quantiles(last c hours of the case's history, h)`` -- the
  fit and the forecast, i.e. what a ``forecast`` call runs -- repeated ``--repeats`` times (default
  3), keeping each case's least time (the time the computation needs; the extra time of a repeat
  is interference from other processes on the machine: cache and memory-bandwidth contention);
* credits = the median over cases of those times, in microseconds, rounded up; then made monotone so
  that a request covering more never costs less: a running maximum along the horizon buckets, and the
  336-step context row at least the 96-step row.

The raw medians are kept beside the rows (``measured_median_us``). Figures depend on the machine (a
shared 2-core VM measures more than an idle workstation): the file says which machine measured them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Sequence

from fwgym.core.tariff import CONTEXT_BUCKETS, EXTENDED_TARIFF_PATH, HORIZON_BUCKETS, UNIT
from fwgym.validation import check_int

__all__ = ["THREAD_VARS", "DEFAULT_CASES", "DEFAULT_REPEATS", "DEFAULT_VERSION", "TARIFF_MODULE", "pricing_cases",
           "machine", "measure", "tariff_rows_from", "build_document", "document_text", "pin_sha256", "main"]

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
DEFAULT_CASES = 12
DEFAULT_REPEATS = 3
DEFAULT_VERSION = "extended-v1"
TARIFF_MODULE = Path(__file__).resolve().parents[1] / "core" / "tariff.py"
_PIN = re.compile(r'^EXTENDED_TARIFF_SHA256 = "[0-9a-f]{64}"$', re.M)


def pricing_cases(per_domain: int = DEFAULT_CASES, split: str = "dev") -> list[str]:
    """Case ids the prices are measured on: ``per_domain`` per domain, evenly spaced over the split's
    case list (deterministic).

    Raises:
        ValueError: ``per_domain`` < 1 or unknown split.
    """
    from fwgym.core.cases import build_cases
    from fwgym.domains import DOMAINS

    per_domain = check_int("per_domain", per_domain, minimum=1)
    ids = []
    for domain in DOMAINS:
        cases = build_cases(domain, split)
        n = min(per_domain, len(cases))
        ids += [cases[(i * len(cases)) // n].case_id for i in range(n)]
    return ids


def machine() -> dict:
    """The measuring machine: CPU model, logical CPUs, platform and library versions."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    versions = {}
    for dist in ("numpy", "scipy", "pandas", "statsmodels"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), **versions}


def _worker(spec: dict) -> dict:
    """Run the timings (in the one-thread child process)."""
    import numpy as np

    from fwgym.core.cases import get_case
    from fwgym.forecasters.registry import get_forecaster

    cases = [get_case(cid) for cid in spec["cases"]]
    out, failures = {}, {}
    for model in spec["models"]:
        f = get_forecaster(model)
        f.load()
        f.predict_quantiles(cases[0].history, 24)  # warm-up: imports and first-call costs
        out[model], failures[model] = {}, 0
        for cb in spec["contexts"]:
            out[model][str(cb)] = {}
            for hb in spec["horizons"]:
                times = []
                for case in cases:
                    context = np.asarray(case.history[-cb:], dtype=np.float64)
                    reps = []
                    for _ in range(spec["repeats"]):
                        t0 = time.process_time_ns()
                        try:
                            f.predict_quantiles(context, hb)
                        except Exception:  # counted, and timed: a charged call that fails still ran
                            failures[model] += 1
                        reps.append((time.process_time_ns() - t0) / 1e3)
                    times.append(reps)
                out[model][str(cb)][str(hb)] = times
    return {"timings": out, "failures": failures}


def measure(models: Sequence[str], contexts: Sequence[int] = CONTEXT_BUCKETS, horizons: Sequence[int] = HORIZON_BUCKETS,
            cases: Sequence[str] | None = None, repeats: int = DEFAULT_REPEATS, timeout: float = 3600.0) -> dict:
    """Time ``models`` in a fresh one-thread child process.

    Returns:
        ``{"timings": {model: {context: {horizon: [[µs of each repeat] per case]}}}, "failures": {model: n}}``
        (bucket keys are strings).

    Raises:
        ValueError: a bucket outside the tariff's buckets, a non-positive repeat count, or an unknown model.
        RuntimeError: the child process failed (its stderr is in the message).
    """
    from fwgym.forecasters.registry import check_models

    check_models(models)
    bad = [c for c in contexts if c not in CONTEXT_BUCKETS] + [h for h in horizons if h not in HORIZON_BUCKETS]
    if bad or not contexts or not horizons:
        raise ValueError(f"buckets must be among {list(CONTEXT_BUCKETS)} / {list(HORIZON_BUCKETS)}, got {bad or 'none'}")
    repeats = check_int("repeats", repeats, minimum=1)
    spec = {"models": list(models), "contexts": [int(c) for c in contexts], "horizons": [int(h) for h in horizons],
            "cases": list(cases if cases is not None else pricing_cases()), "repeats": repeats}
    env = {**os.environ, **{v: "1" for v in THREAD_VARS}}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-m", "fwgym.forecasters.pricing", "--worker"], input=json.dumps(spec),
                          capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the pricing worker failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tariff_rows_from(timings: dict) -> tuple[dict, dict]:
    """Credits rows and raw medians from :func:`measure`'s timings (the rule of the module docstring:
    per case the least of its repeats, then the median over cases).

    Returns:
        ``(rows, medians)``: ``rows[model][context] = [credits per horizon bucket measured]`` (ints) and
        ``medians[model][context] = [median µs]`` (floats rounded to 0.1 µs); keys are strings.
    """
    import numpy as np

    rows, medians = {}, {}
    for model, by_ctx in timings.items():
        rows[model], medians[model] = {}, {}
        previous = None
        for cb in sorted(by_ctx, key=int):
            med = [float(np.median([min(reps) for reps in by_ctx[cb][hb]])) for hb in sorted(by_ctx[cb], key=int)]
            medians[model][cb] = [round(m, 1) for m in med]
            credits = [max(1, math.ceil(m)) for m in med]
            credits = [max(credits[: i + 1]) for i in range(len(credits))]  # running max along the horizon
            if previous is not None and len(previous) == len(credits):
                credits = [max(a, b) for a, b in zip(credits, previous)]  # a longer context never costs less
            rows[model][cb] = previous = credits
    return rows, medians


def build_document(models: Sequence[str], contexts: Sequence[int] = CONTEXT_BUCKETS,
                   horizons: Sequence[int] = HORIZON_BUCKETS, per_domain: int = DEFAULT_CASES, repeats: int = DEFAULT_REPEATS,
                   version: str = DEFAULT_VERSION, command: str = "") -> dict:
    """Measure and assemble a tariff document (what :func:`fwgym.core.tariff.load_extended_tariff` reads when
    the grid is the full one)."""
    cases = pricing_cases(per_domain)
    started = time.monotonic()
    got = measure(models, contexts, horizons, cases, repeats)
    rows, medians = tariff_rows_from(got["timings"])
    return {
        "version": version,
        "unit": UNIT,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
        "machine": machine(),
        "method": {
            "measured": "CPU time (time.process_time_ns) of QuantileForecaster.predict_quantiles, i.e. fit + forecast",
            "process": "a fresh child process; one warm-up forecast per model not counted",
            "threads": {v: "1" for v in THREAD_VARS},
            "context": "the last <context bucket> hours of each case's visible history",
            "horizon": "the horizon bucket's upper edge",
            "statistic": "median over cases of each case's least time over the repeats, microseconds, rounded up",
            "monotone": "running maximum along the horizon buckets; the 336 row at least the 96 row",
            "cases": {"split": "dev", "per_domain": per_domain, "repeats": repeats, "ids": cases},
            "seconds": round(time.monotonic() - started, 1),
        },
        "context_buckets": [int(c) for c in contexts],
        "horizon_buckets": [int(h) for h in horizons],
        "rows": rows,
        "measured_median_us": medians,
        "failures": got["failures"],
    }


def document_text(doc: dict) -> str:
    """The file's text: 2-space indented JSON, one trailing newline."""
    return json.dumps(doc, indent=2) + "\n"


def pin_sha256(digest: str, module: Path = TARIFF_MODULE) -> None:
    """Rewrite the ``EXTENDED_TARIFF_SHA256 = "..."`` line of ``fwgym/core/tariff.py``.

    Raises:
        RuntimeError: the line is not found exactly once.
    """
    text = module.read_text(encoding="utf-8")
    if len(_PIN.findall(text)) != 1:
        raise RuntimeError(f"{module}: expected one line EXTENDED_TARIFF_SHA256 = \"<64 hex>\"")
    module.write_text(_PIN.sub(f'EXTENDED_TARIFF_SHA256 = "{digest}"', text), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    from fwgym.forecasters.registry import STATISTICAL_MODELS

    ap = argparse.ArgumentParser(prog="python -m fwgym.forecasters.pricing", description=__doc__.split("\n\n")[0])
    target = ap.add_mutually_exclusive_group()
    target.add_argument("--write", action="store_true",
                        help=f"write {EXTENDED_TARIFF_PATH.name} in the package and pin its sha256 in fwgym/core/tariff.py "
                             "(needs the full grid and every statsmodels model)")
    target.add_argument("--out", type=Path, help="write the document to this path (any grid)")
    target.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="+", default=list(STATISTICAL_MODELS))
    ap.add_argument("--contexts", nargs="+", type=int, default=list(CONTEXT_BUCKETS))
    ap.add_argument("--horizons", nargs="+", type=int, default=list(HORIZON_BUCKETS))
    ap.add_argument("--cases", type=int, default=DEFAULT_CASES, help="cases per domain (dev split)")
    ap.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timings per case (the least is kept)")
    ap.add_argument("--version", default=DEFAULT_VERSION, help="tariff version label")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(json.loads(sys.stdin.read()))))
        return 0
    full = (sorted(args.models) == sorted(STATISTICAL_MODELS) and tuple(args.contexts) == CONTEXT_BUCKETS
            and tuple(args.horizons) == HORIZON_BUCKETS)
    if args.write and not full:
        ap.error("--write needs the full grid (every context and horizon bucket) and every statsmodels model; "
                 "use --out for a partial measurement")
    command = "python -m fwgym.forecasters.pricing " + " ".join(argv if argv is not None else sys.argv[1:])
    doc = build_document(args.models, args.contexts, args.horizons, args.cases, args.repeats, args.version, command.strip())
    text = document_text(doc)
    for model, rows in doc["rows"].items():
        for cb, credits in rows.items():
            print(f"{model:10s} context<={cb:>3s}: " + " ".join(f"{c:>7d}" for c in credits))
    if args.write or args.out:
        import hashlib

        path = EXTENDED_TARIFF_PATH if args.write else args.out
        path.write_text(text, encoding="utf-8")
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        print(f"wrote {path} (sha256 {digest})")
        if args.write:
            pin_sha256(digest)
            print(f"pinned EXTENDED_TARIFF_SHA256 in {TARIFF_MODULE}: commit both files together")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
