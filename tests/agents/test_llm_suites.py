"""Every suite is playable by a chat model (issue 19.4): forecast episodes answered in text or by a submit call get
exactly the RCRPS of a direct submit; the context suite and the direct-prompt baseline run end to end through the
openai client and a scripted server."""
import json

import numpy as np
import pytest

pytest.importorskip("openai", reason="the llm extra (openai) is not installed")

from fwgym.agents import run_episode  # noqa: E402
from fwgym.agents.openai import OpenAIChatAgent  # noqa: E402
from fwgym.envs.fwbench import FWBenchEnv  # noqa: E402
from fwgym.evaluation import SUITES  # noqa: E402
from fwgym.testing.chat_server import ScriptedChatServer, completion  # noqa: E402


@pytest.fixture(scope="module")
def fenv():
    return FWBenchEnv("electricity", split="dev", **SUITES["forecast"])


@pytest.fixture(scope="module")
def forecast(fenv):
    """A case, quantiles (24 x 9, non-decreasing, from the visible history) and samples, and their direct scores."""
    cid = fenv.cases[3].case_id
    obs, _ = fenv.reset(options={"case_id": cid})
    last_day = np.asarray(obs["history"][-24:], dtype=float)
    q = [[round(float(v) * (0.8 + 0.05 * k), 3) for k in range(9)] for v in last_day]
    samples = [[round(float(v) * f, 3) for v in last_day] for f in (0.9, 1.0, 1.1)]
    direct = {}
    for key, value in (("quantiles", q), ("samples", samples)):
        fenv.reset(options={"case_id": cid})
        *_, term, _, info = fenv.step({"tool": "submit", "args": {key: value}})
        assert term and info["valid"]
        direct[key] = (info["rcrps"], info["S"])
    return cid, q, samples, direct


def _run(env, cid, script, **kw):
    srv = ScriptedChatServer(script)
    try:
        agent = OpenAIChatAgent("test-model", base_url=srv.url, timeout=5.0, **kw)
        return run_episode(env, agent, options={"case_id": cid}).record, srv.posts(), agent
    finally:
        srv.close()


@pytest.mark.parametrize("route", ["text", "fenced-text-with-prose", "submit-call", "text-tool-call"])
def test_forecast_answered_in_text_scores_exactly_like_a_direct_submit(fenv, forecast, route):
    cid, q, samples, direct = forecast
    body = json.dumps({"quantiles": q})
    reply = {"text": completion(body),
             "fenced-text-with-prose": completion("My forecast, by hour:\n```json\n" + body + "\n```\nDone."),
             "submit-call": completion(tool_calls=[("submit", {"quantiles": q})]),
             "text-tool-call": completion(json.dumps({"tool": "submit", "args": {"quantiles": q}}))}[route]
    rec, posts, agent = _run(fenv, cid, [reply], native_tools=route == "submit-call")
    assert rec["valid"] and rec["status"] == "submitted" and rec["calls"] == 0
    assert (rec["rcrps"], rec["S"]) == direct["quantiles"]
    system = posts[0]["body"]["messages"][0]["content"]
    assert "RCRPS" in system and '{"quantiles"' in system and "8 capacities" not in system
    if route == "submit-call":
        (submit,) = [t for t in posts[0]["body"]["tools"] if t["function"]["name"] == "submit"]
        assert set(submit["function"]["parameters"]["properties"]) == {"quantiles", "samples"}


def test_forecast_samples_and_a_bad_shape_get_feedback(fenv, forecast):
    cid, q, samples, direct = forecast
    rec, posts, agent = _run(fenv, cid, [completion(json.dumps({"quantiles": q[:23]})),
                                         completion(json.dumps({"samples": samples}))], native_tools=False)
    assert rec["valid"] and rec["calls"] == 1 and (rec["rcrps"], rec["S"]) == direct["samples"]
    feedback = posts[1]["body"]["messages"][-1]["content"]
    assert "bad_forecast_shape" in feedback and "24 rows" in feedback


def test_forecast_answer_from_a_bought_forecast(fenv, forecast):
    """The model buys a forecast and copies the target rows (the prompt names them) into its answer."""
    cid, *_ = forecast
    fenv.reset(options={"case_id": cid})
    lo, hi = fenv.episode.case.target_steps

    def answer_from_forecast(body):
        res = json.loads(body["messages"][-1]["content"].split("\n[calls left")[0])["result"]
        return completion(json.dumps({"quantiles": res["quantiles"][lo - 1:hi]}))

    rec, posts, agent = _run(fenv, cid, [completion(tool_calls=[("forecast", {"model": "seasonal_empirical"})]),
                                         answer_from_forecast])
    assert rec["valid"] and rec["calls"] == 1 and rec["credits"] > 0
    assert f"rows {lo}..{hi} cover the target" in posts[0]["body"]["messages"][0]["content"]


def test_direct_prompt_baseline_on_the_forecast_suite(fenv, forecast):
    # CiK's direct prompt: 25 trajectories, no tools; an unusable completion is retried, never a tool call
    from fwgym.testing.chat_server import trajectory_answer

    cid = forecast[0]
    rec, posts, agent = _run(fenv, cid, [completion(json.dumps({"tool": "catalog"}))] + [trajectory_answer] * 29,
                             direct_prompt=True)
    assert rec["valid"] and rec["calls"] == 0 and len(rec["submission"]["values"]) == 25 and len(posts) == 30
    first = posts[0]["body"]
    assert "tools" not in first and first["messages"][1]["content"].startswith("\nI have a time series forecasting task")
    assert agent.trace["direct_samples"]["rejected"] == {"no_forecast_tags": 1}


def test_context_suite_is_played_with_levels(case_id):
    env = FWBenchEnv("electricity", split="dev", **SUITES["context"])
    env.reset(options={"case_id": case_id})
    obs, *_ = env.step({"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}})
    levels = json.loads(obs["last_result"])["result"]["plan"]["levels"]
    env.reset(options={"case_id": case_id})
    *_, info = env.step({"tool": "submit", "args": {"levels": levels}})
    rec, posts, agent = _run(env, case_id, [completion(tool_calls=[("classical_plan", {"method": "hour_of_day_empirical"})]),
                                            completion(json.dumps({"levels": levels}))], compact_results=True)
    assert rec["valid"] and rec["S"] == info["S"] and rec["scenario"] == info["scenario"]
    shown = posts[1]["body"]["messages"][-1]["content"]
    assert '"levels"' in shown and '"decisions"' not in shown and '"tool"' not in shown  # compact: levels only
