"""Registration: every id defaults to the train split, evaluation defaults to test, a case of another
split is refused; the RL ids (spaces, masks, dense reward, native vector env); fwgym's Text
observations refuse gymnasium's async shared memory; rl_zoo3 trains, enjoys and `fwgym evaluate`
scores the result."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import fwgym
from fwgym.envs import ENV_IDS, RL_DEFAULTS, RL_ENV_IDS
from fwgym.envs.fwbench import MAX_TEXT, FWBenchEnv
from fwgym.envs.spaces import PrintableText

ROOT = Path(__file__).resolve().parents[2]
TEST_CASE = "elec-ISNE-2024-07-19-day_ahead"


@pytest.mark.parametrize("env_id", sorted(ENV_IDS) + sorted(RL_ENV_IDS))
def test_every_id_defaults_to_the_train_split(env_id):
    assert gym.spec(env_id).kwargs["split"] == "train"
    env = gym.make(env_id)
    assert env.unwrapped.split == "train" and {c.split for c in env.unwrapped.cases} == {"train"}


def test_env_and_evaluation_defaults():
    assert inspect.signature(FWBenchEnv).parameters["split"].default == "train"
    from fwgym.evaluation import evaluate, select_cases

    assert inspect.signature(evaluate).parameters["split"].default == "test"
    assert inspect.signature(select_cases).parameters["split"].default == "test"
    from fwgym.cli import build_parser

    args = build_parser().parse_args(["evaluate"])
    assert args.split == "test"


def test_a_case_of_another_split_is_refused():
    train = FWBenchEnv("electricity")  # default: train
    with pytest.raises(ValueError, match=r"'test' split; this env plays the 'train' split"):
        train.reset(options={"case_id": TEST_CASE})
    test = FWBenchEnv("electricity", split="test")
    assert test.reset(options={"case_id": TEST_CASE})[1]["case_id"] == TEST_CASE
    train_case = train.cases[0].case_id
    with pytest.raises(ValueError, match=r"'train' split; this env plays the 'test' split"):
        test.reset(options={"case_id": train_case})
    dev = FWBenchEnv("electricity", split="dev")
    with pytest.raises(ValueError, match="split='test'"):
        dev.reset(options={"case_id": TEST_CASE})
    # a case of the env's own split outside its pool (another lead) still plays; unknown ids stay clear errors
    day = FWBenchEnv("electricity", split="test", lead="day_ahead")
    week = TEST_CASE.replace("day_ahead", "week_ahead")
    assert day.reset(options={"case_id": week})[1]["case_id"] == week
    with pytest.raises(ValueError, match="is not in any split"):
        test.reset(options={"case_id": "elec-ISNE-2031-07-19-day_ahead"})
    with pytest.raises(ValueError, match="domain"):
        test.reset(options={"case_id": "cycle-191-2015-10-01-day_ahead"})
    with pytest.raises(ValueError, match="malformed"):
        test.reset(options={"case_id": "nonsense"})


def test_rl_ids_spaces_masks_and_dense_reward():
    assert RL_DEFAULTS["split"] == "train"
    macro = gym.make("FWBench-RL-Macro-v0", split="dev")
    seq = gym.make("FWBench-RL-Sequential-v0", split="dev")
    n = macro.observation_space.shape[0]
    assert macro.action_space.n == 12 and seq.action_space.n == 28 and seq.observation_space.shape == (n,)
    for env in (macro, seq):
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs) and info["action_mask"].dtype == bool
        masks = env.get_wrapper_attr("action_masks")()  # what MaskablePPO reads
        assert np.array_equal(masks, info["action_mask"]) and masks[:8].all()
        total, done = 0.0, False
        while not done:
            mask = env.get_wrapper_attr("action_masks")()
            a = int(np.flatnonzero(mask)[-1])  # the last allowed entry: buys (seasonal_empirical) when it can
            obs, r, term, trunc, info = env.step(a)
            total += r
            done = term or trunc
        assert total == pytest.approx(-info["S"], abs=1e-12)  # dense reward: the episode sum is -S
    assert gym.spec("FWBench-RL-Macro-v0").vector_entry_point == "fwgym.rl.vector:MacroVectorEnv"
    assert gym.spec("FWBench-RL-Sequential-v0").vector_entry_point is None


def test_text_spaces_refuse_async_shared_memory_and_work_without_it():
    env = FWBenchEnv("electricity", split="dev")
    assert isinstance(env.observation_space["context"], PrintableText)
    assert env.observation_space["context"] == gym.spaces.Text(MAX_TEXT, min_length=0, charset=env.observation_space["context"].character_set)
    with pytest.raises(ValueError, match=r"shared_memory=False.*vector_kwargs=\{'shared_memory': False\}|shared_memory': False"):
        gym.make_vec("FWBench-Electricity-v0", num_envs=2, vectorization_mode="async", split="dev")
    with pytest.raises(ValueError, match="131,072 '0' characters"):
        gym.vector.AsyncVectorEnv([lambda: FWBenchEnv("electricity", split="dev")] * 2)
    venv = gym.make_vec("FWBench-Electricity-v0", num_envs=2, vectorization_mode="async", split="dev",
                        vector_kwargs={"shared_memory": False})
    try:
        obs, info = venv.reset(seed=0)
        single = FWBenchEnv("electricity", split="dev")
        o0, _ = single.reset(seed=0)
        assert obs["context"][0] == o0["context"] and len(obs["context"][0]) < 10_000
        obs, *_ = venv.step(['{"tool": "catalog", "args": {}}'] * 2)
        assert json.loads(obs["last_result"][0])["tool"] == "catalog"
    finally:
        venv.close()
    # the numeric RL ids have Box observations: the default shared memory is fine
    rl = gym.make_vec("FWBench-RL-Macro-v0", num_envs=2, vectorization_mode="async", split="dev")
    try:
        obs, info = rl.reset(seed=0)
        assert obs.shape == (2, rl.single_observation_space.shape[0]) and np.isfinite(obs).all() and obs.any()
    finally:
        rl.close()


def test_shipped_hyperparameters_train_ppo_on_the_rl_ids():
    """fwgym/hyperparams/ppo.yml is what rl_zoo3 reads (--conf-file): one entry per RL id, PPO arguments."""
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from torch import nn

    conf = yaml.safe_load((ROOT / "fwgym" / "hyperparams" / "ppo.yml").read_text())
    assert set(conf) == set(RL_ENV_IDS)
    for env_id, hp in conf.items():
        hp = dict(hp)
        n_envs, steps, policy = hp.pop("n_envs"), hp.pop("n_timesteps"), hp.pop("policy")
        assert steps >= 10_000 and hp["gamma"] == 1.0  # the dense reward sums to -S: undiscounted
        hp["policy_kwargs"] = eval(hp["policy_kwargs"], {"dict": dict, "nn": nn})  # as rl_zoo3 reads it
        hp.update(n_steps=16, batch_size=32, n_epochs=1)
        venv = make_vec_env(env_id, n_envs=n_envs, seed=0, env_kwargs={"split": "dev"})
        model = PPO(policy, venv, device="cpu", seed=0, **hp).learn(64)
        assert model.num_timesteps >= 64
        venv.close()


def _run(args, cwd, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


# three interpreters importing torch: 18 s on an idle 2-core machine (over a minute on a busy one)
def test_rl_zoo3_trains_enjoys_and_fwgym_evaluates(tmp_path):
    pytest.importorskip("rl_zoo3")
    common = ["--algo", "ppo", "--env", "FWBench-RL-Macro-v0", "--gym-packages", "fwgym", "--device", "cpu",
              "--env-kwargs", "split:'dev'"]
    _run(["-m", "rl_zoo3.train", *common, "--conf-file", str(ROOT / "fwgym" / "hyperparams" / "ppo.yml"),
          "-n", "128", "--hyperparams", "n_envs:1", "n_steps:64", "batch_size:64", "n_epochs:1",
          "--log-folder", "zoo", "--seed", "0", "--eval-freq", "-1"], tmp_path)
    model = tmp_path / "zoo" / "ppo" / "FWBench-RL-Macro-v0_1" / "FWBench-RL-Macro-v0.zip"
    assert model.is_file()
    out = _run(["-m", "rl_zoo3.enjoy", *common, "-f", "zoo", "--exp-id", "1", "-n", "5", "--no-render"], tmp_path)
    assert "Mean reward" in out or "Episode Reward" in out
    _run(["-c", "import sys; from fwgym.cli import main; sys.exit(main())", "evaluate", "--split", "dev", "--agent", "sb3",
          "--model-path", str(model), "--limit", "1", "--no-progress", "--out", str(tmp_path / "ev")], tmp_path)
    records = [json.loads(line) for p in (tmp_path / "ev").rglob("results.jsonl") for line in p.read_text().splitlines()]
    assert len(records) == 2 and all(r["split"] == "dev" and r["valid"] for r in records)


def test_package_docstring_lists_every_registered_id_once():
    import re

    registered = sorted(k for k in gym.registry if k.startswith("FWBench"))
    listed = re.findall(r"^\* ``(FWBench[^`]*)``", fwgym.__doc__, flags=re.M)
    assert len(registered) == 12 and sorted(listed) == registered  # 9 of the protocol, 3 of the opt-in pedestrian domain
