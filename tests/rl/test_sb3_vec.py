"""Vector envs over the RL wrappers: Sync/Async (shared_memory=False), make_vec, SB3 SubprocVecEnv;
per-env seeding gives distinct and reproducible case streams."""
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

from fwgym.rl import MacroActionWrapper, make_rl_env

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


# -- SB3VecEnv: a gymnasium vector env (the native macro env) as a stable-baselines3 VecEnv ---------

ID = "FWBench-RL-Macro-v0"


def _sb3_pair(n=4):
    from stable_baselines3.common.vec_env import DummyVecEnv

    from fwgym.rl.sb3_vec import SB3VecEnv

    native = SB3VecEnv(gym.make_vec(ID, num_envs=n, autoreset_mode=SAME_STEP, split="dev"), info_keys=("S", "case_id"))
    dummy = DummyVecEnv([partial(gym.make, ID, split="dev") for _ in range(n)])
    return native, dummy


def test_sb3_vec_env_equals_dummy_vec_env():
    pytest.importorskip("stable_baselines3")
    from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported

    native, dummy = _sb3_pair()
    assert native.observation_space == dummy.observation_space and native.action_space == dummy.action_space
    assert is_masking_supported(native)
    native.seed(7), dummy.seed(7)
    o1, o2 = native.reset(), dummy.reset()
    assert np.array_equal(o1, o2) and o1.dtype == o2.dtype
    rng = np.random.default_rng(0)
    for _ in range(150):
        m1, m2 = get_action_masks(native), get_action_masks(dummy)
        assert np.array_equal(m1, m2)
        a = rng.integers(0, 12, 4)
        (o1, r1, d1, i1), (o2, r2, d2, i2) = native.step(a), dummy.step(a)
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and r1.dtype == r2.dtype == np.float32
        assert np.array_equal(d1, d2) and d1.all()  # every macro step ends its episode
        for x, y in zip(i1, i2):
            assert np.array_equal(x["terminal_observation"], y["terminal_observation"])
            assert x["TimeLimit.truncated"] == y["TimeLimit.truncated"]
            assert x["S"] == y["S"] and x["case_id"] == y["case_id"]
    native.close(), dummy.close()


def test_ppo_learns_the_same_through_the_adapter_as_on_dummy_vec_env():
    """Same seeds, same data: PPO's parameters after training are identical bit for bit."""
    pytest.importorskip("stable_baselines3")
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    native, dummy = _sb3_pair()
    params = []
    for venv in (VecMonitor(native), VecMonitor(dummy)):
        torch.set_num_threads(1)
        model = PPO("MlpPolicy", venv, n_steps=32, batch_size=64, n_epochs=2, seed=0, device="cpu")
        model.learn(256)
        assert len(model.ep_info_buffer) > 0  # VecMonitor's episode statistics reach SB3's logger
        params.append({k: v.clone() for k, v in model.policy.state_dict().items()})
        venv.close()
    assert params[0].keys() == params[1].keys()
    assert all(torch.equal(params[0][k], params[1][k]) for k in params[0])


def test_maskable_ppo_through_the_adapter_and_mode_check():
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO

    from fwgym.rl.sb3_vec import SB3VecEnv

    with pytest.raises(ValueError, match="same-step"):
        SB3VecEnv(gym.make_vec(ID, num_envs=2, split="dev"))  # next-step autoreset (gymnasium's default)
    with pytest.raises(TypeError):
        SB3VecEnv(make_rl_env(split="dev"))
    venv = SB3VecEnv(gym.make_vec(ID, num_envs=4, autoreset_mode=SAME_STEP, split="dev"))
    model = MaskablePPO("MlpPolicy", venv, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu").learn(64)
    assert model.num_timesteps >= 64
    venv.close()
