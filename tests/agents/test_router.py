"""The learned router (fwgym.rl.router, fwgym.agents.router): an agent playing the raw env computes the same inputs
as training reads from an outcome table, case by case; the router file is data (refused when malformed or made for
other inputs); ``fwgym evaluate --agent router`` plays it; the shipped model reproduces its dev figure."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fwgym.agents import run_episode
from fwgym.agents.router import RouterAgent, RouterAgentFactory
from fwgym.cli import main
from fwgym.envs.fwbench import FWBenchEnv
from fwgym.rl.outcomes import build_table, open_table
from fwgym.rl.router import RouterModel, input_names, router_inputs, table_inputs

SHIPPED = Path(__file__).resolve().parents[2] / "examples" / "models" / "router.json"


def random_model(seed: int = 0, hidden: int = 16) -> RouterModel:
    rng = np.random.default_rng(seed)
    d = len(input_names())
    layers = [(rng.normal(size=(d, hidden)), rng.normal(size=hidden)), (rng.normal(size=(hidden, 8)), rng.normal(size=8))]
    return RouterModel(layers, rng.normal(size=d), rng.uniform(0.5, 2.0, size=d), info={"note": "random"})


@pytest.fixture(scope="module")
def dev_table(tmp_path_factory):
    path = tmp_path_factory.mktemp("router") / "dev"
    build_table("dev", "macro", path, limit=4, chunk_size=8, progress=False)
    return open_table(path)


def test_the_agent_sees_what_training_reads_from_the_table(dev_table, tmp_path):
    X, S, ids = table_inputs(dev_table)
    assert X.shape == (len(ids), len(input_names())) and S.shape == (len(ids), 8)
    model = random_model()
    path = model.save(tmp_path / "r.json")
    agent = RouterAgent(path)
    seen = []
    original = router_inputs

    def spy(*args, **kwargs):
        x = original(*args, **kwargs)
        seen.append(x)
        return x

    import fwgym.agents.router as router_module

    router_module.router_inputs = spy
    try:
        env = FWBenchEnv(domain=("electricity", "cycle_hire"), split="dev")
        for i, cid in enumerate(ids):
            rec = run_episode(env, agent, options={"case_id": cid}).record
            assert np.array_equal(seen[-1], X[i]), cid  # bit for bit
            j = model.methods.index(agent.choice)
            assert j == model.choose(X[i]) and rec["S"] == S[i, j] and rec["calls"] == 9 and rec["valid"]
    finally:
        router_module.router_inputs = original


def test_router_files_are_data_and_checked(tmp_path):
    model = random_model(1)
    path = model.save(tmp_path / "r.json")
    back = RouterModel.load(path)
    x = np.random.default_rng(2).normal(size=(5, len(input_names())))
    assert np.array_equal(back.scores(x), model.scores(x)) and back.info == {"note": "random"}
    doc = json.loads(path.read_text())
    for edit, match in ((lambda d: d.update(format="x"), "bad.json is not a fwgym router model: expected a JSON object "
                         "with \"format\": \"fwgym-router\", \"format_version\": 1 .*; found format 'x', format_version 1$"),
                        (lambda d: d.update(format_version=2), "found format 'fwgym-router', format_version 2$"),
                        (lambda d: d.pop("format"), "found no \"format\" field \\(keys: 'format_version', 'methods', "
                                                    "'inputs', 'mean', 'scale', 'layers', \\.\\.\\.\\)$"),
                        (lambda d: d.pop("layers"), "not a readable fwgym router model \\(KeyError"),
                        (lambda d: d["layers"][0].update(b=[0.0]), "does not follow"),
                        (lambda d: d.update(inputs=d["inputs"][::-1]), "feature definitions changed"),
                        (lambda d: d.update(methods=d["methods"][:7] + ["nope"]), "unknown methods")):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=match):
            RouterModel.load(tmp_path / "bad.json")
    for name, data, found in (("list.json", b"[1, 2]", "found a JSON list$"), ("text.json", b"{oops", "not JSON text"),
                              ("bytes.json", b"\xff\xfe{}", "not JSON text")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=f"{name} is not a fwgym router model: .*{found}"):
            RouterModel.load(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        RouterAgent(tmp_path / "missing.json")


def test_fwgym_evaluate_agent_router(tmp_path, capsys):
    path = random_model(3).save(tmp_path / "mine.json")
    out = tmp_path / "run"
    assert main(["evaluate", "--agent", "router", "--router-path", str(path), "--agent-name", "router-x", "--split", "dev",
                 "--limit", "2", "--no-progress", "--out", str(out)]) == 0
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["policy"] for r in recs} == {"router-x"} and len(recs) == 4 and all(r["valid"] for r in recs)
    assert main(["evaluate", "--agent", "router", "--split", "dev", "--limit", "1", "--no-progress"]) == 2
    other = tmp_path / "other.json"  # JSON, but not a router file: the error names the file, expected and found
    other.write_text('{"a": 1}')
    capsys.readouterr()
    assert main(["evaluate", "--agent", "router", "--router-path", str(other), "--split", "dev", "--limit", "1",
                 "--no-progress", "--out", str(tmp_path / "run2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'fwgym: error: {other} is not a fwgym router model: expected a JSON object with "format": '
                          '"fwgym-router", "format_version": 1') and "found no \"format\" field (keys: 'a')" in err, err
    assert not (tmp_path / "run2").exists()
    f = RouterAgentFactory(model_path=str(path))
    assert f().name == "mine" and not f.isolated


def test_the_shipped_router_reproduces_its_dev_figure():
    """examples/models/router.json (examples/train_router.py's chosen model): its dev S, played by the episode loop
    on every dev case now, is the figure recorded in the file when it was chosen. The file's figure is the float
    dot product of the case weights and the per-case S (the aggregate of that time): it is reproduced bit for bit
    that way, and the leaderboard's correctly rounded mean is within an ulp of it."""
    from fwgym.core.scoring import case_weights
    from fwgym.evaluation import evaluate, leaderboard

    model = RouterModel.load(SHIPPED)
    recorded = model.info["dev"]
    records = evaluate([RouterAgentFactory(model_path=str(SHIPPED))], split="dev", progress=False)
    assert len(records) == recorded["cases"]
    assert float(np.dot(case_weights(records), [r["S"] for r in records])) == recorded["S"]
    assert leaderboard(records)[0]["S"] == pytest.approx(recorded["S"], rel=4e-16, abs=0)
