"""A small real evaluation with traced agents, and the report built from it (shared by the report tests).

Policies: three baselines and the perfect-demand oracle on 2 cases per domain (4 cases), plus
``scripted_minimal``, an agent that writes its own trace in the report's minimal trace schema (a
history call, a forecast purchase, then a submit; on cycle-hire cases an infeasible plan, so those
episodes are invalid) and, when the chat agent stack is importable, ``scripted_chat``: a
:class:`fwgym.agents.chat.ChatAgent` with a scripted model, whose traces have the full format.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

BASELINES = ["weekday_empirical", "hour_of_day_empirical", "seasonal_empirical", "perfect_demand"]
LIMIT = 2  # cases per domain
BAD_LEVELS = [0.4, 2.0, 0.4, 2.0, 0.4, 2.0, 0.4, 2.0]  # breaks the ramp limit: an invalid plan


class ScriptedMinimal:
    """Tool calls from a script; writes one minimal-schema trace line per episode to ``path``."""

    name = "scripted_minimal"

    def __init__(self, path: str):
        self.path = path
        self.messages, self.steps, self.turn = [], [], 0

    def reset(self):
        self.messages, self.steps, self.turn = [], [], 0

    def act(self, obs):
        if self.turn == 0:
            self.messages = [{"role": "system", "content": "You buy forecasts and plan capacities."},
                             {"role": "user", "content": obs["context"]}]
        else:
            raw = obs["last_result"]
            self.messages.append({"role": "tool", "tool_call_id": f"c{self.turn}", "content": raw})
            self.steps[-1].update(env_result=json.loads(raw), budget_left=int(obs["budget_left"][0]),
                                  calls_left=int(obs["calls_left"]))
        self.turn += 1
        if self.turn == 1:
            action = {"tool": "history", "args": {"last": 24}}
            text = "First the last day of history."
        elif self.turn == 2:
            action = {"tool": "forecast", "args": {"model": "seasonal_empirical"}}
            text = "Then a cheap forecast."
        else:
            cycle = "departures" in obs["context"].split("\n", 1)[0]
            action = {"tool": "submit", "args": {"levels": BAD_LEVELS if cycle else [1.0] * 8}}
            text = "Submitting."
        self.messages.append({"role": "assistant", "content": text,
                              "tool_calls": [{"id": f"c{self.turn}", "type": "function",
                                              "function": {"name": action["tool"], "arguments": json.dumps(action["args"])}}]})
        self.steps.append({"action": action, "env_result": None, "budget_left": None, "calls_left": None})
        return action

    def end_episode(self, record):
        line = {"policy": self.name, "case_id": record["case_id"], "messages": self.messages, "steps": self.steps,
                "score": {k: record.get(k) for k in ("S", "R", "loss", "credits", "calls", "valid", "status", "reason")},
                "agent_status": "answered", "extra_field_ignored": {"x": 1}}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def _chat_factory(path: str):
    """A ChatAgent with a scripted model, or None when the chat stack is not importable."""
    try:
        from fwgym.agents.chat import ChatAgent, ModelReply, ToolRequest
    except ImportError:
        return None

    class ScriptedChat(ChatAgent):
        backend = "scripted"

        def complete(self, messages, tools):
            n = sum(1 for m in messages if m.get("role") == "assistant")
            if n == 0:
                return ModelReply(content="I will look at the weekday plan first.", reasoning="The weekday profile is a good start.",
                                  tool_calls=[ToolRequest("t1", "classical_plan", {"method": "weekday_empirical"})],
                                  finish_reason="tool_calls", meta={"latency_s": 0.01, "usage": {"prompt_tokens": 900, "completion_tokens": 20}})
            return ModelReply(content=None, tool_calls=[ToolRequest("t2", "submit", {"levels": [1.0] * 8})],
                              finish_reason="tool_calls", meta={"latency_s": 0.01})

    def factory():
        return ScriptedChat("scripted_chat", trace_out=path)

    return factory


@pytest.fixture(scope="session")
def report_site(tmp_path_factory):
    """``{"results", "traces", "out", "report", "records", "policies", "traced"}`` of the shared build."""
    from fwgym.evaluation import evaluate, read_results, run_meta, write_results
    from fwgym.report import build_report

    root = tmp_path_factory.mktemp("report")
    traces = root / "traces.jsonl"
    policies = list(BASELINES) + [lambda: ScriptedMinimal(str(traces))]
    chat = _chat_factory(str(traces))
    if chat is not None:
        policies.append(chat)
    records = evaluate(policies, split="test", limit=LIMIT, progress=False)
    labels = list(dict.fromkeys(r["policy"] for r in records))
    write_results(records, root / "results", run_meta("test", labels, 1))
    report = build_report([root / "results"], root / "site", traces=[traces], max_episode_pages=None)
    return {"results": root / "results", "traces": traces, "out": root / "site", "report": report,
            "records": read_results([root / "results"]), "policies": labels,
            "traced": ["scripted_minimal"] + (["scripted_chat"] if chat is not None else [])}


FORECAST_POLICIES = ["context_hour_of_day_empirical", "hour_of_day_empirical_samples"]


@pytest.fixture(scope="session")
def forecast_site(tmp_path_factory):
    """A forecast-suite run (2 forecast baselines, 2 cases per domain) and its report (every episode paged;
    the baselines are replayed, so their pages show the submitted forecast)."""
    from fwgym.evaluation import SUITES, evaluate, read_results, run_meta, write_results
    from fwgym.report import build_report

    root = tmp_path_factory.mktemp("forecast-report")
    records = evaluate(FORECAST_POLICIES, split="test", limit=LIMIT, progress=False, env_kwargs=SUITES["forecast"])
    write_results(records, root / "results", {**run_meta("test", FORECAST_POLICIES, 1), "suite": "forecast"})
    report = build_report([root / "results"], root / "site", max_episode_pages=None, n_boot=500)
    return {"results": root / "results", "out": root / "site", "report": report,
            "records": read_results([root / "results"])}


_ARTIFACTS: list[Path] = []


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory) -> Path:
    """Where screenshots go: ``$FWGYM_ARTIFACTS`` or a temporary folder (printed at the end of the run)."""
    env = os.environ.get("FWGYM_ARTIFACTS")
    p = Path(env) if env else tmp_path_factory.mktemp("artifacts")
    p.mkdir(parents=True, exist_ok=True)
    _ARTIFACTS.append(p)
    return p


def pytest_terminal_summary(terminalreporter):
    for p in _ARTIFACTS:
        shots = sorted(p.glob("*.png"))
        if shots:
            terminalreporter.write_line(f"report screenshots: {len(shots)} PNG files in {p}")
