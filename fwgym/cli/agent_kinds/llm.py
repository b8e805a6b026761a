"""Options and helpers shared by the LLM agent kinds (``--agent openai``, ``--agent transformers``).

The shared options (``--temperature``, ``--top-p``, ``--llm-seed``, ``--max-tokens``, ``--trace-out``,
``--agent-name``, ``--max-tool-chars``, ``--history-hours``, ``--compact-results``, ``--direct-prompt``, ``--samples``,
``--constrain``, ``--episode-timeout``, ``--objective``) are added once by whichever LLM kind registers first; ``--llm-seed`` and
``--hf-device`` carry a prefix because other kinds (SB3) may want ``--seed`` / ``--device``.
"""
from __future__ import annotations

from pathlib import Path

from fwgym.core.cases import HISTORY_HOURS, TEST_SPLIT
from fwgym.cli.args import add_arguments_once, float_range, int_range, positive_float, positive_int

#: Options shared by the ``openai`` and ``transformers`` kinds: (flags, argparse kwargs).
COMMON_OPTIONS: tuple[tuple[tuple[str, ...], dict], ...] = (
    (("--temperature",), {"type": float_range(0), "default": None,
                          "help": "LLM sampling temperature (default: the server's; transformers: greedy)"}),
    (("--top-p",), {"type": float_range(0, 1, lo_open=True), "default": None, "dest": "top_p", "help": "LLM nucleus sampling mass"}),
    (("--llm-seed",), {"type": int, "default": None, "dest": "llm_seed", "help": "LLM sampling seed"}),
    (("--max-tokens",), {"type": positive_int, "default": None, "dest": "max_tokens",
                         "help": "max tokens per LLM reply (default: openai 2048, transformers 512, both 4096 in the "
                                 "forecast suite); checked against the suite's answer before the run and, measured with the "
                                 "model's tokenizer, after the preflight"}),
    (("--trace-out",), {"default": None, "dest": "trace_out",
                        "help": "JSONL file for one trace per episode (default <run directory>/traces.jsonl; appended)"}),
    (("--agent-name",), {"default": None, "dest": "agent_name", "help": "policy name of the LLM agent in results"}),
    (("--max-tool-chars",), {"type": positive_int, "default": None, "dest": "max_tool_chars",
                             "help": "truncate tool results longer than this in the chat (default: never)"}),
    (("--history-hours",), {"type": int_range(1, HISTORY_HOURS), "default": None, "dest": "history_hours",
                            "help": "show only the last N visible hours in the first LLM message (default: all 336)"}),
    (("--compact-results",), {"action": "store_true", "dest": "compact_results",
                              "help": "show tool results compactly (6 significant digits, plans as levels, no echo of "
                                      "inputs): fewer tokens for small context windows"}),
    (("--objective",), {"choices": ("score", "loss"), "default": "score", "dest": "objective",
                        "help": "what the prompts tell the model to minimise: score (default: the protocol's S, loss and "
                                "credits) or loss (the decision loss only; the objective ablation; a setting of the run)"}),
    (("--direct-prompt",), {"action": "store_true", "dest": "direct_prompt",
                            "help": "direct-prompt baseline, no tools; forecast suite: Context is Key's direct prompt "
                                    "(--samples completions at temperature 1, each a (timestamp, value) trajectory in "
                                    "<forecast> tags, retried as CiK; the record adds CiK's fair RCRPS)"}),
    (("--samples",), {"type": positive_int, "default": 25, "dest": "samples",
                      "help": "direct prompt, forecast suite: trajectories (completions) per forecast (default 25, CiK's)"}),
    (("--tools",), {"nargs": "+", "default": None, "metavar": "NAME", "dest": "tools",
                    "help": "offer only these tools (submit and abstain are always there), e.g. --tools classical_plan "
                            "plan: fewer schema tokens for small windows"}),
    (("--constrain",), {"choices": ("json-schema", "grammar"), "default": None,
                        "help": "constrain every reply to the episode's own grammar: a JSON schema (grid levels, tool "
                                "arguments) or a GBNF grammar (also the ramp); replies are JSON in text; part of the "
                                "policy name (openai: the server decodes under it; transformers: llguidance, "
                                "pip install 'fwgym[constrain]')"}),
    (("--episode-timeout",), {"type": positive_float, "default": None, "dest": "episode_timeout",
                              "help": "wall-clock seconds per episode; past it the episode ends as harness_error "
                                      "(never scored; default: no bound)"}),
)


def add_common_arguments(group) -> None:
    """Add :data:`COMMON_OPTIONS` to ``group`` unless another LLM kind already did (idempotent)."""
    add_arguments_once(group, COMMON_OPTIONS)


def trace_path(args) -> str:
    """``--trace-out``, else ``<--out>/traces.jsonl`` (``fwgym evaluate`` sets ``--out`` to the run directory
    before it builds the agent)."""
    if getattr(args, "trace_out", None):
        return str(args.trace_out)
    out = getattr(args, "out", None) or f"results/{getattr(args, 'split', TEST_SPLIT)}"
    return str(Path(out) / "traces.jsonl")


def start_trace_file(path: str) -> None:
    """Make sure the trace file's folder exists (traces are appended; a run directory starts empty and a
    resumed run keeps its traces, so the file is never truncated)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def chat_options(args, **kind_options) -> dict:
    """The chat session's options (:class:`fwgym.agents.chat.options.ChatOptions`, JSON form) from the shared
    options and a kind's own (``kind_options``, e.g. the openai kind's ``native_tools``): built once here,
    carried unchanged by the factory and the agent to the session.

    Raises:
        ValueError: a bad value (e.g. ``--history-hours 0``).
    """
    from fwgym.agents.chat.options import ChatOptions

    if (getattr(args, "suite", None) == "forecast" and getattr(args, "direct_prompt", False)
            and kind_options.get("constrain")):
        raise ValueError("--constrain cannot be used with --direct-prompt in the forecast suite: Context is Key's direct "
                         "prompt asks for (timestamp, value) lines in <forecast> tags, which a constraint to the "
                         "quantiles JSON answer would contradict; use one or the other")
    return ChatOptions(max_tool_chars=getattr(args, "max_tool_chars", None),
                       history_hours=getattr(args, "history_hours", None),
                       compact_results=bool(getattr(args, "compact_results", False)),
                       direct_prompt=bool(getattr(args, "direct_prompt", False)),
                       samples=int(getattr(args, "samples", 25)), tools=_tools(getattr(args, "tools", None)),
                       objective=getattr(args, "objective", None) or "score", **kind_options).to_json()


def _tools(names):
    """``--tools``: registered names, with the answer tools added (the env always offers them)."""
    if not names:
        return None
    from fwgym.tools import ANSWER_TOOLS, REGISTRY

    unknown = [n for n in names if n not in REGISTRY]
    if unknown:
        raise ValueError(f"--tools: unknown tools {unknown}; registered: {list(REGISTRY)}")
    return list(dict.fromkeys([*names, *ANSWER_TOOLS]))


#: characters per token of the answer estimate when no tokenizer is at hand: a lower bound for digit-heavy JSON (a
#: tokenizer that splits numbers into digits, as SmolLM2's, needs about 1 token per character)
CHARS_PER_TOKEN = 3.0


def answer_task(suite: str) -> str:
    """The task whose answer an episode of ``suite`` ends with: ``"forecast"`` or ``"decision"`` (decision and
    context suites)."""
    return "forecast" if suite == "forecast" else "decision"


def answer_tokens(suite: str, tokenizer=None, *, direct: bool = False) -> tuple[int, str]:
    """Tokens a final answer of ``suite`` takes, ``(count, how)``: ``tokenizer`` (text -> tokens, the model's) on a
    typical answer (:func:`fwgym.agents.chat.constrain.answer_lengths`: 8 levels, 24 x 9 quantiles of 6-digit values,
    or with ``direct`` Context is Key's 24 ``(timestamp, value)`` lines), else a stated estimate of 3 characters per
    token, a lower bound (``how`` says which)."""
    import math

    from fwgym.agents.chat.constrain import ANSWER_SCALE, answer_example

    task = answer_task(suite)
    if tokenizer is not None:
        from fwgym.agents.chat.constrain import answer_lengths

        return answer_lengths(tokenizer, direct=direct)[task], "the model's tokenizer"
    text = answer_example(task, {"case": {"scale": ANSWER_SCALE}}, direct=direct)
    return (math.ceil(len(text) / CHARS_PER_TOKEN),
            f"estimate: {len(text)} characters / {CHARS_PER_TOKEN:g} per token, a lower bound (tokenizers that split "
            "numbers into digits need up to 1 per character)")


def answer_room_problem(max_tokens: int | None, need: int, suite: str, how: str) -> str | None:
    """Why ``max_tokens`` cannot hold a ``suite`` answer of ``need`` tokens (counted ``how``), else ``None``."""
    if max_tokens is None or max_tokens >= need:
        return None
    return (f"--max-tokens {max_tokens} cannot hold a {suite}-suite answer (~{need} tokens, {how}); raise --max-tokens "
            f"to at least {need}")


#: default ``--max-tokens`` of the forecast suite, both kinds: a 24 x 9 quantiles answer of 6-digit values needs
#: 2,165 tokens in SmolLM2's tokenizer (docs/llm.md), so the decision suite's 2,048 would refuse it
FORECAST_MAX_TOKENS = 4096


def default_max_tokens(args, decision_default: int) -> int:
    """``--max-tokens`` if given, else :data:`FORECAST_MAX_TOKENS` in the forecast suite, else the kind's
    ``decision_default`` (openai 2,048, transformers 512)."""
    given = getattr(args, "max_tokens", None)
    if given is not None:
        return int(given)
    return FORECAST_MAX_TOKENS if getattr(args, "suite", None) == "forecast" else decision_default


def check_max_tokens(args, max_tokens: int | None, tokenizer=None) -> None:
    """Refuse a ``--max-tokens`` that cannot hold the suite's answer (a run that could never answer), before the run;
    the preflight measures the answer with the model's tokenizer and checks again
    (:func:`fwgym.cli.preflight.check_answer_room`).

    Raises:
        ValueError: ``max_tokens`` is below :func:`answer_tokens` (the message gives both and how it was counted).
    """
    suite = getattr(args, "suite", "decision")
    need, how = answer_tokens(suite, tokenizer, direct=bool(getattr(args, "direct_prompt", False)))
    problem = answer_room_problem(max_tokens, need, suite, how)
    if problem:
        raise ValueError(problem)


def common_kwargs(args) -> dict:
    """Agent kwargs from the shared options other than the chat options (:func:`chat_options`)."""
    kw = {"temperature": getattr(args, "temperature", None), "top_p": getattr(args, "top_p", None),
          "seed": getattr(args, "llm_seed", None), "episode_timeout": getattr(args, "episode_timeout", None)}
    if getattr(args, "agent_name", None):
        kw["name"] = args.agent_name
    return kw


__all__ = ["COMMON_OPTIONS", "add_common_arguments", "trace_path", "start_trace_file", "common_kwargs", "chat_options",
           "check_max_tokens", "default_max_tokens", "FORECAST_MAX_TOKENS", "answer_tokens", "answer_task", "answer_room_problem", "CHARS_PER_TOKEN"]
