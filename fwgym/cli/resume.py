"""The checks of ``fwgym evaluate --resume DIR``: a run is finished only with its own settings and agent code.

:func:`check_resume` compares the run's manifest with what this session would run (settings, the sha256 of
the agent's files: :func:`agent_sources`, :func:`changed_sources`).
"""
from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["check_resume", "agent_sources", "changed_sources"]


def check_resume(out: Path, manifest: dict, settings: dict, env: dict) -> None:
    """Refuse ``fwgym evaluate --resume`` when the run's settings (``manifest``'s) differ from this session's
    (``settings``), or an agent's file changed; note a changed fwgym checkout (``env["git"]``) on stderr.

    Raises:
        ValueError: the settings differ, or an agent's source file changed (the message names it).
    """
    from fwgym.evaluation.manifest import settings_differences

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
    old_git = (manifest.get("environment") or {}).get("git")
    if old_git != env["git"]:
        print(f"note: the fwgym checkout changed since the run started ({old_git} -> {env['git']}); recorded "
              "in the manifest's sessions", file=sys.stderr)


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
