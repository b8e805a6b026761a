"""Vector envs over the RL wrappers: Sync/Async (shared_memory=False), make_vec, SB3 SubprocVecEnv;
per-env seeding gives distinct and reproducible case streams."""
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from fwgym.wrappers import MacroActionWrapper, make_rl_env

N_ENVS = 3
STEPS = 6
make = partial(make_rl_env, domain="all", split="test", variant="macro", reward="dense")


SAME_STEP = gym.vector.AutoresetMode.SAME_STEP


def case_streams(venv, seed, steps=STEPS):
    """Case ids each sub-env plays over ``steps`` single-step episodes (fixed actions), with
    same-step autoreset (each env continues its own seeded generator)."""
    obs, info = venv.reset(seed=seed)
    streams = [[c] for c in info["case_id"]]
    rewards = []
    for t in range(steps):
        obs, r, term, trunc, info = venv.step(np.full(venv.num_envs, t % 8))
        rewards.append(np.asarray(r).copy())
        assert np.all(term)  # every macro step ends the episode
        np.testing.assert_allclose(r, -info["final_info"]["S"], atol=1e-12)
        for i, c in enumerate(info["case_id"]):  # the reset info of the next episode
            streams[i].append(c)
    return streams, np.array(rewards)


def test_sync_vector_streams_are_distinct_and_reproducible():
    a = gym.vector.SyncVectorEnv([make for _ in range(N_ENVS)], autoreset_mode=SAME_STEP)
    b = gym.vector.SyncVectorEnv([make for _ in range(N_ENVS)], autoreset_mode=SAME_STEP)
    sa, ra = case_streams(a, seed=7)
    sb, rb = case_streams(b, seed=7)
    assert sa == sb and np.array_equal(ra, rb)
    assert len({tuple(s) for s in sa}) == N_ENVS  # each env has its own stream
    assert len({s[0] for s in sa}) == N_ENVS
    sc, _ = case_streams(b, seed=8)
    assert sc != sa
    assert a.single_observation_space.shape == (403,) and a.observation_space.shape == (N_ENVS, 403)
    a.close(), b.close()


def test_async_vector_env_without_shared_memory_matches_sync():
    sync = gym.vector.SyncVectorEnv([make for _ in range(2)], autoreset_mode=SAME_STEP)
    asyn = gym.vector.AsyncVectorEnv([make for _ in range(2)], shared_memory=False, autoreset_mode=SAME_STEP)
    try:
        s1, r1 = case_streams(sync, seed=3, steps=3)
        s2, r2 = case_streams(asyn, seed=3, steps=3)
        assert s1 == s2 and np.array_equal(r1, r2)
        masks = asyn.call("action_masks")
        assert len(masks) == 2 and all(m.shape == (12,) for m in masks)
    finally:
        sync.close(), asyn.close()


def test_make_vec_with_the_wrapper_and_autoreset():
    venv = gym.make_vec("FWBench-v0", num_envs=2, vectorization_mode="sync", split="test", reward="dense",
                        wrappers=[partial(MacroActionWrapper, variant="sequential")])
    try:
        obs, info = venv.reset(seed=0)
        assert obs.shape == (2, 403) and venv.single_action_space.n == 28
        assert info["action_mask"].shape == (2, 28)
        for _ in range(4):  # autoreset (next step) keeps going
            obs, r, term, trunc, info = venv.step(np.zeros(2, dtype=np.int64))
            assert obs.shape == (2, 403)
    finally:
        venv.close()


def test_make_vec_async_mode():
    venv = gym.make_vec("FWBench-CycleHire-v0", num_envs=2, vectorization_mode="async", split="test",
                        vector_kwargs={"shared_memory": False}, wrappers=[MacroActionWrapper])
    try:
        obs, info = venv.reset(seed=1)
        obs, r, term, trunc, info = venv.step(np.array([0, 6]))
        assert np.all(term) and np.all(r < 0) and list(info["macro"]) == ["plan_submit:weekday_empirical",
                                                                          "plan_submit:hour_of_day_empirical"]
    finally:
        venv.close()


@pytest.mark.parametrize("vec", ["dummy", "subproc"])
def test_sb3_vec_envs_seeded_streams_and_masks(vec):
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    def run(seed):
        venv = make_vec_env(make_rl_env, n_envs=2, seed=seed, vec_env_cls=SubprocVecEnv if vec == "subproc" else DummyVecEnv,
                            env_kwargs={"domain": "all", "split": "test"})
        try:
            venv.reset()
            masks = get_action_masks(venv)
            assert masks.shape == (2, 12) and masks[:, :8].all()
            ids = []
            for t in range(4):
                obs, r, done, infos = venv.step(np.array([t % 8, (t + 3) % 8]))
                assert done.all() and obs.shape == (2, 403)
                ids.append(tuple(i["case_id"] for i in infos))
                assert all(np.isclose(i["episode"]["r"], -i["S"], atol=1e-5) for i in infos)  # Monitor: sum = -S
            return ids
        finally:
            venv.close()

    first = run(0)
    assert first == run(0)
    assert first != run(1)
    assert len({c for pair in first for c in pair}) > 4
