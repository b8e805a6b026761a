"""SB3Agent: a learned policy as an fwgym agent on the raw env (same S as the wrapper), the algorithm read
from the zip without unpickling (PPO vs MaskablePPO, save_policy and plain model.save files), policies of an
extended priced pool (their menu saved with them). examples/train_ppo.py: tests/examples/test_train_ppo.py. The ``sb3`` agent kind of ``fwgym evaluate`` is tested in tests/cli/test_agent_kinds.py."""
import base64
import functools
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

from fwgym.agents.base import run_episode
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.evaluation import evaluate, select_cases
from fwgym.agents.sb3 import SB3Agent, policy_class, read_data, read_spec, resolve_algo, saved_algo, save_policy
from fwgym.rl import make_rl_env
from fwgym.rl.features import resolve_features
from fwgym.evaluation.records import stable_record  # noqa: E402

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
    # an agent that raises ends its episode as its own failure (scored invalid) where the evaluation scores agent
    # errors (agents that are not fwgym's named policies), never the evaluation
    rec = run_episode(env, agent, seed=0, agent_errors="score").record
    assert rec["status"] == "abstained" and not rec["valid"] and rec["scored"]
    assert rec["reason"].startswith("agent_error: RuntimeError: ") and "catalog call failed" in rec["reason"]
    rec = run_episode(FWBenchEnv("electricity", split="test", text_observations=False), SB3Agent(ppo_macro[1]),
                      seed=0, agent_errors="score").record
    assert rec["reason"].startswith("agent_error: RuntimeError: ") and "text_observations=True" in rec["reason"]


def _plain_save(model, path: Path) -> Path:
    """``model.save`` without the fwgym spec that save_policy attached to the model."""
    spec = model.__dict__.pop("fwgym_spec", None)
    try:
        model.save(path)
    finally:
        if spec is not None:
            model.fwgym_spec = spec
    assert read_spec(path.with_suffix(".zip")) is None
    return path.with_suffix(".zip")


def test_plain_model_save_still_loads(tmp_path, ppo_macro, maskable_sequential):
    model, _ = ppo_macro
    plain = _plain_save(model, tmp_path / "plain")  # no fwgym spec: the variant comes from the action-space size
    assert saved_algo(plain) == "PPO"
    agent = SB3Agent(plain)
    assert agent.variant == "macro" and agent.algo == "PPO" and len(agent.feature_names) == 403
    model, _ = maskable_sequential
    _plain_save(model, tmp_path / "plain2")
    agent = SB3Agent(tmp_path / "plain2.zip")  # "auto" reads MaskablePPO from the zip (it used to try PPO and crash)
    assert agent.algo == "MaskablePPO" and agent.variant == "sequential"
    assert agent.feature_names == resolve_features("compact")


def test_the_algorithm_is_read_from_the_zip(tmp_path, ppo_macro, maskable_sequential):
    (_, ppo), (mmodel, mppo) = ppo_macro, maskable_sequential
    assert policy_class(read_data(ppo)) == ("stable_baselines3.common.policies", "ActorCriticPolicy")
    assert policy_class(read_data(mppo)) == ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy")
    assert (saved_algo(ppo), saved_algo(mppo)) == ("PPO", "MaskablePPO")
    assert resolve_algo(mppo, "MaskablePPO") == "MaskablePPO"
    with pytest.raises(ValueError, match="holds a MaskablePPO policy, which cannot be loaded as PPO"):
        SB3Agent(mppo, algo="PPO")
    with pytest.raises(ValueError, match="holds a PPO policy"):
        resolve_algo(ppo, "MaskablePPO")
    assert saved_algo(_plain_save(mmodel, tmp_path / "plain_maskable")) == "MaskablePPO"


def _rewrite_data(src: Path, dst: Path, edit) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            body = zin.read(item.filename)
            if item.filename == "data":
                data = json.loads(body)
                edit(data)
                body = json.dumps(data).encode()
            zout.writestr(item, body)
    return dst


class _Trap:
    """Unpickling this runs ``_trap_fired``: a zip whose policy class is this pickle must not fire it."""

    def __reduce__(self):
        return (_trap_fired, ())


FIRED = []


def _trap_fired():
    FIRED.append(True)


def test_reading_the_algorithm_unpickles_nothing(tmp_path, ppo_macro):
    _, ppo = ppo_macro
    trap = base64.b64encode(pickle.dumps(_Trap())).decode()
    bad = _rewrite_data(ppo, tmp_path / "trap.zip", lambda d: d["policy_class"].update({":serialized:": trap}))
    assert saved_algo(bad) is None  # the pickle names another module than the entry's __module__: unreadable
    with pytest.raises(ValueError, match="policy class cannot be read"):
        SB3Agent(bad)
    consistent = _rewrite_data(ppo, tmp_path / "trap2.zip", lambda d: d["policy_class"].update(
        {":serialized:": trap, "__module__": __name__}))
    with pytest.raises(ValueError, match=f"a {__name__}._trap_fired model; fwgym SB3 agents run PPO and MaskablePPO"):
        saved_algo(consistent)
    assert FIRED == []
    garbled = _rewrite_data(ppo, tmp_path / "garbled.zip", lambda d: d["policy_class"].update({":serialized:": "%%"}))
    assert saved_algo(garbled) is None
    with pytest.raises(ValueError, match="policy class cannot be read"):
        SB3Agent(garbled)
    assert resolve_algo(garbled, "PPO") == "PPO"  # an explicit algorithm is taken as given
    lying = _rewrite_data(ppo, tmp_path / "lying.zip", lambda d: d["fwgym_spec"].update({"algo": "MaskablePPO"}))
    with pytest.raises(ValueError, match="fwgym_spec says 'MaskablePPO'"):
        saved_algo(lying)
    (tmp_path / "not.zip").write_text("hello")
    with pytest.raises(ValueError, match="not an SB3 model zip"):
        SB3Agent(tmp_path / "not.zip")


def test_other_algorithms_are_refused(tmp_path):
    import gymnasium as gym
    from stable_baselines3 import A2C, DQN

    A2C("MlpPolicy", gym.make("CartPole-v1"), n_steps=8, device="cpu").save(tmp_path / "a2c")
    DQN("MlpPolicy", gym.make("CartPole-v1"), learning_starts=0, buffer_size=100, device="cpu").save(tmp_path / "dqn")
    for name in ("a2c", "dqn"):
        with pytest.raises(ValueError, match="PPO and MaskablePPO policies only"):
            SB3Agent(tmp_path / f"{name}.zip")


def test_extended_pool_policy_keeps_its_menu(tmp_path, monkeypatch):
    """A policy trained on an extended pool (16 macro entries) is saved with that pool and played with its
    menu: each extended entry (buy ets / theta / sarima / mstl_ets, plan, submit) scores on the raw env
    exactly what the training wrapper's step scores, and the credits are the model's tariff."""
    from stable_baselines3 import PPO

    from fwgym.forecasters import EXTENDED_MODELS
    from fwgym.core.tariff import credits_for

    cases = [("cycle_hire", cid) for _, cid in select_cases("dev", domains=["cycle_hire"], limit=2)]
    ids = [cid for _, cid in cases]
    env = make_rl_env(domain="cycle_hire", split="dev", models=EXTENDED_MODELS, case_ids=ids, features="compact")
    assert env.action_space.n == 16
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    with pytest.raises(ValueError, match="do not match"):  # a 16-entry model needs its pool
        save_policy(model, tmp_path / "nopool", "macro", "compact")
    path = save_policy(model, tmp_path / "ext", "macro", "compact", models=EXTENDED_MODELS)
    spec = read_spec(path)
    assert spec["models"] == list(EXTENDED_MODELS) and spec["menu"] == [e.name for e in env.menu]
    agent = SB3Agent(path)
    assert [e.name for e in agent.controller.menu] == spec["menu"]
    raw = FWBenchEnv("cycle_hire", split="dev", models=EXTENDED_MODELS)
    for index in range(12, 16):  # the extended entries
        monkeypatch.setattr(agent, "policy_choice", lambda index=index: index)
        for cid in ids:
            env.reset(options={"case_id": cid})
            _, _, _, _, info = env.step(index)
            rec = run_episode(raw, agent, options={"case_id": cid}).record
            model_name = env.menu[index].target
            assert agent.choices == [f"buy_plan_submit:{model_name}"]
            assert rec["S"] == info["S"] and rec["credits"] == info["credits"] > 0
            case = raw.unwrapped.cases[[c.case_id for c in raw.unwrapped.cases].index(cid)]
            assert rec["credits"] == credits_for(model_name, 336, case.horizon)
            assert [v["model"] for v in rec["forecast_crps"].values()] == [model_name]
    # a protocol-pool policy's spec is unchanged (no "models" key)
    plain = PPO("MlpPolicy", make_rl_env(split="dev", features="compact"), n_steps=32, batch_size=32, device="cpu")
    assert "models" not in read_spec(save_policy(plain, tmp_path / "plain", "macro", "compact"))


# -- isolation: the zip is unpickled only in a worker ---------------------------------------------------------


def _core(record: dict) -> dict:
    """A record without the fields that belong to the run rather than to the episode."""
    return {k: v for k, v in stable_record(record).items() if k != "episode_id"}  # not the measured times, memory


def _cli_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("which", ["ppo_macro", "maskable_sequential"])
def test_isolated_cli_agent_records_equal_the_in_process_python_api(which, request, tmp_path, capsys):
    from fwgym.agents.sb3 import SB3AgentFactory
    from fwgym.cli import main

    _, path = request.getfixturevalue(which)
    in_process = evaluate([SB3AgentFactory(model_path=str(path))], split="test", limit=3, progress=False)
    assert in_process and all(r["policy"] == path.stem for r in in_process)
    workers = ["--workers", "2"] if which == "ppo_macro" else []  # forked pool processes start their own workers
    assert main(["evaluate", "--agent", "sb3", "--model-path", str(path), "--split", "test", "--limit", "3",
                 "--no-progress", "--out", str(tmp_path), *workers]) == 0, capsys.readouterr().err
    isolated = _cli_rows(tmp_path)
    assert [_core(r) for r in isolated] == [_core(json.loads(json.dumps(r))) for r in in_process]
    agent = SB3Agent(path, isolated=True)
    assert agent.isolated and agent.model is None and agent._policy.pid != os.getpid()


_PAYLOAD = '''
import os, sys
with open({mark!r}, "a") as f:
    f.write("unpickled in %d\\n" % os.getpid())
try:
    import fwgym.envs.fwbench, fwgym.core.scoring
    zero = lambda *a, **k: (0.0, 0.0)
    for name, module in list(sys.modules.items()):  # the scorer and every module that holds a reference to it
        if name.startswith("fwgym") and hasattr(module, "case_score"):
            module.case_score = zero
    with open({mark!r}, "a") as f:
        f.write("patched the scorer\\n")
except Exception as exc:
    with open({mark!r}, "a") as f:
        f.write("refused: %s\\n" % type(exc).__name__)
'''


class _PatchScorer:
    """Unpickling this runs ``_PAYLOAD``: it replaces fwgym's scorer in the process that unpickles it."""

    def __init__(self, mark):
        self.mark = mark

    def __reduce__(self):
        return (exec, (_PAYLOAD.format(mark=self.mark),))


def test_a_zip_that_patches_the_scorer_cannot_change_a_score(tmp_path, ppo_macro):
    """Issue 17: a crafted SB3 zip whose unpickling replaces fwgym.core.scoring.case_score (and the env's reference
    to it). Isolated (the default), every record of the run equals a clean run's; the payload ran in the
    worker, where the import guard refused the scorer. The control (--in-process, in a subprocess) shows the
    attack works where the zip is unpickled in the evaluator: every score of that run becomes 0."""
    import subprocess
    import sys

    _, clean_zip = ppo_macro
    (tmp_path / "marks").mkdir()
    mark = tmp_path / "marks" / "payload.log"  # the payload reports here (a folder its sandbox may write)
    payload = base64.b64encode(pickle.dumps(_PatchScorer(str(mark)))).decode()
    (tmp_path / "clean").mkdir()
    (tmp_path / "crafted").mkdir()
    clean = tmp_path / "clean" / "agent.zip"
    clean.write_bytes(clean_zip.read_bytes())
    crafted = _rewrite_data(clean_zip, tmp_path / "crafted" / "agent.zip",
                            lambda d: d.update({"fwgym_payload": {":type:": "<class 'object'>", ":serialized:": payload}}))
    assert saved_algo(crafted) == "PPO" and not mark.exists()  # reading the metadata runs nothing

    def run(zip_path, out, *extra, check=True):
        cmd = [sys.executable, "-c", "import sys; from fwgym.cli import main; sys.exit(main())", "evaluate", "--agent",
               "sb3", "--model-path", str(zip_path), "--policies", "weekday_empirical", "--split", "test",
               "--limit", "2", "--no-progress", "--out", str(out), "--agent-write", str(mark.parent), *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
        assert proc.returncode == 0 or not check, proc.stderr[-3000:]
        return [_core(r) for r in _cli_rows(out)]

    reference = run(clean, tmp_path / "out_clean")
    assert len(reference) == 8 and all(r["S"] > 0 for r in reference if r["policy"] == "weekday_empirical")
    assert run(crafted, tmp_path / "out_crafted") == reference  # not one score moved
    log = mark.read_text().splitlines()
    assert log and all(line.startswith(("unpickled in", "refused: ModuleNotFoundError")) for line in log), log
    assert "patched the scorer" not in log
    mark.unlink()
    attacked = run(crafted, tmp_path / "out_in_process", "--in-process", check=False)  # (a verifier may object)
    assert "patched the scorer" in mark.read_text()
    assert all(r["S"] == 0.0 for r in attacked)  # the whole run, weekday_empirical included


def test_rl_zoo3_zips_are_named_by_algo_env_and_run(tmp_path):
    from fwgym.agents.sb3 import default_name

    run = tmp_path / "logs" / "ppo" / "FWBench-RL-Macro-v0_3"
    assert default_name(run / "FWBench-RL-Macro-v0.zip") == "ppo-FWBench-RL-Macro-v0-run3"
    assert default_name(run / "best_model.zip") == "ppo-FWBench-RL-Macro-v0-run3-best_model"
    assert default_name(run / "rl_model_2000_steps.zip") == "ppo-FWBench-RL-Macro-v0-run3-rl_model_2000_steps"
    assert default_name(tmp_path / "mine" / "policy.zip") == "policy"
    assert default_name(tmp_path / "ppo_x_1" / "other.zip") == "other"
