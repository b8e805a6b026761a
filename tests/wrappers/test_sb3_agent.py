"""SB3Agent: a learned policy as an fwgym agent on the raw env (same S as the wrapper), the ``sb3``
agent kind of ``fwgym evaluate``, and a smoke run of examples/train_ppo.py."""
import argparse
import functools
import pickle
import runpy
from pathlib import Path

import numpy as np
import pytest

from fwgym.agents.base import run_episode
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import evaluate, select_cases
from fwgym.wrappers import make_rl_env
from fwgym.wrappers.features import resolve_features
from fwgym.wrappers.sb3_agent import SB3Agent, read_spec, save_policy

ROOT = Path(__file__).resolve().parents[2]


def _train(algo, variant, tmp_path, features="all", steps=256):
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    cls = MaskablePPO if algo == "MaskablePPO" else PPO
    env = make_rl_env(domain="all", split="dev", variant=variant, features=features)
    model = cls("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(steps)
    return model, save_policy(model, tmp_path / f"{algo.lower()}_{variant}", variant, features)


@pytest.fixture(scope="module")
def ppo_macro(tmp_path_factory):
    return _train("PPO", "macro", tmp_path_factory.mktemp("ppo"))


@pytest.fixture(scope="module")
def maskable_sequential(tmp_path_factory):
    return _train("MaskablePPO", "sequential", tmp_path_factory.mktemp("mppo"), features="compact")


def _wrapper_scores(model, variant, cases, masked, features):
    """Run the policy inside the training wrapper on each case: ``{case_id: (S, choices)}``."""
    out = {}
    for domain, cid in cases:
        env = make_rl_env(domain=domain, split="test", variant=variant, reward="terminal", features=features)
        x, info = env.reset(options={"case_id": cid})
        choices, term = [], False
        while not term:
            kw = {"action_masks": env.action_masks()} if masked else {}
            a, _ = model.predict(x, deterministic=True, **kw)
            x, r, term, trunc, info = env.step(a)
            choices.append(info["macro"])
        out[cid] = (info["S"], choices)
    return out


@pytest.mark.parametrize("which", ["ppo_macro", "maskable_sequential"])
def test_agent_on_raw_env_scores_like_the_wrapper(which, request):
    model, path = request.getfixturevalue(which)
    algo, variant, features = (("PPO", "macro", "all") if which == "ppo_macro" else ("MaskablePPO", "sequential", "compact"))
    spec = read_spec(path)
    assert spec["variant"] == variant and spec["algo"] == algo and spec["n_features"] == (403 if features == "all" else 56)
    agent = SB3Agent(path)  # algo, variant and features read from the zip
    assert (agent.algo, agent.variant, agent.name) == (algo, variant, path.stem)
    assert agent.feature_names == resolve_features(features)
    cases = select_cases("test", limit=3)
    direct = _wrapper_scores(model, variant, cases, masked=algo == "MaskablePPO", features=features)
    records = evaluate([functools.partial(SB3Agent, str(path), algo=algo)], split="test", limit=3, progress=False)
    assert len(records) == len(cases)
    for r in records:
        assert r["policy"] == path.stem
        assert r["S"] == direct[r["case_id"]][0]  # identical tool calls -> identical score
    # the agent's own record of its choices matches the wrapper's
    domain, cid = cases[0]
    res = run_episode(FWBenchEnv(domain, split="test"), agent, options={"case_id": cid})
    assert agent.choices == direct[cid][1] and res.record["S"] == direct[cid][0]


def test_agent_reuse_across_episodes_and_string_actions(ppo_macro):
    _, path = ppo_macro
    agent = SB3Agent(str(path)[:-4], algo="PPO", name="mine")  # ".zip" may be omitted
    env = FWBenchEnv(("electricity", "cycle_hire"), split="test")
    scores = [run_episode(env, agent, seed=s).record for s in range(4)]
    again = [run_episode(env, agent, seed=s).record for s in range(4)]
    assert [r["S"] for r in scores] == [r["S"] for r in again]
    assert all(r["policy"] == "mine" and r["valid"] for r in scores)


def test_agent_errors(tmp_path, ppo_macro):
    with pytest.raises(FileNotFoundError):
        SB3Agent(tmp_path / "missing.zip")
    with pytest.raises(ValueError, match="algo"):
        SB3Agent(ppo_macro[1], algo="DQN")
    from stable_baselines3 import PPO
    import gymnasium as gym

    other = PPO("MlpPolicy", gym.make("CartPole-v1"), n_steps=64, batch_size=32, device="cpu")
    other.save(tmp_path / "cartpole")
    with pytest.raises(ValueError, match="do not match|cannot tell"):
        SB3Agent(tmp_path / "cartpole.zip")
    with pytest.raises(ValueError, match="do not match"):
        save_policy(other, tmp_path / "x", "macro")
    agent = SB3Agent(ppo_macro[1])
    env = FWBenchEnv("electricity", split="test", tools=["history", "classical_plan"])
    with pytest.raises(RuntimeError, match="catalog call failed"):
        run_episode(env, agent, seed=0)
    with pytest.raises(RuntimeError, match="text_observations=True"):
        run_episode(FWBenchEnv("electricity", split="test", text_observations=False), SB3Agent(ppo_macro[1]), seed=0)


def test_plain_model_save_still_loads(tmp_path, ppo_macro, maskable_sequential):
    model, _ = ppo_macro
    model.save(tmp_path / "plain")  # no fwgym spec: the variant comes from the action-space size
    agent = SB3Agent(tmp_path / "plain.zip")
    assert agent.variant == "macro" and agent.algo == "PPO" and len(agent.feature_names) == 403
    model, _ = maskable_sequential
    model.save(tmp_path / "plain2")
    agent = SB3Agent(tmp_path / "plain2.zip", algo="MaskablePPO")
    assert agent.variant == "sequential" and agent.feature_names == resolve_features("compact")


def test_sb3_agent_kind_and_cli(tmp_path, ppo_macro, capsys):
    from fwgym.agents.registry import agent_kinds
    from fwgym.cli import main
    from fwgym.wrappers import sb3_cli

    kinds = agent_kinds()
    assert kinds["sb3"] is sb3_cli and sb3_cli.KIND == "sb3" and sb3_cli.HELP
    parser = argparse.ArgumentParser()
    sb3_cli.add_arguments(parser.add_argument_group("sb3"))
    args = parser.parse_args(["--model-path", str(ppo_macro[1]), "--algo", "PPO"])
    factory = sb3_cli.build(args)
    assert isinstance(factory, functools.partial)
    agent = pickle.loads(pickle.dumps(factory))()
    assert isinstance(agent, SB3Agent) and agent.algo == "PPO"
    with pytest.raises(ValueError, match="--model-path"):
        sb3_cli.build(parser.parse_args([]))
    with pytest.raises(FileNotFoundError):
        sb3_cli.build(parser.parse_args(["--model-path", str(tmp_path / "nope.zip")]))
    rc = main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--agent", "sb3", "--model-path",
               str(ppo_macro[1]), "--policies", "weekday_empirical", "--out", str(tmp_path / "out")])
    assert rc == 0
    out = capsys.readouterr().out
    assert ppo_macro[1].stem in out and "weekday_empirical" in out
    assert (tmp_path / "out" / "results.jsonl").is_file()


def test_train_ppo_example_quick_run(tmp_path, capsys):
    example = runpy.run_path(str(ROOT / "examples" / "train_ppo.py"))
    rc = example["main"](["--steps", "256", "--n-envs", "2", "--n-steps", "128", "--batch-size", "64", "--epochs", "1",
                          "--limit", "2", "--n-boot", "50", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "ppo_macro" in out and "maskableppo_macro" in out and "95% CI" in out and "best fixed free policy" in out
    assert (tmp_path / "ppo_macro.zip").is_file() and (tmp_path / "test" / "bootstrap.json").is_file()


def test_local_paired_cluster_bootstrap_is_sane():
    example = runpy.run_path(str(ROOT / "examples" / "train_ppo.py"))
    records = evaluate(["weekday_empirical", "hour_of_day_empirical"], split="test", limit=12, progress=False)
    b = example["paired_cluster_bootstrap"](records, "weekday_empirical", "hour_of_day_empirical", n_boot=300)
    from fwgym.evaluation import leaderboard

    rows = {r["policy"]: r["S"] for r in leaderboard(records)}
    assert b["diff"] == pytest.approx(rows["weekday_empirical"] - rows["hour_of_day_empirical"], abs=1e-12)
    assert b["lo"] <= b["diff"] <= b["hi"]
    same = example["paired_cluster_bootstrap"](records, "weekday_empirical", "weekday_empirical", n_boot=50)
    assert same["diff"] == same["lo"] == same["hi"] == 0.0
    assert np.isfinite(b["lo"]) and b["clusters"] > 2
    # the example prefers fwgym.evaluation.paired_bootstrap (policy - reference) when it exists
    lib = example["bootstrap"](records, "weekday_empirical", "hour_of_day_empirical", 2000, None)
    assert lib["diff"] == pytest.approx(b["diff"], abs=1e-12)
    assert lib["lo"] == pytest.approx(b["lo"], abs=0.05) and lib["hi"] == pytest.approx(b["hi"], abs=0.05)
