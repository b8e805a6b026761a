"""Context is Key's direct prompt (fwgym.agents.chat.direct): CiK's prompt, its trajectory parser, its
rejection-sampling retries, temperature 1, and the fair estimator beside nrg in the record."""
import json

import numpy as np
import pytest

from fwgym.agents.chat.direct import (N_SAMPLES, SYSTEM, TrajectoryError, batch_sizes, cik_prompt, cik_timestamps,
                                      parse_trajectory)
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import SUITES

STAMPS = [f"2024-07-20 {h:02d}:00:00" for h in range(24)]


def _block(values, stamps=STAMPS, fmt="({t}, {v})"):
    return "<forecast>\n" + "\n".join(fmt.format(t=t, v=v) for t, v in zip(stamps, values)) + "\n</forecast>"


@pytest.mark.parametrize("text,expected", [
    (_block(range(24)), list(map(float, range(24)))),
    ("Sure! Here it is:\n" + _block(range(24)) + "\nHope this helps", list(map(float, range(24)))),
    (_block(range(24), fmt="('{t}', {v})"), list(map(float, range(24)))),  # quotes are removed
    (_block(range(24), fmt='("{t}", {v})'), list(map(float, range(24)))),
    (_block(range(24), fmt="({t},{v}.5)"), [v + 0.5 for v in range(24)]),
    (_block(range(24), fmt="({t}, {v}, extra)"), list(map(float, range(24)))),  # CiK reads the second field only
    (_block(range(24)).replace("</forecast>", f"({STAMPS[0]}, 99)\n</forecast>"), [99.0] + list(map(float, range(1, 24)))),
    (_block(range(24)).replace("</forecast>", "(2024-07-21 00:00:00, 5)\n</forecast>"), list(map(float, range(24)))),
    (_block(range(24)) + _block([7] * 24), list(map(float, range(24)))),  # the first block
])
def test_trajectories_cik_accepts(text, expected):
    assert parse_trajectory(text, STAMPS) == expected


@pytest.mark.parametrize("text,reason", [
    ("(2024-07-20 00:00:00, 1)", "no_forecast_tags"),
    ("", "no_forecast_tags"),
    (None, "no_forecast_tags"),
    (_block(range(23), STAMPS[:23]), "missing_timestamp"),
    (_block(range(24), [s.replace(" ", "T") for s in STAMPS]), "missing_timestamp"),  # another timestamp format
    (_block(range(24), fmt=" ({t}, {v})").replace("<forecast>\n ", "<forecast>\n"), "missing_timestamp"),  # padded keys
    (_block(range(24)).replace("\n(2024-07-20 05", "\n\n(2024-07-20 05"), "bad_line"),  # a blank line
    (_block(range(24)).replace("(2024-07-20 03:00:00, 3)", "(2024-07-20 03:00:00 3)"), "bad_line"),
    (_block(range(24)).replace(", 3)", ", 3 MW)"), "bad_line"),
    (_block(range(24)).replace(", 3)", ", nan)"), "non_finite"),
    (_block(range(24)).replace(", 3)", ", inf)"), "non_finite"),
])
def test_trajectories_cik_rejects(text, reason):
    with pytest.raises(TrajectoryError) as exc:
        parse_trajectory(text, STAMPS)
    assert exc.value.reason == reason


def test_batches_are_ciks():
    assert N_SAMPLES == 25 and batch_sizes(25) == [25, 5, 5] and batch_sizes(4) == [4, 5, 5]


@pytest.fixture(scope="module")
def fenv():
    return FWBenchEnv("electricity", split="dev", **SUITES["forecast"])


def test_prompt_is_ciks_make_prompt(fenv):
    obs, info = fenv.reset(options={"case_id": fenv.cases[2].case_id})
    facts = info["episode"]
    system, user = cik_prompt(obs, facts)
    assert system == SYSTEM == "You are a useful forecasting assistant."
    assert user.startswith("\nI have a time series forecasting task for you.\n\nHere is some context about the task. "
                           "Make sure to factor in any background knowledge,\nsatisfy any constraints, and respect any "
                           "scenarios.\n<context>\nBackground: Series: ")
    note = next(line for line in obs["context"].splitlines() if line.startswith("Context: "))
    assert "\nScenario: " + note[len("Context: "):] + "\n\n</context>" in user
    assert "Task:" not in user and "Tools:" not in user and "submit" not in user  # fwgym's answer format is left out
    hist = user.split("<history>\n")[1].split("\n</history>")[0].splitlines()
    start = facts["history"]["start"][:19].replace("T", " ")
    assert len(hist) == 336 and hist[0] == f"({start}, {float(obs['history'][0]):.6g})"
    stamps = cik_timestamps(facts)
    assert stamps[0] == facts["target"]["start"][:19].replace("T", " ") and len(stamps) == 24
    assert f"following timestamps: {np.array(stamps)}." in user  # numpy's print of the array, as CiK's f-string
    assert user.endswith("<forecast>\n(t4, v4)\n(t5, v5)\n</forecast>\n\n")
    _, short = cik_prompt(obs, facts, history_hours=48)
    assert short.split("<history>\n")[1].count("\n(") == 47


def _run(env, cid, respond, **kw):
    pytest.importorskip("openai")
    from fwgym.agents import run_episode
    from fwgym.agents.openai import OpenAIChatAgent
    from fwgym.testing.chat_server import ScriptedChatServer

    with ScriptedChatServer(respond=respond) as srv:
        agent = OpenAIChatAgent("test-model", base_url=srv.url, timeout=5.0, direct_prompt=True, **kw)
        rec = run_episode(env, agent, options={"case_id": cid}).record
        return rec, srv.posts(), agent


def test_twenty_five_requests_at_temperature_one_parse_to_a_sample_array(fenv):
    from fwgym.testing.chat_server import trajectory_answer

    cid = fenv.cases[5].case_id
    rec, posts, agent = _run(fenv, cid, trajectory_answer, seed=100)
    assert len(posts) == 25
    for i, p in enumerate(posts):
        b = p["body"]
        assert b["temperature"] == 1.0 and b["seed"] == 100 + i and "tools" not in b
        assert [m["role"] for m in b["messages"]] == ["system", "user"]
    stamps = cik_timestamps(agent.session.episode)
    samples = np.array([parse_trajectory(json.loads(json.dumps(trajectory_answer(p["body"])))["choices"][0]["message"]
                                         ["content"], stamps) for p in posts])
    assert samples.shape == (25, 24)
    assert rec["valid"] and rec["submission"]["kind"] == "samples"
    np.testing.assert_array_equal(np.asarray(rec["submission"]["values"]), samples)
    assert agent.trace["direct_samples"] == {"requested": 25, "completions": 25, "valid": 25, "rejected": {},
                                             "outcomes": ["valid"] * 25}
    # the record reports CiK's fair estimator beside the score (nrg): the fair one is lower for a spread ensemble
    assert rec["rcrps_fair"] is not None and rec["rcrps_fair"] < rec["rcrps"]
    assert rec["calls"] == 0 and rec["credits"] == 0


def test_rejected_completions_are_retried_in_batches_of_five_and_counted(fenv):
    from fwgym.testing.chat_server import completion, trajectory_answer

    cid = fenv.cases[5].case_id
    bad = {3, 7, 11, 26}  # 3 bad in the first 25 -> a batch of 5 (one bad) -> 21 + 4 = 25 valid after 30 completions
    count = [0]

    def respond(body):
        count[0] += 1
        return completion("I cannot forecast this.") if count[0] - 1 in bad else trajectory_answer(body)

    rec, posts, agent = _run(fenv, cid, respond)
    assert len(posts) == 30 and rec["valid"] and len(rec["submission"]["values"]) == 25
    assert all(p["body"]["temperature"] == 1.0 and "seed" not in p["body"] for p in posts)
    ds = agent.trace["direct_samples"]
    assert ds["completions"] == 30 and ds["valid"] == 26 and ds["rejected"] == {"no_forecast_tags": 4}


def test_too_few_valid_trajectories_fail_the_forecast_as_ciks_fail_on_invalid(fenv):
    from fwgym.testing.chat_server import completion, trajectory_answer

    count = [0]

    def respond(body):  # every other completion is unusable: 13 + 3 + 2 = 18 valid of 35
        count[0] += 1
        return trajectory_answer(body) if count[0] % 2 else completion("<forecast>\n(1, 2)\n</forecast>")

    rec, posts, agent = _run(fenv, fenv.cases[5].case_id, respond)
    assert len(posts) == 35
    assert not rec["valid"] and rec["status"] == "abstained" and rec["S"] == 5.0 and rec["rcrps_fair"] is None
    assert rec["reason"].startswith("direct_prompt_failed: 18 of 25 trajectories valid after 35 completions")
    assert agent.trace["direct_samples"]["rejected"] == {"missing_timestamp": 17}


def test_samples_option_and_an_explicit_temperature(fenv):
    from fwgym.testing.chat_server import trajectory_answer

    rec, posts, _ = _run(fenv, fenv.cases[5].case_id, trajectory_answer, samples=4, temperature=0.7)
    assert len(posts) == 4 and all(p["body"]["temperature"] == 0.7 for p in posts)
    assert rec["valid"] and len(rec["submission"]["values"]) == 4
