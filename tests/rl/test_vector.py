"""The native macro vector env (fwgym.rl.vector.MacroVectorEnv) equals N wrapped single envs in
gymnasium's SyncVectorEnv: observations, rewards, terminations, truncations, infos (keys, masks,
dtypes, values), action masks, seeding and autoreset, over >= 10,000 episodes; and every outcome it
returns was played through the real env."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import fwgym  # noqa: F401  (registers the ids)
from fwgym.rl.vector import MacroVectorEnv
from vector_checks import assert_same

ID = "FWBench-RL-Macro-v0"


def pair(n, mode, **kw):
    native = gym.make_vec(ID, num_envs=n, autoreset_mode=mode, **kw)
    sync = gym.make_vec(ID, num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, **kw)
    assert isinstance(native, MacroVectorEnv) and isinstance(sync, SyncVectorEnv)
    return native, sync


def play(native, sync, steps, seed, rng, reseed_every=None):
    """Step both with the same random actions (masked entries included: they abstain), comparing
    every output; returns the number of episodes ended."""
    out = [native.reset(seed=seed), sync.reset(seed=seed)]
    assert_same(out[0][0], out[1][0], "obs")
    assert_same(out[0][1], out[1][1])
    episodes = 0
    for t in range(steps):
        assert_same(native.action_masks(), np.stack(sync.call("action_masks")), "mask")
        if reseed_every and t and t % reseed_every == 0:
            s = None if t % (2 * reseed_every) else int(rng.integers(1 << 30))  # continue or reseed
            out = [native.reset(seed=s), sync.reset(seed=s)]
            for x, y, name in zip(out[0], out[1], ("obs", "info")):
                assert_same(x, y, name)
        actions = rng.integers(0, 12, native.num_envs)
        r1, r2 = native.step(actions), sync.step(actions)
        for x, y, name in zip(r1, r2, ("obs", "reward", "terminated", "truncated", "info")):
            assert_same(x, y, name)
        episodes += int(np.sum(r1[2] | r1[3]))
    return episodes


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_observations_are_the_callers_to_overwrite(mode):
    """The env keeps its own copy of the reset observations for the next step: a caller that writes over every
    array it is handed (normalising in place) changes none of the later outputs."""
    native, sync = pair(6, mode, split="dev")
    rng = np.random.default_rng(5)
    obs, _ = native.reset(seed=3)
    sync.reset(seed=3)
    for t in range(40):
        obs[:] = -7.0
        if mode == AutoresetMode.DISABLED and t % 2:
            mask = np.ones(6, dtype=bool)
            obs, _ = native.reset(options={"reset_mask": mask})
            ref, _ = sync.reset(options={"reset_mask": mask})
            assert_same(obs, ref, "obs")
            continue
        actions = rng.integers(0, 12, 6)
        r1, r2 = native.step(actions), sync.step(actions)
        for x, y, name in zip(r1, r2, ("obs", "reward", "terminated", "truncated", "info")):
            assert_same(x, y, name)
        obs = r1[0]
        if mode == AutoresetMode.SAME_STEP:
            for f in r1[4]["final_obs"]:
                f[:] = -7.0
    native.close(), sync.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_equal_to_sync_vector_env_over_thousands_of_episodes(mode):
    """Dev split (a pool small enough for many cache hits as well as first visits): >= 5,000
    episodes per autoreset mode, >= 10,000 in all, with reseeding and seed-less resets in between."""
    native, sync = pair(16, mode, split="dev")
    steps = 640 if mode == AutoresetMode.NEXT_STEP else 320  # next-step: every other step is a reset
    episodes = play(native, sync, steps, seed=11, rng=np.random.default_rng(int(mode == AutoresetMode.SAME_STEP)),
                    reseed_every=50)
    assert episodes >= 5_000
    assert 0 < native.recorded["steps"] <= episodes  # repeated (case, entry) pairs are cache hits
    native.close(), sync.close()


def test_equal_on_the_registered_defaults_and_with_compact_features():
    """The id's own settings (train split, all 403 features: the episode-fixed part stored per case;
    nearly every episode a first visit) and the compact features (whole observation per outcome)."""
    for kw, steps in (({}, 40), ({"features": "compact", "cycle_hire_stations": "busiest"}, 40)):
        native, sync = pair(4, AutoresetMode.NEXT_STEP, **kw)
        assert native.single_observation_space == sync.single_observation_space
        assert native.observation_space == sync.observation_space and native.action_space == sync.action_space
        play(native, sync, steps, seed=5, rng=np.random.default_rng(3))
        native.close(), sync.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_without_infos_everything_else_is_equal(mode):
    native = gym.make_vec(ID, num_envs=8, autoreset_mode=mode, infos=False, split="dev")
    sync = gym.make_vec(ID, num_envs=8, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, split="dev")
    o1, i1 = native.reset(seed=4)
    o2, _ = sync.reset(seed=4)
    assert_same(o1, o2) and i1 == {}
    rng = np.random.default_rng(9)
    for _ in range(40):
        assert_same(native.action_masks(), np.stack(sync.call("action_masks")))
        a = rng.integers(0, 12, 8)
        r1, r2 = native.step(a), sync.step(a)
        for x, y in zip(r1[:4], r2[:4]):
            assert_same(x, y)
        if mode == AutoresetMode.SAME_STEP:
            assert set(r1[4]) == {"final_obs", "_final_obs"}
            assert_same(r1[4]["final_obs"], r2[4]["final_obs"])
        else:
            assert r1[4] == {}
    with pytest.raises(ValueError, match="infos"):
        MacroVectorEnv(2, infos="no", split="dev")


def test_disabled_autoreset_reset_mask_and_case_id_option():
    native, sync = pair(4, AutoresetMode.DISABLED, split="dev")
    cid = native.cases[7].case_id
    for x, y in zip(native.reset(seed=2, options={"case_id": cid}), sync.reset(seed=2, options={"case_id": cid})):
        assert_same(x, y)
    assert set(native.reset(options={"case_id": cid})[1]["case_id"]) == {cid}
    a = np.array([0, 6, 8, 11])
    for x, y in zip(native.step(a), sync.step(a)):
        assert_same(x, y)
    with pytest.raises(AssertionError):
        sync.step(a)
    with pytest.raises(AssertionError):
        native.step(a)
    mask = np.array([True, False, True, False])
    for x, y in zip(native.reset(options={"reset_mask": mask}), sync.reset(options={"reset_mask": mask.copy()})):
        assert_same(x, y)
    for x, y in zip(native.reset(seed=[3, None, 4, None]), sync.reset(seed=[3, None, 4, None])):
        assert_same(x, y)
    for x, y in zip(native.step(a), sync.step(a)):
        assert_same(x, y)
    test_case = gym.make(ID, split="test").unwrapped.cases[0].case_id
    for venv in (native, sync):  # a case of another split is refused, as by the single env
        with pytest.raises(ValueError, match="'test' split"):
            venv.reset(options={"case_id": test_case})
    native.close(), sync.close()


def test_seeding_reproducible_and_distinct():
    a, b = (gym.make_vec(ID, num_envs=5, split="dev") for _ in range(2))
    ids = []
    for venv, seed in ((a, 0), (b, 0), (b, 1)):
        _, info = venv.reset(seed=seed)
        stream = [tuple(info["case_id"])]
        for _ in range(6):
            venv.step(np.zeros(5, dtype=np.int64))
            stream.append(tuple(venv.step(np.zeros(5, dtype=np.int64))[4]["case_id"]))  # next-step: the reset info
        ids.append(stream)
    assert ids[0] == ids[1] and ids[0] != ids[2]
    assert len(set(ids[0][0])) == 5  # sub-env i is seeded seed + i
    # the sub-env draws are the single env's: env i of the vector env plays the cases of a single env seeded i
    single = gym.make(ID, split="dev")
    first = [single.reset(seed=i)[1]["case_id"] for i in range(5)]
    assert list(ids[0][0]) == first


def test_outcomes_are_recorded_from_the_real_env_once():
    venv = MacroVectorEnv(num_envs=3, split="dev")
    calls = []
    step = venv._oracle.step

    def counting(action):
        calls.append(action)
        return step(action)

    venv._oracle.step = counting
    venv.reset(seed=0, options={"case_id": venv.cases[0].case_id})
    for _ in range(4):  # the same case and entry in all envs, again after each next-step reset
        obs, r, term, trunc, info = venv.step(np.array([6, 6, 6]))
        if term.all():
            venv.reset(options={"case_id": venv.cases[0].case_id})
    assert calls == [6] and venv.recorded == {"cases": 1, "steps": 1}
    single = gym.make(ID, split="dev")
    single.reset(options={"case_id": venv.cases[0].case_id})
    _, r1, *_, i1 = single.step(6)
    assert r[0] == r1 and info["S"][0] == i1["S"] and info["loss"][0] == i1["loss"]  # bit for bit
    assert venv.precompute(case_ids=[venv.cases[1].case_id], entries=[0, 1]) == {"cases": 2, "steps": 3}
    with pytest.raises(ValueError, match="entries"):
        venv.precompute(entries=[12])


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="macro variant"):
        MacroVectorEnv(2, variant="sequential", split="dev")
    with pytest.raises(ValueError, match="num_envs"):
        MacroVectorEnv(0, split="dev")
    with pytest.raises(ValueError, match="autoreset_mode"):
        MacroVectorEnv(2, autoreset_mode="sometimes", split="dev")
    venv = MacroVectorEnv(2, autoreset_mode="same_step", split="dev")
    assert venv.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(2, dtype=np.int64))
    venv.reset(seed=0)
    for bad in (np.zeros(3, dtype=np.int64), np.zeros(2), np.array([0, 12]), np.array([-1, 0])):
        with pytest.raises(ValueError):
            venv.step(bad)
    with pytest.raises(ValueError, match="reset options"):
        venv.reset(options={"case": "x"})
    with pytest.raises(AttributeError):
        venv.call("tracker")
    assert len(venv.call("action_masks")) == 2


def test_make_vec_modes():
    assert isinstance(gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", split="dev"), MacroVectorEnv)
    seq = gym.make_vec("FWBench-RL-Sequential-v0", num_envs=2, split="dev")  # no native env: SyncVectorEnv
    assert isinstance(seq, SyncVectorEnv) and seq.single_action_space.n == 28
    seq.close()
