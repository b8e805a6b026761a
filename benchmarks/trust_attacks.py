"""The run-integrity attacks of issue 25 (findings 1, 2 and the record-before-end_episode part of 3), measured
through the command line only, so the same script measures any checkout (before and after a change)::

    python benchmarks/trust_attacks.py                    # this checkout
    python benchmarks/trust_attacks.py --root /work/main  # another checkout (its fwgym is imported)

Each attack prints the S the attacker obtains and whether fwgym accepted it:

* memory: a server that remembers every history it is shown and answers HTTP 500 on a case's first sighting,
  then ``--resume`` (cycle hire, the whole split): S and the exposed count on test, and on sealed where it exists;
* edit: weekday_empirical's records replaced by the perfect plan (re-scored consistently), then ``--resume``;
* relabel: a random agent's worse-than-median records re-labelled ``harness_error``, then ``--resume`` (one round
  of cherry-picking);
* forge: an in-process agent appends forged records of the reference policy (weekly_repeat's plans) to
  ``results.jsonl`` while the run goes on; the reference's S in ``fwgym leaderboard``;
* kill: an agent that kills the evaluating process from ``end_episode`` after a bad episode, then ``--resume``
  until the run is complete.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_RANDOM = '''
import json, os, random
METHODS = ["weekday_empirical", "weekly_repeat", "all_hour_empirical", "recent_day_empirical", "hour_of_day_empirical"]
class Agent:
    name = "random_agent"
    def reset(self, info=None):
        self.k, self.m = 0, random.Random(os.urandom(8)).choice(METHODS)
    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": self.m}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}
'''

_FORGER = '''
import json


class Agent:
    """Plays hour_of_day_empirical; at each end_episode it appends a forged record of the reference policy (its
    worst plan, re-scoring consistently) for the case played before, which the reference has played by then: on a
    runner that keeps the file's last line per pair, the forgery replaces the reference's record."""

    name = "forger"

    def __init__(self, forged=None, results=None):
        self.results, self.prev, self.case = results, None, None
        self.forged = {json.loads(x)["case_id"]: x for x in open(forged).read().splitlines() if x.strip()}

    def reset(self, info=None):
        self.k, self.prev, self.case = 0, self.case, (info or {}).get("case_id")

    def act(self, obs):
        self.k += 1
        if self.k == 1:
            return {"tool": "classical_plan", "args": {"method": "hour_of_day_empirical"}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}

    def end_episode(self, record):
        if self.prev in self.forged:
            with open(self.results, "a") as dst:
                dst.write(self.forged[self.prev] + "\\n")
'''

_KILLER = '''
import json, os, signal
class Agent:
    """Plays weekly_repeat; after a bad episode (S > 0.35) it kills the evaluating process from end_episode, once per
    case (a marker file); a case played again is played with hour_of_day_empirical."""
    name = "killer"
    def __init__(self, markers=None):
        self.markers = markers
    def reset(self, info=None):
        self.k, self.case = 0, (info or {}).get("case_id")
        self.again = os.path.exists(os.path.join(self.markers, str(self.case)))
    def act(self, obs):
        self.k += 1
        if self.k == 1:
            m = "hour_of_day_empirical" if self.again else "weekly_repeat"
            return {"tool": "classical_plan", "args": {"method": m}}
        return {"tool": "submit", "args": {"decisions": json.loads(obs["last_result"])["result"]["plan"]["decisions"]}}
    def end_episode(self, record):
        if not self.again and record.get("S") is not None and record["S"] > 0.35:
            open(os.path.join(self.markers, str(self.case)), "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
'''


class Fwgym:
    def __init__(self, root: Path, limit: int | None = None):
        self.env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
        self.limit = limit

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        code = "import sys; from fwgym.cli import main; sys.exit(main(sys.argv[1:]))"
        if args and args[0] == "evaluate" and "--resume" not in args and self.limit:
            args = (*args, "--limit", str(self.limit))
        return subprocess.run([sys.executable, "-c", code, *args], env=self.env, capture_output=True, text=True,
                              cwd=tempfile.gettempdir())  # not this folder: `python -c` imports from its cwd first

    def py(self, code: str) -> str:
        return subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True,
                              check=True, cwd=tempfile.gettempdir()).stdout


def records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def board(fw: Fwgym, out: Path) -> tuple[dict, str]:
    """{policy: S} of ``fwgym leaderboard --format csv`` (or the one-line refusal)."""
    p = fw("leaderboard", str(out), "--format", "csv")
    if p.returncode:
        return {}, p.stderr.strip().splitlines()[-1][:160]
    lines = p.stdout.splitlines()
    head = lines[0].split(",")
    return {x.split(",")[0]: float(x.split(",")[head.index("S")]) for x in lines[1:]}, "accepted"


def mark_incomplete(out: Path) -> None:
    m = json.loads((out / "manifest.json").read_text())
    m["status"] = "incomplete"
    if m.get("sessions"):
        m["sessions"][-1]["status"] = "incomplete"
    (out / "manifest.json").write_text(json.dumps(m))


def attack_edit(fw: Fwgym, tmp: Path) -> str:
    out = tmp / "edit"
    fw("evaluate", "--split", "test", "--policies", "weekday_empirical", "perfect_demand", "--out", str(out),
       "--no-progress")
    s0 = board(fw, out)[0].get("weekday_empirical")
    recs = records(out)
    best = {r["case_id"]: r for r in recs if r["policy"] == "perfect_demand"}
    edited = [({**r, **{k: best[r["case_id"]][k] for k in ("levels", "loss", "floor", "R", "S")}}
               if r["policy"] == "weekday_empirical" else r) for r in recs]
    (out / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in edited))
    lb = board(fw, out)[1]
    mark_incomplete(out)
    p = fw("evaluate", "--resume", str(out), "--no-progress")
    res = (f"resume exit {p.returncode}: " + (p.stderr.strip().splitlines() or [""])[-1][:140]) if p.returncode else \
        f"resume accepted; weekday_empirical S = {board(fw, out)[0].get('weekday_empirical'):.4f}"
    return f"edit: S {s0:.4f}; leaderboard on the edited file: {lb[:60]}...; {res}"


def attack_relabel(fw: Fwgym, tmp: Path) -> str:
    out = tmp / "relabel"
    agent = tmp / "random_agent.py"
    agent.write_text(_RANDOM)
    fw("evaluate", "--split", "test", "--domain", "cycle_hire", "--agent", f"{agent}:Agent", "--in-process",
       "--policies", "hour_of_day_empirical", "--out", str(out), "--no-progress")
    s0 = board(fw, out)[0].get("random_agent")
    recs = records(out)
    mine = sorted(r["S"] for r in recs if r["policy"] == "random_agent")
    median = mine[len(mine) // 2]
    relabelled = [({**r, "status": "harness_error", "scored": False, "harness_kind": "http_5xx", "loss": None,
                    "floor": None, "R": None, "S": None, "valid": False, "levels": None}
                   if r["policy"] == "random_agent" and r["S"] > median else r) for r in recs]
    (out / "results.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in relabelled))
    mark_incomplete(out)
    p = fw("evaluate", "--resume", str(out), "--no-progress")
    if p.returncode:
        return f"relabel: S {s0:.4f}; resume exit {p.returncode}: " + p.stderr.strip().splitlines()[-1][:140]
    return f"relabel: S {s0:.4f} -> {board(fw, out)[0].get('random_agent'):.4f} after one round (resume accepted)"


def attack_forge(fw: Fwgym, tmp: Path) -> str:
    out = tmp / "forge"
    ref_run = tmp / "worst"
    fw("evaluate", "--split", "test", "--policies", "weekly_repeat", "hour_of_day_empirical", "--out", str(ref_run),
       "--no-progress")
    worst = [r for r in records(ref_run) if r["policy"] == "weekly_repeat"]
    forged = tmp / "forged.jsonl"
    forged.write_text("".join(json.dumps({**r, "policy": "hour_of_day_empirical",
                                          "episode_id": f"1:hour_of_day_empirical:{r['case_id']}"}, sort_keys=True)
                              + "\n" for r in worst))
    agent = tmp / "forger.py"
    agent.write_text(_FORGER)
    fw("evaluate", "--split", "test", "--agent", f"{agent}:Agent", "--in-process", "--agent-kwargs",
       json.dumps({"forged": str(forged), "results": str(out / "results.jsonl")}), "--policies",
       "hour_of_day_empirical", "--out", str(out), "--no-progress")
    own = board(fw, ref_run)[0].get("hour_of_day_empirical")
    s, how = board(fw, out)
    return f"forge: reference hour_of_day_empirical S {own:.4f} -> {s.get('hour_of_day_empirical', float('nan')):.4f} " \
           f"in fwgym leaderboard ({how})"


def attack_kill(fw: Fwgym, tmp: Path) -> str:
    agent, markers, out = tmp / "killer.py", tmp / "markers", tmp / "kill"
    agent.write_text(_KILLER)
    markers.mkdir()
    args = ["evaluate", "--split", "test", "--domain", "cycle_hire", "--agent", f"{agent}:Agent", "--in-process",
            "--agent-kwargs", json.dumps({"markers": str(markers)}), "--no-progress"]
    fw(*args, "--out", str(out))
    kills, p = 1, None
    while kills < 400:
        p = fw("evaluate", "--resume", str(out), "--no-progress")
        if p.returncode == 0:
            break
        kills += 1
    ref = tmp / "kill_reference"
    fw("evaluate", "--split", "test", "--domain", "cycle_hire", "--policies", "weekly_repeat", "hour_of_day_empirical",
       "--out", str(ref), "--no-progress")
    s_ref = board(fw, ref)[0]
    got = board(fw, out)[0].get("killer")
    return (f"kill: {len(list(markers.iterdir()))} episodes ended by killing the evaluator, {kills} sessions; the "
            f"attacked row S {got if got is None else round(got, 4)}; what it earned (weekly_repeat) "
            f"{s_ref.get('weekly_repeat', float('nan')):.4f}, the retries' method alone (hour_of_day_empirical) "
            f"{s_ref.get('hour_of_day_empirical', float('nan')):.4f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(HERE), help="the checkout whose fwgym runs")
    ap.add_argument("--only", nargs="+", default=["edit", "relabel", "forge", "kill"])
    ap.add_argument("--limit", type=int, default=None, help="cases per domain (default: the whole split)")
    args = ap.parse_args()
    fw = Fwgym(Path(args.root), args.limit)
    print(f"checkout {args.root}: " + fw.py("import fwgym, subprocess; print(fwgym.__file__)").strip())
    with tempfile.TemporaryDirectory() as d:
        for name in args.only:
            print(globals()[f"attack_{name}"](fw, Path(d)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
