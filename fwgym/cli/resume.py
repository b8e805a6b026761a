"""The checks of ``fwgym evaluate --resume DIR``: a run is finished only with its own settings, agent code and
fwgym code.

:func:`check_resume` compares the run's manifest with what this session would run (settings, the sha256 of
the agent's files: :func:`agent_sources`, :func:`changed_sources`; the code version of fwgym itself:
:func:`fwgym.evaluation.manifest.code_changed`).
"""
from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["check_resume", "agent_sources", "changed_sources"]


def check_resume(out: Path, manifest: dict, settings: dict, env: dict, allow_code_change: bool = False) -> None:
    """Refuse ``fwgym evaluate --resume`` when the run's settings (``manifest``'s) differ from this session's
    (``settings``), an agent's file changed, or fwgym's own code (``env``: :func:`fwgym.evaluation.manifest.environment`)
    is not the code the run's first session ran, unless ``allow_code_change`` (then the rows are marked ``MIXED
    CODE``: :mod:`fwgym.evaluation.marks`); note on stderr a changed checkout of the same code, or one whose code
    cannot be compared.

    Raises:
        ValueError: the settings differ, an agent's source file changed, or fwgym's code changed (without
            ``allow_code_change``); the message names what changed.
    """
    from fwgym.evaluation.manifest import code_changed, settings_differences

    old = manifest.get("settings") or {}
    changed = changed_sources(old.get("agents"), settings.get("agents"))
    if changed:
        file, was, now = changed[0]
        raise ValueError(f"--resume {out}: the agent's file {file} changed since the run started (sha256 {was[:12]} "
                         f"-> {now[:12]}); its episodes so far were played by the other version, so the row would mix "
                         "two versions of the agent (restore the file, or start a new run)")
    diff = settings_differences(old, settings)
    if diff:
        raise ValueError(f"--resume {out}: the run's settings differ from what this fwgym would run now, so the "
                         "episodes would not be comparable (start a new run): " + "; ".join(diff))
    sessions = manifest.get("sessions") or []
    first = (sessions[0].get("environment") if sessions else None) or manifest.get("environment") or {}
    code = code_changed(first, env)
    if code and not allow_code_change:
        raise ValueError(f"--resume {out}: fwgym's own code changed since the run started ({_code_text(first)} -> "
                         f"{_code_text(env)}), so its rows would mix episodes of two code versions (env, tools, "
                         "scorer); restore the code the run started with, start a new run, or pass "
                         "--allow-code-change (the leaderboard then marks the rows MIXED CODE)")
    if code:
        print(f"note: fwgym's own code changed since the run started ({_code_text(first)} -> {_code_text(env)}); "
              "--allow-code-change: the rows this session plays are marked MIXED CODE", file=sys.stderr)
    elif code is None:
        print(f"note: whether fwgym's own code changed since the run started cannot be told ({_code_text(first)} -> "
              f"{_code_text(env)}); recorded in the manifest's sessions", file=sys.stderr)
    elif (first.get("git") or {}).get("commit") != (env.get("git") or {}).get("commit"):
        print(f"note: the fwgym checkout changed since the run started ({_code_text(first)} -> {_code_text(env)}), "
              "its package files did not; recorded in the manifest's sessions", file=sys.stderr)


def _code_text(env: dict) -> str:
    """The code version of an environment in a few words: ``code 1a2b3c4d5e6f, git 0123abcd (dirty, diff 9f8e7d6c)``."""
    git = env.get("git") or {}
    parts = [f"code {str(env['code_sha256'])[:12]}"] if env.get("code_sha256") else []
    if git.get("commit"):
        dirty = f" (dirty, diff {str(git['diff_sha256'])[:8]})" if git.get("diff_sha256") else (
            " (dirty)" if git.get("dirty") else "")
        parts.append(f"git {str(git['commit'])[:8]}{dirty}")
    return ", ".join(parts) or "no code fingerprint"


def agent_sources(description) -> dict[str, str]:
    """``{file: sha256}`` of the ``source`` entries (``{"file", "sha256"}``: an agent's code, e.g. of
    :func:`fwgym.cli.agent_kinds.python.agent_source`) anywhere in an agent description of the manifest."""
    out: dict[str, str] = {}
    if isinstance(description, dict):
        for k, v in description.items():
            if k == "source" and isinstance(v, dict) and isinstance(v.get("file"), str) and isinstance(
                    v.get("sha256"), str):
                out[v["file"]] = v["sha256"]
                modules = v.get("modules")  # the agent's own modules (fwgym.cli.agent_kinds.python.own_modules)
                if isinstance(modules, dict):
                    out.update({f: h for f, h in modules.items() if isinstance(f, str) and isinstance(h, str)})
            else:
                out.update(agent_sources(v))
    elif isinstance(description, list):
        for v in description:
            out.update(agent_sources(v))
    return out


def changed_sources(old_agents, new_agents) -> list[tuple[str, str, str]]:
    """``[(file, sha256 the run recorded, sha256 now)]`` for the agent files of both descriptions whose
    bytes changed."""
    was, now = agent_sources(old_agents), agent_sources(new_agents)
    return [(f, was[f], now[f]) for f in sorted(was) if f in now and now[f] != was[f]]
