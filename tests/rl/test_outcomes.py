"""Outcome tables (fwgym.rl.outcomes): a table built from the env returns what the env returns (every case x every
entry through the single env; > 10,000 episodes through the vector env against SyncVectorEnv of wrapped envs, both
autoreset modes); a tampered, stale or foreign table is refused; a missing one is said once; builds resume and give
the same table with processes and in one process."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
import shutil
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import fwgym  # noqa: F401  (registers the ids)
from fwgym.rl import make_rl_env
from fwgym.rl.outcomes import (OutcomeTable, OutcomeTableHint, TableError, TableIntegrityError, TableStale, build_table,
                               open_table, table_dir)
from fwgym.rl.outcomes import identity as identity_module
from fwgym.rl.outcomes import read as read_module
from fwgym.rl.table_env import TableMacroEnv
from fwgym.rl.vector import MacroVectorEnv
from vector_checks import assert_same, reference_batch

ID = "FWBench-RL-Macro-v0"
LIMIT = 8  # dev cases per domain in the test table


@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "dev"
    record = build_table("dev", "macro", path, limit=LIMIT, chunk_size=5, progress=False)
    assert record["cases"] == 2 * LIMIT and record["rows"] == 1 + 2 * LIMIT * 13
    return path


@pytest.fixture(autouse=True)
def fresh_hints(monkeypatch):
    monkeypatch.setattr(read_module, "_SAID", set())
    monkeypatch.setattr(read_module, "_OPEN", {})


def test_single_env_equals_the_wrapped_env_on_every_case_and_entry(table_path):
    table = open_table(table_path)
    ids = table.case_ids
    env_t = make_rl_env(split="dev", case_ids=ids, outcome_table=table_path)
    env_w = make_rl_env(split="dev", case_ids=ids, outcome_table=False)
    assert isinstance(env_t, TableMacroEnv) and type(env_w).__name__ == "MacroActionWrapper"
    assert env_t.observation_space == env_w.observation_space and env_t.action_space == env_w.action_space
    for cid in ids:
        for e in range(12):
            a, b = env_t.reset(options={"case_id": cid}), env_w.reset(options={"case_id": cid})
            assert_same(a, b, "reset")
            assert_same(env_t.action_masks(), env_w.action_masks(), "mask")
            assert_same(env_t.step(e), env_w.step(e), f"{cid}/{e}")
            assert_same(env_t.action_masks(), env_w.action_masks(), "mask after")
    for seed in range(40):  # the seeded case draws are the env's
        assert_same(env_t.reset(seed=seed), env_w.reset(seed=seed), "seeded reset")
    info = env_t.step(0)[4]
    info["levels"].append(9.0)  # a mutated info does not reach the table
    env_t.reset(options={"case_id": info["case_id"]})
    assert 9.0 not in env_t.step(0)[4]["levels"]
    with pytest.raises(RuntimeError, match="reset"):
        env_t.step(0)
    with pytest.raises(AttributeError, match="outcome_table=False"):
        env_t.tracker  # noqa: B018


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_vector_env_on_the_table_equals_sync_vector_env(table_path, mode):
    """>= 10,000 episodes in all (random entries, masked ones included), reseeded and seed-less resets between."""
    ids = open_table(table_path).case_ids
    native = gym.make_vec(ID, num_envs=64, autoreset_mode=mode, split="dev", case_ids=ids, outcome_table=table_path)
    sync = gym.make_vec(ID, num_envs=64, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}, split="dev",
                        case_ids=ids, outcome_table=False)
    assert isinstance(native, MacroVectorEnv) and native.table is not None
    rng = np.random.default_rng(int(mode == AutoresetMode.SAME_STEP))
    assert_same(native.reset(seed=7), sync.reset(seed=7), "reset")
    episodes = 0
    steps = 110 if mode == AutoresetMode.SAME_STEP else 100
    for t in range(steps):
        if t and t % 40 == 0:
            s = None if t % 80 else int(rng.integers(1 << 30))
            assert_same(native.reset(seed=s), sync.reset(seed=s), "reseed")
        assert_same(native.action_masks(), np.stack(sync.call("action_masks")), "mask")
        a = rng.integers(0, 12, 64)
        r1, r2 = native.step(a), sync.step(a)
        assert_same(r1, r2, f"step {t}")
        episodes += int(np.sum(r1[2] | r1[3]))
    assert episodes >= (7_000 if mode == AutoresetMode.SAME_STEP else 3_000)
    assert native.recorded == {"cases": 0, "steps": 0}  # nothing played: every row came from the table
    native.close(), sync.close()


def test_the_table_holds_what_the_env_returned(table_path):
    table = OutcomeTable(table_path)
    env = make_rl_env(split="dev", case_ids=table.case_ids, outcome_table=False)
    cid = table.case_ids[3]
    obs, _ = env.reset(options={"case_id": cid})
    _, reward, *_, info = env.step(6)
    row = int(table.rows_of(table.slot[cid], 6))
    assert table.reward[row] == reward == -info["S"]
    assert table.infos.row_dict(row)["S"] == info["S"] and table.infos.row_dict(row)["levels"] == info["levels"]
    assert not table.fixed_obs.flags.writeable and not table.obs.flags.writeable  # read-only memory maps
    manifest = json.loads((table_path / "manifest.json").read_text())
    assert manifest["layout"]["menu"][6] == "plan_submit:hour_of_day_empirical"
    assert manifest["fingerprint"]["pool"]["seasonal_empirical"]["tariff"]["336"][0] == 400


def test_a_tampered_table_is_refused(table_path, tmp_path, monkeypatch):
    for name, edit in (("rows.arrow", lambda b: b[:5000] + bytes([b[5000] ^ 1]) + b[5001:]),
                       ("pool.arrow", lambda b: b.replace(b"submitted", b"submittes"))):
        bad = tmp_path / name.split(".")[0]
        shutil.copytree(table_path, bad)
        (bad / name).write_bytes(edit((bad / name).read_bytes()))
        with pytest.raises(TableIntegrityError, match=name) as exc:
            OutcomeTable(bad)
        assert str(exc.value).endswith(f"the command: fwgym rl build --split dev --variant macro --limit {LIMIT} "
                                       f"--out {bad} --overwrite")
        with pytest.raises(TableIntegrityError):  # given by path, or found as the default table: never silent
            make_rl_env(split="dev", case_ids=open_table(table_path).case_ids, outcome_table=bad)
    doc = json.loads((table_path / "manifest.json").read_text())
    forged = tmp_path / "forged"
    shutil.copytree(table_path, forged)
    doc["fingerprint"]["pool"]["seasonal_empirical"]["tariff"]["336"][0] = 1
    (forged / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(TableError, match="fingerprint_sha256 does not match"):
        OutcomeTable(forged)


def test_a_stale_or_foreign_table_is_refused(table_path, tmp_path, monkeypatch):
    ids = open_table(table_path).case_ids
    with pytest.raises(TableError, match="other env settings"):  # a table of other settings, given by path
        make_rl_env(split="dev", case_ids=ids, budget=1000, outcome_table=table_path)
    with pytest.raises(TableError, match=f"lacks .*build it over the whole split \\(fwgym rl build --split dev --variant "
                                         f"macro --out {re.escape(str(table_path))} --overwrite\\)"):  # a pool it lacks
        make_rl_env(split="dev", outcome_table=table_path)
    # the default table, put where the env looks for it
    root = tmp_path / "root"
    env = make_rl_env(split="dev", case_ids=ids, outcome_table=False)
    identity = identity_module.table_identity("macro", env)
    shutil.copytree(table_path, table_dir(root, identity))
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(root))
    assert isinstance(make_rl_env(split="dev", case_ids=ids), TableMacroEnv)
    with pytest.warns(OutcomeTableHint, match="does not hold every case of this env's pool; not reading it \\(fwgym rl "
                                              "build --split dev --variant macro --overwrite builds the whole split\\)"):
        make_rl_env(split="dev")  # the whole split's pool: the partial default table is not read
    code = identity_module.code_digest()
    monkeypatch.setattr(identity_module, "code_digest", lambda: {**code, "sha256": "0" * 64})  # other code
    with pytest.raises(TableStale, match=f"code.sha256.*rebuild it: fwgym rl build --split dev --variant macro --limit "
                                         f"{LIMIT} --out {re.escape(str(table_path))} --overwrite$"):
        make_rl_env(split="dev", case_ids=ids, outcome_table=table_path)
    with pytest.warns(OutcomeTableHint, match=f"rebuild it: fwgym rl build --split dev --variant macro --limit {LIMIT} "
                                              "--overwrite. Not reading it"):  # the default directory: no --out
        env = make_rl_env(split="dev", case_ids=ids)
    assert type(env).__name__ == "MacroActionWrapper"  # not read: the env itself
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        make_rl_env(split="dev", case_ids=ids)


def test_the_rebuild_command_names_pool_limit_and_directory(tmp_path, monkeypatch):
    """The command a stale, partial or missing table's message gives rebuilds that very table: its pool, its --limit,
    its directory when not the default one; settings the command line cannot give (a budget, a pool that is none of
    the registry's) as the build_table call. Each command is run: it finds its own table built (nothing to do)."""
    import fwgym.rl.outcomes
    from fwgym.cli import main
    from fwgym.forecasters.registry import EXTENDED_MODELS, NO_TSFM_MODELS, PRICED_MODELS
    from fwgym.rl.outcomes.identity import build_command

    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(tmp_path / "root"))

    def ident_of(**kw):
        env = make_rl_env(split="dev", outcome_table=False, **kw)
        try:
            return identity_module.table_identity("macro", env)
        finally:
            env.close()

    ident = ident_of()
    assert build_command(ident) == "fwgym rl build --split dev --variant macro --overwrite"
    assert build_command(ident, table_dir(tmp_path / "root", ident)) == "fwgym rl build --split dev --variant macro --overwrite"
    assert build_command(ident, overwrite=False) == "fwgym rl build --split dev --variant macro"
    runs = {"ext": ({"models": list(EXTENDED_MODELS)}, f"fwgym rl build --split dev --variant macro --pool extended "
                                                       f"--limit 1 --out {tmp_path / 'ext'} --overwrite"),
            "nt": ({"models": list(NO_TSFM_MODELS)}, f"fwgym rl build --split dev --variant macro --pool no_tsfm --limit 1 "
                                                     f"--out {tmp_path / 'nt'} --overwrite"),
            "budget": ({"budget": 50000}, f"fwgym.rl.outcomes.build_table('dev', 'macro', '{tmp_path / 'budget'}', limit=1, "
                                          "overwrite=True, env_kwargs={'budget': 50000}) (its settings ['budget'] are "
                                          "not the command line's)"),
            "odd": ({"models": ["chronos2"]}, None)}
    for name, (kw, want) in runs.items():
        build_table("dev", "macro", tmp_path / name, limit=1, progress=False, env_kwargs=kw)
        cmd = build_command(ident_of(**kw), tmp_path / name, limit=1)
        assert want is None or cmd == want
        def key():
            doc = json.loads((tmp_path / name / "manifest.json").read_text())
            return doc["identity_sha256"], doc["layout"]["cases_sha256"]

        before = key()
        shutil.rmtree(tmp_path / name)  # the command must make this very table again, there
        if cmd.startswith("fwgym rl build"):
            assert main(cmd.split()[1:] + ["--no-progress"]) == 0
        else:
            assert "env_kwargs={'models': ['chronos2']}" in cmd or "budget" in cmd
            eval(cmd.split(" (its settings")[0], {"fwgym": fwgym})  # noqa: S307 - our own command
        assert key() == before  # the same settings and cases, at the same place
    reversed_pool = build_command(ident_of(models=list(PRICED_MODELS)[::-1]))
    assert reversed_pool.startswith("fwgym.rl.outcomes.build_table('dev', 'macro', None, overwrite=True, env_kwargs=")
    # from a manifest that does not verify (a format-version error is raised before the hashes are checked)
    assert build_command({"models": 3}, tmp_path / "y", limit="9") == \
        f"fwgym rl build --split SPLIT --variant macro --out {tmp_path / 'y'} --overwrite"


def test_a_missing_table_is_said_once_with_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(tmp_path))
    with pytest.warns(OutcomeTableHint, match="`fwgym rl build --split dev --variant macro` precomputes"):
        venv = gym.make_vec(ID, num_envs=2, split="dev")
    assert venv.table is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym.make_vec(ID, num_envs=2, split="dev")
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", "off")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gym.make_vec(ID, num_envs=2, split="dev").table is None


def test_a_held_out_split_without_a_table_is_not_told_to_build_one(tmp_path, monkeypatch):
    """On test the hint says the outcomes are played through the env, without the advice to precompute them for
    speed (the HeldOutSplitWarning beside it says not to train there)."""
    from fwgym.rl import HeldOutSplitWarning

    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(tmp_path))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        gym.make_vec(ID, num_envs=2, split="test").close()
    hints = [str(w.message) for w in said if w.category is OutcomeTableHint]
    assert hints == ["no outcome table for the macro RL env on the test split: every (case, entry) outcome is played "
                     "through the env the first time it is drawn; the test split is for reporting a policy once "
                     "(fwgym evaluate), not for training on it"]
    assert [w.category for w in said if w.category is HeldOutSplitWarning] in ([], [HeldOutSplitWarning])


def test_a_hint_turned_into_an_error_raises_every_time(tmp_path, monkeypatch):
    """A filter that makes the hint an error raises at each env: the hint is noted as said only once it was said."""
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutcomeTableHint)
        for _ in range(2):
            with pytest.raises(OutcomeTableHint, match="no outcome table"):
                gym.make_vec(ID, num_envs=2, split="dev")
    with pytest.warns(OutcomeTableHint):  # and is said, once, when the filter is gone
        gym.make_vec(ID, num_envs=2, split="dev")


def test_a_build_never_deletes_a_foreign_manifest_json(tmp_path):
    """A directory of other files that happens to hold a manifest.json (a web app, an extension) holds no outcome
    table: the build refuses it, with --overwrite too, and leaves its files as they were."""
    foreign = tmp_path / "webapp"
    foreign.mkdir()
    (foreign / "manifest.json").write_text(json.dumps({"name": "my app", "version": "1"}))
    (foreign / "index.html").write_text("<html/>")
    for overwrite in (False, True):
        with pytest.raises(TableError, match="holds no outcome table"):
            build_table("dev", out=foreign, limit=1, overwrite=overwrite, progress=False)
    assert sorted(p.name for p in foreign.iterdir()) == ["index.html", "manifest.json"]
    assert json.loads((foreign / "manifest.json").read_text()) == {"name": "my app", "version": "1"}
    (foreign / "manifest.json").write_text("not json")
    with pytest.raises(TableError, match="holds no outcome table"):
        build_table("dev", out=foreign, limit=1, overwrite=True, progress=False)
    parts_file = tmp_path / "parts-file"
    parts_file.mkdir()
    (parts_file / ".parts").write_text("x")
    with pytest.raises(TableError, match="is a file, not an outcome table's partial build"):
        build_table("dev", out=parts_file, limit=1, overwrite=True, progress=False)


def test_builds_resume_and_processes_give_the_same_table(table_path, tmp_path):
    target = tmp_path / "t"
    played = []

    def interrupt(n):
        played.append(n)
        if len(played) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_table("dev", "macro", target, limit=LIMIT, chunk_size=5, progress=interrupt)
    assert not (target / "manifest.json").exists() and len(list((target / ".parts").glob("*.rows.arrow"))) == 2
    again = []
    build_table("dev", "macro", target, limit=LIMIT, chunk_size=5, progress=again.append)
    assert sum(again) == 2 * LIMIT - sum(played)  # the two parts on disk were not played again
    assert not (target / ".parts").exists()
    procs = tmp_path / "p"
    build_table("dev", "macro", procs, limit=LIMIT, chunk_size=5, workers=2, progress=False)
    ref = json.loads((table_path / "manifest.json").read_text())["files"]
    for t in (target, procs):
        files = json.loads((t / "manifest.json").read_text())["files"]
        assert {k: v["sha256"] for k, v in files.items()} == {k: v["sha256"] for k, v in ref.items()}
    assert build_table("dev", "macro", procs, limit=LIMIT, chunk_size=5, progress=False)["skipped"] == "already built"
    with pytest.raises(TableError, match="overwrite"):
        build_table("dev", "macro", procs, limit=LIMIT - 1, chunk_size=5, progress=False)


@pytest.fixture(scope="module")
def sequential_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "seq"
    record = build_table("dev", "sequential", path, limit=4, chunk_size=4, progress=False)
    assert record["entries"] == 28 and record["rows"] == 1 + 8 * 29
    return path


def test_sequential_table_env_equals_the_wrapped_env(sequential_path):
    """Every case x every first entry, each continued with random entries to the end; then seeded episodes."""
    ids = open_table(sequential_path).case_ids
    env_t = make_rl_env(split="dev", variant="sequential", case_ids=ids, outcome_table=sequential_path)
    env_w = make_rl_env(split="dev", variant="sequential", case_ids=ids, outcome_table=False)
    assert isinstance(env_t, TableMacroEnv) and env_t.action_space.n == 28
    rng = np.random.default_rng(0)

    def episode(first=None, **reset):
        assert_same(env_t.reset(**reset), env_w.reset(**reset), "reset")
        steps, done, a = 0, False, first
        while not done:
            m = env_w.action_masks()
            assert_same(env_t.action_masks(), m, "mask")
            if a is None:  # mostly allowed entries (long episodes), sometimes any (masked ones abstain)
                a = int(rng.choice(np.flatnonzero(m))) if m.any() and rng.random() < 0.9 else int(rng.integers(28))
            r1, r2 = env_t.step(a), env_w.step(a)
            assert_same(r1, r2, f"step {steps}")
            done, a, steps = r1[2] or r1[3], None, steps + 1
        return steps

    lengths = [episode(first=e, options={"case_id": cid}) for cid in ids for e in range(28)]
    lengths += [episode(seed=s) for s in range(150)]
    assert max(lengths) >= 4 and min(lengths) == 1  # long episodes continued on the env, one-step ones from the table


def test_sequential_vector_envs_over_thousands_of_episodes(sequential_path):
    """SyncVectorEnv of table envs vs of wrapped envs (gym.make_vec of the sequential id), > 10,000 episodes."""
    ids = open_table(sequential_path).case_ids
    kw = {"split": "dev", "case_ids": ids}
    native = gym.make_vec("FWBench-RL-Sequential-v0", num_envs=32, vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                          outcome_table=sequential_path, **kw)
    sync = gym.make_vec("FWBench-RL-Sequential-v0", num_envs=32, vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                        outcome_table=False, **kw)
    rng = np.random.default_rng(5)
    assert_same(native.reset(seed=2), sync.reset(seed=2), "reset")
    episodes = 0
    while episodes < 10_000:
        m = np.stack(sync.call("action_masks"))
        assert_same(np.stack(native.call("action_masks")), m, "mask")
        final = [int(rng.choice(np.flatnonzero(row[:12]))) if row[:12].any() else 0 for row in m]  # short episodes
        a = np.where(rng.random(32) < 0.8, final, rng.integers(0, 28, 32))
        r1, r2 = native.step(a), sync.step(a)
        assert_same(r1, r2, "step")
        episodes += int(np.sum(r1[2] | r1[3]))
    native.close(), sync.close()


def test_a_partial_table_holds_the_cases_evaluate_plays_with_the_same_limit():
    from fwgym.evaluation import select_cases
    from fwgym.rl.outcomes.build import _evenly_spaced, table_env

    cases = table_env("dev", "macro").unwrapped.cases
    for limit in (1, 7, 500):
        assert _evenly_spaced(cases, limit) == [cid for _, cid in select_cases("dev", limit=limit)]
    with pytest.raises(TableError, match="limit"):
        _evenly_spaced(cases, 0)


def test_every_module_an_episode_runs_is_in_the_table_fingerprint():
    """A table is stale when the code that computes an outcome changes: every fwgym module that playing macro episodes
    imports must be fingerprinted (:data:`CODE_ROOMS`, :data:`RL_MODULES`, :data:`ROOT_MODULES`) or be one of the RL
    room's storage modules (covered by the table format's version). ``domains`` was missing (its calendars and
    quality rules define the cases)."""
    code = (
        "import sys\n"
        "from fwgym.rl import make_rl_env\n"
        "env = make_rl_env(split='dev', variant='macro', outcome_table=False)\n"
        "for seed in range(3):\n"
        "    env.reset(seed=seed); env.step(0)\n"
        "print('\\n'.join(sorted(m.__file__ for n, m in sys.modules.items()\n"
        "                         if n.startswith('fwgym') and getattr(m, '__file__', None))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=str(identity_module.PACKAGE_DIR.parent))
    pkg = identity_module.PACKAGE_DIR
    storage = ("rl/outcomes/", "rl/infos.py", "rl/infos_export.py", "rl/values.py", "rl/recorded.py", "rl/vector.py", "rl/table_env.py",
               "rl/__init__.py")
    missing = []
    for line in out.stdout.split():
        rel = Path(line).resolve().relative_to(pkg).as_posix()
        covered = (rel.split("/")[0] in identity_module.CODE_ROOMS or rel in identity_module.RL_MODULES
                   or rel in identity_module.ROOT_MODULES or rel.startswith(storage))
        if not covered:
            missing.append(rel)
    assert missing == [], f"modules an RL episode runs that no table fingerprint covers: {missing}"


def test_a_table_of_another_format_version_is_stale_and_rebuilt(table_path, tmp_path, monkeypatch):
    """A table written by format version 1 (column-major info tables, no packed record) is never read: given by path
    it is refused, as the default table it is said once and the env plays live, and a build over it needs
    --overwrite, then writes the current version."""
    ids = open_table(table_path).case_ids
    env = make_rl_env(split="dev", case_ids=ids, outcome_table=False)
    identity = identity_module.table_identity("macro", env)
    root = tmp_path / "root"
    old = table_dir(root, identity)
    shutil.copytree(table_path, old)
    doc = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**doc, "format_version": 1}))
    monkeypatch.setenv("FWGYM_OUTCOME_TABLES", str(root))
    with pytest.raises(TableStale, match="format version 1; this fwgym reads version 2; rebuild it: fwgym rl build "
                                         f"--split dev --variant macro --limit {LIMIT} --overwrite$"):
        OutcomeTable(old)  # the default table's directory: no --out
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(old, elsewhere)
    with pytest.raises(TableStale, match=f"--limit {LIMIT} --out {elsewhere} --overwrite$"):
        OutcomeTable(elsewhere)
    with pytest.warns(OutcomeTableHint, match="format version 1"):
        env = make_rl_env(split="dev", case_ids=ids)
    assert type(env).__name__ == "MacroActionWrapper"
    with pytest.raises(TableError, match="format version \\(1; this fwgym writes 2\\)"):
        build_table("dev", "macro", old, limit=LIMIT, chunk_size=5, progress=False)
    build_table("dev", "macro", old, limit=LIMIT, chunk_size=5, progress=False, overwrite=True)
    assert json.loads((old / "manifest.json").read_text())["format_version"] == 2
    assert isinstance(make_rl_env(split="dev", case_ids=ids), TableMacroEnv)


def test_rows_are_one_aligned_packed_record_each(table_path):
    """rows.arrow is one fixed-size record per row; every part is an aligned, read-only view of it, and each row's
    record holds exactly that row's values (what the vector env slices out of one gather per env)."""
    table = OutcomeTable(table_path)
    rec, fields = table.record, table.record_fields
    assert rec.dtype == np.uint8 and rec.shape[0] == len(table.reward) and rec.shape[1] % 8 == 0
    assert {"obs", "reward", "terminated", "truncated", "mask", "info_pattern"} <= set(fields)
    for part in (table.obs, table.reward, table.masks, table.infos._row_pattern, *table.infos._tables.values()):
        assert part.flags.aligned and not part.flags.writeable
    rows = np.array([5, 1, 27, 5, 200], dtype=np.int64)
    block = rec[rows]
    off, dtype, shape = fields["reward"]
    assert np.array_equal(block[:, off: off + 8].view(dtype)[:, 0], table.reward[rows])
    records = [table.infos.row_dict(r) for r in range(1, int(rows.max()) + 1)]
    for got in (table.infos.batch(rows), table.infos.batch(rows, block=block)):  # gymnasium's _add_info of the rows
        assert_same(got, reference_batch(records, rows))
    def arrays(d):
        return [a for v in d.values() for a in (arrays(v) if isinstance(v, dict) else [v])]

    assert all(a.flags.c_contiguous for a in arrays(table.infos.batch(rows, block=block)))  # as SyncVectorEnv's
    assert not np.shares_memory(table.infos.batch(rows, block=block)["S"], block)


def _forge_record(src: Path, dst: Path, edit_columns=None, edit_fields=None) -> Path:
    """A copy of table ``src`` whose packed records are rewritten (columns, then the field list edited) and re-hashed:
    what an edit that keeps every sha256 consistent looks like."""
    from fwgym.rl.outcomes.format import pack_rows, read_arrow, unpack_rows, write_arrow

    shutil.copytree(src, dst)
    doc = json.loads((dst / "manifest.json").read_text())
    rec = read_arrow(dst / "rows.arrow", doc["files"]["rows.arrow"])["record"]
    columns = {k: np.array(v) for k, v in unpack_rows(rec, doc["layout"]["record"]).items()}
    if edit_columns:
        edit_columns(columns)
    rec, fields = pack_rows(columns)
    doc["files"]["rows.arrow"] = write_arrow(dst / "rows.arrow", {"record": rec})
    doc["layout"]["record"] = edit_fields(fields) if edit_fields else fields
    (dst / "manifest.json").write_text(json.dumps(doc))
    return dst


def test_a_forged_record_layout_is_refused_when_opened(table_path, tmp_path):
    """A re-hashed table whose record fields are of another dtype or shape than the build writes, malformed or
    overlapping, is refused with TableError when opened, not read (an int64 info pattern of 2**32 + 1 passed the
    store's range check as its int32 cast, 1, then a batch read the field itself: IndexError)."""
    def wide_pattern(c):
        c["info_pattern"] = c["info_pattern"].astype(np.int64) + np.where(np.arange(len(c["info_pattern"])) == 5, 1 << 32, 0)

    def hidden_overlap(fields):  # terminated moved into reward's bytes, an empty field between them
        off = {f[0]: f[1] for f in fields}
        return [[f[0], off["reward"] + 4 if f[0] == "terminated" else f[1], f[2], f[3]] for f in fields] + \
            [["empty", off["reward"] + 1, "|u1", [0]]]

    cases = {"pattern": ({"edit_columns": wide_pattern}, "info_pattern is int64"),
             "reward": ({"edit_columns": lambda c: c.__setitem__("reward", c["reward"].astype(np.float32))}, "reward is float32"),
             "terminated": ({"edit_columns": lambda c: c.__setitem__("terminated", c["terminated"].astype(np.uint8))},
                            "terminated is uint8"),
             "short": ({"edit_fields": lambda f: f + [["x", 0]]}, "malformed \\(IndexError"),
             "huge": ({"edit_fields": lambda f: f + [["x", 0, "|u1", [2 ** 64]]]}, "malformed \\(OverflowError"),
             "overlap": ({"edit_fields": hidden_overlap}, "reward and terminated overlap")}
    for name, (kw, match) in cases.items():
        with pytest.raises(TableError, match=match):
            OutcomeTable(_forge_record(table_path, tmp_path / name, **kw))


def test_unpack_rows_refuses_an_overlap_behind_an_empty_field():
    from fwgym.rl.outcomes.format import unpack_rows

    record = np.zeros((3, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match="a and b overlap"):
        unpack_rows(record, [["a", 0, "<i4", [4]], ["z", 4, "<i4", [0]], ["b", 8, "<i4", []]])
    with pytest.raises(ValueError, match="malformed"):
        unpack_rows(record, [["a", 0, "nope", []]])
    got = unpack_rows(record, [["a", 0, "<i4", [2]], ["z", 4, "<i4", [0]], ["b", 8, "<i4", []]])  # adjacent, fine
    assert got["a"].shape == (3, 2) and got["z"].shape == (3, 0) and got["b"].shape == (3,)


@pytest.mark.parametrize("split,variant", [("dev", "macro"), ("test", "sequential")])
def test_the_default_identity_is_the_build_envs(split, variant):
    """``build_command`` compares a table's settings with those ``fwgym rl build`` plays (RL_ENV_SETTINGS: what
    make_rl_env gives FWBenchEnv): equal to the identity of the env the build really plays."""
    from fwgym.rl.outcomes.build import table_env
    from fwgym.rl.outcomes.identity import _default_identity

    env = table_env(split, variant)
    try:
        assert json.loads(_default_identity(split, variant)) == identity_module.table_identity(variant, env)
    finally:
        env.close()
