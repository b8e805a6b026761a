"""Agent kinds of ``fwgym evaluate --agent`` (fwgym.cli.agent_kinds): the shipped kinds (openai, transformers,
sb3), their factories, and kinds added by other packages through entry points."""
import argparse
import importlib.util
import hashlib
import json
import pickle
import types
from importlib.metadata import EntryPoint

import pytest

from fwgym.cli import agent_kinds as registry
from fwgym.cli import main
from fwgym.cli.agent_kinds import agent_kinds, openai, python, sb3, transformers


def test_shipped_kinds_define_the_interface():
    kinds = agent_kinds()
    assert kinds["openai"] is openai and kinds["transformers"] is transformers and kinds["sb3"] is sb3
    assert kinds["python"] is python
    for mod in kinds.values():
        assert all(hasattr(mod, a) for a in registry.INTERFACE) and mod.HELP


def test_openai_kind_builds_a_picklable_json_factory(tmp_path):
    from fwgym.agents.factory import LLMAgentFactory
    from fwgym.agents.openai import OpenAIChatAgent

    p = argparse.ArgumentParser()
    g = p.add_argument_group("x")
    openai.add_arguments(g)
    openai.add_common_arguments(g)  # idempotent
    args = p.parse_args(["--trace-out", str(tmp_path / "t.jsonl")])
    with pytest.raises(ValueError, match="--model"):
        openai.build(args)
    args = p.parse_args(["--model", "m", "--extra-body", "[1]", "--trace-out", str(tmp_path / "t.jsonl")])
    with pytest.raises(ValueError, match="extra-body"):
        openai.build(args)
    args = p.parse_args(["--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--agent-name", "mine",
                         "--trace-out", str(tmp_path / "t.jsonl")])
    factory = openai.build(args)
    assert isinstance(factory, LLMAgentFactory) and json.loads(json.dumps(factory))["model"] == "m"
    agent = pickle.loads(pickle.dumps(factory))()
    assert isinstance(agent, OpenAIChatAgent) and agent.name == "mine" and agent.trace_out == str(tmp_path / "t.jsonl")
    assert not (tmp_path / "t.jsonl").exists() and tmp_path.is_dir()  # traces are appended: nothing is truncated
    with pytest.raises(ValueError, match="unknown LLM agent kind"):
        LLMAgentFactory(kind="nope")()


def test_transformers_kind_builds_a_factory(tmp_path):
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)  # fwgym evaluate's own option
    openai.add_arguments(p.add_argument_group("openai"))
    transformers.add_arguments(p.add_argument_group("transformers"))  # shared options are not added twice
    with pytest.raises(ValueError, match="--hf-model"):
        transformers.build(p.parse_args(["--trace-out", str(tmp_path / "t.jsonl")]))
    f = transformers.build(p.parse_args(["--model", "/some/dir", "--max-tokens", "64", "--llm-seed", "5",
                                         "--hf-device", "cpu", "--trace-out", str(tmp_path / "t.jsonl")]))
    assert f["kind"] == "transformers" and f["model_path"] == "/some/dir" and f["max_new_tokens"] == 64 and f["seed"] == 5
    f2 = transformers.build(p.parse_args(["--hf-model", "/d", "--gguf-file", "m.gguf", "--out", str(tmp_path / "o")]))
    assert f2["gguf_file"] == "m.gguf" and f2["trace_out"] == str(tmp_path / "o" / "traces.jsonl")
    if importlib.util.find_spec("llguidance") is not None:  # --constrain: the constrain extra's llguidance
        f3 = transformers.build(p.parse_args(["--hf-model", "/d", "--constrain", "grammar", "--out", str(tmp_path / "o")]))
        assert f3["options"]["constrain"] == "grammar" and f3().name == "transformers:/d+grammar"


@pytest.fixture(scope="module")
def sb3_zips(tmp_path_factory):
    """An untrained PPO (macro menu) and MaskablePPO (sequential menu) saved by save_policy and by model.save."""
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    from fwgym.agents.sb3 import save_policy
    from fwgym.rl import make_rl_env

    root = tmp_path_factory.mktemp("sb3")
    ppo = PPO("MlpPolicy", make_rl_env(split="dev", variant="macro"), n_steps=64, batch_size=32, seed=0, device="cpu")
    mppo = MaskablePPO("MlpPolicy", make_rl_env(split="dev", variant="sequential"), n_steps=64, batch_size=32, seed=0,
                       device="cpu")
    mppo.save(root / "plain_maskable")
    return {"ppo": save_policy(ppo, root / "ppo_macro", "macro"), "maskable": save_policy(mppo, root / "mppo", "sequential"),
            "plain_maskable": root / "plain_maskable.zip"}


def test_sb3_kind_reads_the_algorithm_from_the_zip(sb3_zips, tmp_path):
    from fwgym.agents.sb3 import SB3Agent, SB3AgentFactory

    parser = argparse.ArgumentParser()
    sb3.add_arguments(parser.add_argument_group("sb3"))
    for key, algo in (("ppo", "PPO"), ("maskable", "MaskablePPO"), ("plain_maskable", "MaskablePPO")):
        factory = sb3.build(parser.parse_args(["--model-path", str(sb3_zips[key])]))
        assert isinstance(factory, SB3AgentFactory) and factory["algo"] == algo and factory.isolated  # isolated by default
        assert json.loads(json.dumps(factory))["model_path"] == str(sb3_zips[key].resolve())
        assert factory["source"] == {"file": str(sb3_zips[key].resolve()),
                                     "sha256": hashlib.sha256(sb3_zips[key].read_bytes()).hexdigest()}
        agent = pickle.loads(pickle.dumps(factory))()
        assert isinstance(agent, SB3Agent) and agent.algo == algo and agent.isolated and agent.model is None
    assert sb3.build(parser.parse_args(["--model-path", str(sb3_zips["ppo"]), "--algo", "PPO"]))["algo"] == "PPO"
    trusted = sb3.build(parser.parse_args(["--model-path", str(sb3_zips["ppo"]), "--in-process"]))
    assert not trusted.isolated and trusted().model is not None
    with pytest.raises(ValueError, match="holds a MaskablePPO policy"):
        sb3.build(parser.parse_args(["--model-path", str(sb3_zips["plain_maskable"]), "--algo", "PPO"]))
    with pytest.raises(ValueError, match="--model-path"):
        sb3.build(parser.parse_args([]))
    with pytest.raises(FileNotFoundError):
        sb3.build(parser.parse_args(["--model-path", str(tmp_path / "nope.zip")]))


def test_evaluate_with_an_sb3_agent(sb3_zips, tmp_path, capsys):
    rc = main(["evaluate", "--split", "test", "--limit", "1", "--no-progress", "--agent", "sb3", "--model-path",
               str(sb3_zips["plain_maskable"]), "--policies", "weekday_empirical", "--out", str(tmp_path / "out")])
    assert rc == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "plain_maskable" in out and "weekday_empirical" in out
    rows = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert {r["policy"] for r in rows} == {"plain_maskable", "weekday_empirical"} and len(rows) == 4


def _fake_kind(name):
    mod = types.ModuleType(name)
    mod.KIND, mod.HELP = name, f"the {name} kind"
    mod.add_arguments = lambda group: group.add_argument(f"--{name}-option", default=None)
    mod.build = lambda args: (lambda: None)
    return mod


def test_other_packages_add_kinds_through_entry_points(monkeypatch):
    mods = {"mykind": _fake_kind("mykind"), "openai": _fake_kind("openai"), "broken": types.ModuleType("broken")}
    eps = [EntryPoint(name=n, value=f"fake_{n}", group=registry.ENTRY_POINT_GROUP) for n in mods]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(EntryPoint, "load", lambda self: mods[self.name])
    with pytest.warns(UserWarning, match="'broken' .* skipped: it does not define"):
        kinds = agent_kinds()
    assert kinds["mykind"] is mods["mykind"] and kinds["openai"] is openai  # a shipped kind wins over a plug-in
    assert "broken" not in kinds
    with pytest.warns(UserWarning):
        from fwgym.cli import build_parser

        args = build_parser().parse_args(["evaluate", "--agent", "mykind", "--mykind-option", "x"])
    assert args.agent == "mykind" and args.mykind_option == "x"


def test_resume_refuses_a_replaced_sb3_model_file(sb3_zips, tmp_path, capsys):
    import shutil

    model = tmp_path / "model.zip"
    shutil.copyfile(sb3_zips["plain_maskable"], model)
    out, old = tmp_path / "out", hashlib.sha256(model.read_bytes()).hexdigest()
    assert main(["evaluate", "--split", "test", "--domain", "cycle_hire", "--limit", "1", "--no-progress", "--agent",
                 "sb3", "--model-path", str(model), "--out", str(out)]) == 0
    shutil.copyfile(sb3_zips["maskable"], model)  # another MaskablePPO policy under the same path
    new = hashlib.sha256(model.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(["evaluate", "--resume", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err.endswith(
        f"fwgym: error: --resume {out}: the agent's file {model} changed since the run started (sha256 {old[:12]} -> "
        f"{new[:12]}); its episodes so far were played by the other version, so the row would mix two versions of "
        "the agent (restore the file, or start a new run)\n")
