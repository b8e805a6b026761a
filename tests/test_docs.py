"""The documentation is part of the product: the docs site builds with warnings as errors, every ``python`` snippet of
every page (and of README.md) runs as written, and every ``fwgym ...`` command line of a ``bash`` snippet is
accepted by fwgym's own argument parser.

Python snippets of one page run in order in one fresh interpreter (the page's own namespace, as a reader pastes
them), in a scratch working directory. A snippet that cannot run here says why in an HTML comment right above it,
``<!-- snippet: not run: REASON -->`` (e.g. it needs a GPU or a model server); it is still compiled."""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fwgym.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SKIP = re.compile(r"<!-- snippet: not run: (?P<why>[^>]+?) -->\s*\Z")


def snippets(page: str, lang: str) -> list[tuple[str, str | None]]:
    """``(code, reason it is not run or None)`` of every ``lang`` block of ``page``, in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    out = []
    for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M):
        before = SKIP.search(text[:m.start()])
        out.append((m.group(1), before.group("why") if before else None))
    return out


PY_PAGES = [p for p in PAGES if snippets(p, "python")]


def _env() -> dict:
    return {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HOME": os.environ.get("HOME", "/root"),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
            "MPLBACKEND": "Agg"}


@pytest.mark.parametrize("page", PY_PAGES)
def test_the_pages_python_snippets_run(page, tmp_path):
    blocks = snippets(page, "python")
    for code, _ in blocks:
        compile(code, page, "exec")  # every block is valid Python, run or not
    code = "\n".join(c for c, why in blocks if why is None)
    if not code.strip():
        pytest.skip(f"{page}: its python blocks are marked not run (compiled only)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=_env(),
                         timeout=900)
    assert out.returncode == 0, f"{page}:\n{out.stderr[-4000:]}"


def test_not_run_snippets_are_few_and_say_why():
    skipped = [(p, why) for p in PAGES for _, why in snippets(p, "python") if why is not None]
    assert len(skipped) <= 3, skipped
    assert all(len(why.split()) >= 3 for _, why in skipped), skipped


def _fwgym_commands(block: str) -> list[str]:
    """The ``fwgym ...`` command lines of a shell block (continuations joined, comments and other commands of a
    ``&&`` / ``;`` / ``|`` chain dropped, leading ``VAR=value`` assignments dropped, synopsis brackets such as
    ``[--suite decision|context]`` dropped: what remains must parse)."""
    joined = re.sub(r"\\\n\s*", " ", block)
    while re.search(r"\[[^\[\]]*\]", joined):
        joined = re.sub(r"\s?\[[^\[\]]*\]", "", joined)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        for part in re.split(r"&&|;|\|\|?", line):
            part = re.split(r"\s\d?>", part)[0]  # a redirection ends the command
            words = part.split()
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                words.pop(0)
            if words and words[0] == "fwgym":
                out.append(" ".join(words))
    return out


SHELL = [(p, cmd) for p in PAGES for code, _ in snippets(p, "bash") for cmd in _fwgym_commands(code)]


def test_the_docs_show_commands():
    assert len(SHELL) >= 40 and {c.split()[1] for _, c in SHELL} >= {"evaluate", "leaderboard", "report", "cases"}


@pytest.mark.parametrize("page, command", SHELL, ids=[f"{p}:{c[:60]}" for p, c in SHELL])
def test_the_pages_fwgym_commands_parse(page, command, capsys):
    argv = shlex.split(command)[1:]
    parser = build_parser()
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:  # --help / --version
            return
        pytest.fail(f"{page}: `{command}` is refused by the parser: {capsys.readouterr().err.strip()[-500:]}")
    assert callable(ns.func)


def _limit_claims(page: str) -> list[tuple[str, str]]:
    """``(fwgym evaluate command with --limit, its comment)`` of the page's bash blocks: the comment at the end of the
    command's line and the comment line right above it."""
    out = []
    for code, _ in snippets(page, "bash"):
        lines = re.sub(r"\\\n\s*", " ", code).splitlines()
        for i, line in enumerate(lines):
            cmd, _, comment = line.partition("#")
            if cmd.strip().startswith("fwgym evaluate") and " --limit " in cmd:
                above = lines[i - 1].strip() if i and lines[i - 1].strip().startswith("#") else ""
                out.append((cmd.strip(), f"{above} {comment}"))
    return out


def test_limit_is_said_per_domain_and_the_episode_counts_are_true():
    """``--limit N`` selects N cases of each domain: the README says so beside each command that uses it, and every
    page's ``N episodes`` comment is what the command plays (cases selected x policies)."""
    from fwgym.evaluation.runner import select_cases

    readme = _limit_claims("README.md")
    assert len(readme) >= 2 and all("per domain" in c for _, c in readme), readme
    checked = 0
    for page in PAGES:
        for cmd, comment in _limit_claims(page):
            if m := re.search(r"(\d+) episodes", comment):
                ns = build_parser().parse_args(shlex.split(cmd)[1:])
                per_policy = len(select_cases(ns.split, ns.domain, ns.lead, ns.limit))
                assert per_policy * len(ns.policies or [None]) == int(m.group(1)), (page, cmd, comment)
                checked += 1
    assert checked >= 3


def test_the_mcp_client_example_shows_the_commands_of_its_page():
    """examples/mcp_client.py's docstring and docs/mcp.md show the same commands, and the baseline run covers the
    client's cases: the same split, domain and number of cases per domain."""
    import ast
    import argparse

    doc = ast.get_docstring(ast.parse((ROOT / "examples" / "mcp_client.py").read_text(encoding="utf-8")))
    shown = [ln.strip() for ln in doc.splitlines() if ln.strip().startswith(("python examples/", "fwgym "))]
    page = next(code for code, _ in snippets("docs/mcp.md", "bash") if "examples/mcp_client.py" in code)
    assert shown == [ln.strip() for ln in page.splitlines() if ln.strip()] and len(shown) == 3
    client = argparse.ArgumentParser()
    for opt in ("--split", "--domain", "--cases", "--out"):
        client.add_argument(opt)
    c = client.parse_args(shlex.split(shown[0])[2:])
    base = build_parser().parse_args(shlex.split(shown[1])[1:])
    assert (base.split, base.domain, base.limit) == (c.split, [c.domain], int(c.cases)) == ("dev", ["electricity"], 5)
    assert shlex.split(shown[2])[1:4] == ["leaderboard", base.out, c.out]


FAULT_PAGES = [p for p in PAGES if any("--fail-every" in code for code, _ in snippets(p, "bash"))]


@pytest.mark.parametrize("page", FAULT_PAGES)
def test_the_scripted_server_sequence_finishes_with_one_resume(page, tmp_path):
    """The LLM try-out of README.md and docs/llm.md as written: the scripted server with ``--fail-every 7``, the
    run (exit 1: server faults are harness errors), ONE ``--resume`` (exit 0: complete; before, the still-failing
    server failed a replayed episode again and a second resume was needed), then the commands after it."""
    block = next(c for c, _ in snippets(page, "bash") if "--fail-every" in c)
    code = next(par for par in block.split("\n\n") if "--fail-every" in par)  # its paragraph (then other servers)
    lines = [ln.partition(" #")[0].strip() for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    server = shlex.split(lines[0].rstrip("& "))
    assert server[:3] == ["python", "-m", "fwgym.testing.chat_server"] and "8000" in server, lines[0]
    server[server.index("8000")] = "0"
    proc = subprocess.Popen([sys.executable, *server[1:]], stdout=subprocess.PIPE, text=True, cwd=tmp_path, env=_env())
    try:
        url = proc.stdout.readline().split(" at ")[1].split()[0]
        codes = []
        for line in lines[1:]:
            argv = shlex.split(line.replace("http://127.0.0.1:8000/v1", url))
            assert argv[0] == "fwgym", line
            out = subprocess.run([sys.executable, "-m", "fwgym", *argv[1:]], capture_output=True, text=True,
                                 cwd=tmp_path, env=_env(), timeout=600)
            codes.append((argv[1], "--resume" in argv, out.returncode))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert codes[:2] == [("evaluate", False, 1), ("evaluate", True, 0)] and all(c == 0 for *_, c in codes[1:]), codes
    import json

    m = json.loads((tmp_path / "runs" / "try" / "manifest.json").read_text())
    assert m["status"] == "complete" and m["history"]["sessions"] == 2 and m["history"]["superseded"]


@pytest.mark.skipif(shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
                    reason="mkdocs is not installed (the docs extra)")
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).parent / "mkdocs")
    out = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")], capture_output=True,
                         text=True, cwd=ROOT, env={**_env(), "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "fwgym evaluate" in cli and "--agent-timeout" in cli  # the generated reference is on the page
