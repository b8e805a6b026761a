"""Behaviour hashes: one sha256 per area of what fwgym computes, to show that a refactor changed nothing.

Run it on the commit before a change and on the commit after; every hash must be identical::

    python benchmarks/behaviour_hashes.py                 # the whole test split (~3-6 min on 2 cores)
    python benchmarks/behaviour_hashes.py --limit 8       # 8 cases per domain (~1 min): a quick check

Areas (each one sha256 over canonical JSON, order-independent: records are sorted by (policy, case_id)):

* ``main``: the main job, every default decision policy (:func:`fwgym.baselines.registry.default_policies`,
  without TSFMs unless ``--tsfm``) on the test split, decision suite;
* ``context``, ``forecast``: the context and forecast suites' default policies on the test split;
* ``rl``: the macro and sequential RL wrappers (``make_rl_env``) stepped with seeded random valid actions
  (``--rl-steps`` steps per variant, resets seeded), observations / rewards / terminations / infos;
* ``llm``: ``fwgym evaluate --agent openai`` against the scripted ``python -m fwgym.testing.chat_server``
  (``--llm-cases`` cases per domain): the records and the trace lines.

Volatile fields are removed before hashing (anything that differs between two runs of the same code: times,
latencies, the episodes' CPU seconds and memory, token counts, paths, process ids, versions, the git commit, run ids). Floats are hashed through
``repr`` (JSON), so a hash matches only when every value is equal bit for bit. ``--dump DIR`` writes the
canonical records of each area (``DIR/<area>.jsonl``) so that two runs' differences can be diffed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fwgym.evaluation.records import VOLATILE_FIELDS  # noqa: E402 - after the path of this tree

#: keys whose values differ between runs of the same code (removed at any depth): the records' measured times and
#: memory (VOLATILE_FIELDS: episode_wall_s, cpu_s, peak_rss_mib, pss_mib, ...) and these
VOLATILE_KEYS = frozenset(VOLATILE_FIELDS) | frozenset({
    "time", "times", "timestamp", "started", "started_at", "finished", "finished_at", "created", "created_at",
    "date", "wall_s", "elapsed_s", "seconds", "duration_s", "latency_s", "request_latency_s", "latencies",
    "prompt_tokens", "completion_tokens", "total_tokens", "usage", "pid", "path", "paths", "cwd", "out", "file",
    "version", "versions", "fwgym_version", "git_commit", "commit", "python", "platform", "host", "hostname",
    "run_id", "session", "id", "base_url", "url", "trace_id",
})


def strip(obj: Any) -> Any:
    """``obj`` without :data:`VOLATILE_KEYS` (recursively in dicts and lists)."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in VOLATILE_KEYS}
    if isinstance(obj, (list, tuple)):
        return [strip(v) for v in obj]
    return obj


def canonical(obj: Any) -> str:
    """Canonical JSON of ``obj`` (sorted keys, no spaces; NumPy values as Python values)."""
    import numpy as np

    def default(o):
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(f"cannot hash {type(o).__name__}")

    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=default, allow_nan=True)


def digest(lines: Iterable[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def record_lines(records: Iterable[dict]) -> list[str]:
    """Canonical lines of records, sorted by (policy, case_id) (then the whole line: traces repeat a key)."""
    rows = [strip(dict(r)) for r in records]
    return [canonical(r) for r in sorted(rows, key=lambda r: (str(r.get("policy")), str(r.get("case_id")),
                                                               canonical(r)))]


def suite_records(suite: str, limit: int | None, tsfm: bool) -> list[dict]:
    """Records of a suite's default policies on the test split (the same calls as ``fwgym evaluate --suite``)."""
    from fwgym.baselines.registry import suite_policies
    from fwgym.evaluation import SUITES, evaluate

    policies, _ = suite_policies(suite, include_tsfm=tsfm)
    return evaluate(policies, split="test", limit=limit, env_kwargs=dict(SUITES[suite]) or None, progress=False)


def rl_lines(steps: int) -> list[str]:
    """Seeded random valid actions on the macro and sequential RL envs: one line per step."""
    import numpy as np

    from fwgym.rl import make_rl_env

    out = []
    for variant in ("macro", "sequential"):
        env = make_rl_env(variant=variant)
        rng = np.random.default_rng(12345)
        obs, info = env.reset(seed=7)
        episode = 0
        for t in range(steps):
            mask = np.asarray(env.action_masks(), dtype=bool)
            action = int(rng.choice(np.flatnonzero(mask)))
            obs, reward, terminated, truncated, info = env.step(action)
            out.append(canonical({"variant": variant, "t": t, "episode": episode, "action": action,
                                  "mask": mask.astype(int).tolist(), "obs": np.asarray(obs, dtype=np.float64).tolist(),
                                  "reward": float(reward), "terminated": bool(terminated),
                                  "truncated": bool(truncated), "info": strip(_plain(info))}))
            if terminated or truncated:
                episode += 1
                obs, info = env.reset(seed=1000 + episode) if episode % 3 == 0 else env.reset()
                out.append(canonical({"variant": variant, "reset": episode,
                                      "obs": np.asarray(obs, dtype=np.float64).tolist(),
                                      "info": strip(_plain(info))}))
        env.close()
    return out


def _plain(x: Any) -> Any:
    """JSON-ready copy of an info dict (arrays as lists, other objects by their repr)."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    return repr(x)


def llm_lines(cases: int) -> list[str]:
    """Records and trace lines of ``fwgym evaluate --agent openai`` against the scripted chat server."""
    from fwgym.testing.chat_server import ScriptedChatServer, plan_then_answer

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "sk-test"}
    with tempfile.TemporaryDirectory(prefix="fwgym-hash-") as tmp, \
            ScriptedChatServer(respond=plan_then_answer()) as server:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "fwgym", "evaluate", "--split", "test", "--limit", str(cases), "--no-progress",
               "--policies", "hour_of_day_empirical", "--agent", "openai", "--base-url", server.url,
               "--model", "test-model", "--out", str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
        traces = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines() if x.strip()] \
            if (out / "traces.jsonl").is_file() else []
    return record_lines(records) + ["--- traces"] + record_lines(traces)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="at most N test cases per domain in the suites")
    ap.add_argument("--tsfm", action="store_true", help="include the TSFM policies whose weights load")
    ap.add_argument("--rl-steps", type=int, default=300, help="steps per RL variant (default 300)")
    ap.add_argument("--llm-cases", type=int, default=3, help="LLM cases per domain (default 3)")
    ap.add_argument("--areas", nargs="+", default=["main", "context", "forecast", "rl", "llm"],
                    choices=["main", "context", "forecast", "rl", "llm"])
    ap.add_argument("--dump", default=None, metavar="DIR", help="write each area's canonical lines to DIR/<area>.jsonl")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    print(f"# behaviour hashes at {head.strip() or '?'} (limit={args.limit}, tsfm={args.tsfm}, "
          f"rl_steps={args.rl_steps}, llm_cases={args.llm_cases}); load {os.getloadavg()[0]:.2f}", flush=True)
    makers = {
        "main": lambda: record_lines(suite_records("decision", args.limit, args.tsfm)),
        "context": lambda: record_lines(suite_records("context", args.limit, args.tsfm)),
        "forecast": lambda: record_lines(suite_records("forecast", args.limit, args.tsfm)),
        "rl": lambda: rl_lines(args.rl_steps),
        "llm": lambda: llm_lines(args.llm_cases),
    }
    for area in args.areas:
        t = time.perf_counter()
        lines = makers[area]()
        if args.dump:
            Path(args.dump).mkdir(parents=True, exist_ok=True)
            (Path(args.dump) / f"{area}.jsonl").write_text("\n".join(lines) + "\n")
        print(f"{area:9s} {digest(lines)}  ({len(lines)} lines, {time.perf_counter() - t:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
