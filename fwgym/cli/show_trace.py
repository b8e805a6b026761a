"""``fwgym show-trace FILE``: print LLM-agent traces (JSONL, one episode per line; :mod:`fwgym.agents.chat.traces`)
as readable transcripts.

Usage::

    fwgym show-trace results/test/traces.jsonl --list          # one line per episode
    fwgym show-trace results/test/traces.jsonl --case elec-PJM-2024-02-11-day_ahead
    fwgym show-trace traces.jsonl --episode 0 --full           # no truncation of long messages

Everything in a trace may come from the model or the server, so control characters (ANSI escape
sequences, carriage returns, backspaces, C1 controls) and bidirectional-override characters are
shown escaped (``\x1b``, ``\u202e``), never passed to the terminal (:func:`safe_text`).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, TextIO, cast

from fwgym.tools.results import ToolErrorInfo
from fwgym.traces import Trace, TraceReply, TraceStep
from fwgym.validation import is_number

#: characters never written to the terminal: C0 controls but newline and tab, DEL, C1 controls,
#: bidirectional embeddings/overrides/isolates, and the line/paragraph separators
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def safe_text(text: str) -> str:
    """``text`` with every terminal-control character escaped (``"\\x1b[31m"`` for ESC [31m); newlines and
    tabs are kept."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)

NAME = "show-trace"
HELP = "print LLM-agent traces (JSONL) as readable transcripts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``show-trace``."""
    p.add_argument("file", help="a traces JSONL file (fwgym evaluate --agent openai|transformers writes <out>/traces.jsonl)")
    p.add_argument("--list", action="store_true", help="one summary line per episode")
    p.add_argument("--case", default=None, help="only episodes of this case id")
    p.add_argument("--policy", default=None, help="only episodes of this policy")
    p.add_argument("--episode", type=int, default=None, help="only the N-th episode of the file (0-based, after filters)")
    p.add_argument("--full", action="store_true", help="do not truncate long messages")
    p.add_argument("--max-chars", type=int, default=800, help="truncate each message to this many characters (default 800)")
    p.add_argument("--no-system", action="store_true", help="omit the system message")


def _short(text: Any, limit: int | None) -> str:
    s = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    if limit is not None and len(s) > limit:
        return s[: max(0, limit - 40)] + f" ...[{len(s) - limit + 40} more characters]"
    return s


def _fmt_num(v: Any, spec: str) -> str:
    return format(v, spec) if is_number(v) else "-"


def summary_line(i: int, t: Trace) -> str:
    """One line: index, policy, case, env status, agent status, valid, S, loss, credits, calls, turns
    (terminal controls escaped, newlines shown as ``\\n``)."""
    return safe_text(_summary(i, t).replace("\n", "\\n").replace("\t", " "))


def _summary(i: int, t: Trace) -> str:
    sc = t.get("score") or {}
    return (f"[{i}] {t.get('policy')} | case {t.get('case_id') or '?'} | status {sc.get('status', '-')} "
            f"| agent {t.get('agent_status')} | valid {sc.get('valid', '-')} | S {_fmt_num(sc.get('S'), '.4f')} "
            f"| loss {_fmt_num(sc.get('loss'), '.5f')} | credits {_fmt_num(sc.get('credits'), ',')} "
            f"| calls {sc.get('calls', '-')} | turns {t.get('turns', '-')} | {_fmt_num(t.get('wall_s'), '.1f')} s")


def _indent(text: str) -> str:
    return "  " + text.replace("\n", "\n  ")


def _header(t: Trace) -> list[str]:
    """Policy, settings, score, agent status, reason and final plan of a trace."""
    lines = ["=" * 100,
             f"policy {t.get('policy')}  backend {t.get('backend')}  case {t.get('case_id') or '?'}  started {t.get('started')}"]
    shown = {k: v for k, v in (t.get("settings") or {}).items() if v is not None}
    if shown:
        lines.append("settings " + json.dumps(shown, ensure_ascii=False))
    sc = t.get("score") or {}
    lines.append(f"env status {sc.get('status', '-')}  valid {sc.get('valid', '-')}  S {_fmt_num(sc.get('S'), '.4f')}  "
                 f"R {_fmt_num(sc.get('R'), '.4f')}  loss {_fmt_num(sc.get('loss'), '.5f')}  floor {_fmt_num(sc.get('floor'), '.5f')}  "
                 f"credits {sc.get('credits', '-')}  calls {sc.get('calls', '-')}")
    lines.append(f"agent status {t.get('agent_status')}" + (f" ({t['agent_status_detail']})" if t.get("agent_status_detail") else "")
                 + f"  turns {t.get('turns', '-')}  wall {_fmt_num(t.get('wall_s'), '.1f')} s  usage {json.dumps(t.get('usage') or {})}")
    if t.get("episode_id"):
        lines.append(f"episode {t['episode_id']}")
    he = t.get("harness_error")
    if he:
        lines.append(f"harness error ({he.get('kind')}): {he.get('message')} — not scored")
    if t.get("notices"):
        lines += [f"notice: {n}" for n in t["notices"]]
    if t.get("truncated"):
        lines.append("note: this trace was cut to the trace-line bound")
    if sc.get("reason"):
        lines.append(f"reason: {sc['reason']}")
    fp = t.get("final_plan")
    levels = fp.get("levels") if fp else None
    if levels:
        lines.append("final plan (levels): " + ", ".join(f"{x:g}" for x in levels))
    return lines


def _reply_label(turn: int, r: TraceReply) -> str:
    extra = []
    if r.get("finish_reason"):
        extra.append(f"finish {r['finish_reason']}")
    if r.get("latency_s") is not None:
        extra.append(f"{r['latency_s']} s")
    if (r.get("attempts") or 1) > 1:
        extra.append(f"{r['attempts']} attempts")
    return f"[assistant #{turn}]" + (f" ({', '.join(extra)})" if extra else "")


def _step_error(s: TraceStep) -> ToolErrorInfo:
    """The ``error`` of a step of kind ``error`` or ``abandon`` (:mod:`fwgym.cli.trace_shape` checks that it has one)."""
    return cast(ToolErrorInfo, s["error"])


def _text_step(s: TraceStep, max_chars: int | None) -> str:
    """How the harness read a reply that was not a native tool call."""
    if s.get("kind") == "error":
        return f"  !! not used: {_step_error(s)['code']}"
    if s.get("kind") == "answer":
        return "  -> answer: submit"
    return f"  -> tool call {s['action'].get('tool')}({_short(s['action'].get('args'), max_chars)}) [JSON in text]"


def _assistant(m: dict[str, Any], turn: int, reply: TraceReply, steps: list[TraceStep], max_chars: int | None) -> list[str]:
    lines = [_reply_label(turn, reply)]
    if reply.get("reasoning"):
        lines.append("  (reasoning) " + _short(reply["reasoning"], max_chars).replace("\n", "\n  "))
    if m.get("content"):
        lines.append(_indent(_short(m["content"], max_chars)))
    for tc in m.get("tool_calls") or []:
        fn = tc.get("function", {})
        lines.append(f"  -> tool call {fn.get('name')}({_short(fn.get('arguments'), max_chars)})  id {tc.get('id')}")
    lines += [_text_step(s, max_chars) for s in steps if s.get("turn") == turn and s.get("source") != "native"]
    return lines


def render_trace(t: Trace, *, max_chars: int | None = 800, system: bool = True) -> str:
    """A readable transcript of one trace record (``max_chars``: truncation of each message, ``None``: none;
    ``system``: include the system message); terminal controls are escaped (:func:`safe_text`)."""
    return safe_text(_render(t, max_chars, system))


def _render(t: Trace, max_chars: int | None, system: bool) -> str:
    lines = _header(t)
    replies = {r.get("turn"): r for r in t.get("replies") or []}
    steps = t.get("steps") or []
    lines.append("-" * 100)
    turn = 0
    for m in t.get("messages") or []:
        role = m.get("role")
        if role == "system" and not system:
            continue
        if role == "assistant":
            turn += 1
            lines += _assistant(m, turn, replies.get(turn, {}), steps, max_chars)
        elif role == "tool":
            lines += [f"[tool result {m.get('tool_call_id')}]", _indent(_short(m.get("content"), max_chars))]
        else:
            # the system message and the case message are long: allow them 4x the limit
            limit = max_chars * 4 if max_chars is not None and turn == 0 else max_chars
            lines += [f"[{role}]", _indent(_short(m.get("content"), limit))]
    for s in steps:
        if s.get("kind") == "abandon":
            error = _step_error(s)
            lines.append(f"[agent] abandoned the episode: {error['code']}: {_short(error['message'], max_chars)}")
    return "\n".join(lines)


def run(args, out: TextIO | None = None) -> int:
    """Print the selected traces (or one summary line each with ``--list``) to ``out`` (default stdout).

    Returns:
        0; 1 when no episode matches; 2 when the file cannot be read or ``--episode`` is out of range.
    """
    from fwgym.agents.chat.traces import read_traces
    from fwgym.cli.trace_shape import check_traces

    out = out or sys.stdout
    try:
        traces = check_traces(read_traces(args.file), args.file)  # a JSON object per line is not yet a trace
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"fwgym show-trace: error: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"fwgym show-trace: error: {exc}", file=sys.stderr)
        return 2
    sel = [(i, t) for i, t in enumerate(traces)
           if (args.case is None or t.get("case_id") == args.case) and (args.policy is None or t.get("policy") == args.policy)]
    if args.episode is not None:
        if not 0 <= args.episode < len(sel):
            print(f"fwgym show-trace: error: --episode {args.episode} out of range (0..{len(sel) - 1})", file=sys.stderr)
            return 2
        sel = [sel[args.episode]]
    if not sel:
        print(f"fwgym show-trace: no episodes match ({len(traces)} in {args.file})", file=sys.stderr)
        return 1
    if args.list:
        for i, t in sel:
            print(summary_line(i, t), file=out)
        return 0
    for _, t in sel:
        print(render_trace(t, max_chars=None if args.full else args.max_chars, system=not args.no_system), file=out)
    return 0


__all__ = ["NAME", "HELP", "add_arguments", "run", "render_trace", "summary_line", "safe_text"]
