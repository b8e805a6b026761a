"""Run-level options of ``fwgym evaluate``: ``--label KEY=VALUE`` (what the run is, in its manifest) and
``--repeat K`` (K seeded copies of an LLM agent, one session of the run directory per repeat); the sessions
that play the run (:func:`play_sessions`) and its closing leaderboard (:func:`print_run_leaderboard`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

__all__ = ["label_arg", "labels_of", "repeated_agents", "play_sessions", "print_run_leaderboard"]


def label_arg(value: str) -> tuple[str, str]:
    """``--label KEY=VALUE``: ``(key, value)``; the key of letters, digits and ``_ . -``, the value printable text.

    Raises:
        argparse.ArgumentTypeError: no ``=``, an empty or malformed key, an empty value or one with control
            characters.
    """
    import re

    key, eq, val = value.partition("=")
    if not eq or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", key.strip()):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with a key of letters, digits and _ . - (got {value!r})")
    if not val.strip() or len(val) > 200 or not val.isprintable():
        raise argparse.ArgumentTypeError(f"the value of label {key!r} must be printable text of 1 to 200 characters")
    return key.strip(), val.strip()


def labels_of(pairs) -> dict[str, str]:
    """The ``--label`` pairs as ``{key: value}`` in their order.

    Raises:
        ValueError: a key given twice.
    """
    out: dict[str, str] = {}
    for key, val in pairs:
        if key in out:
            raise ValueError(f"--label {key} is given twice ({out[key]!r} and {val!r})")
        out[key] = val
    return out


def repeated_agents(agent, k: int) -> list:
    """``[agent]`` for ``k == 1``; else ``k`` copies of an LLM agent factory named ``<name>#1 .. <name>#k``
    with sampling seeds ``S .. S + k - 1`` (``S``: its seed, else 0).

    Raises:
        ValueError: ``k > 1`` for an agent that is not an LLM agent factory (its sampling cannot be seeded).
    """
    from fwgym.agents.factory import LLMAgentFactory
    from fwgym.evaluation.runner import policy_label

    if k <= 1:
        return [agent]
    if not isinstance(agent, LLMAgentFactory):
        raise ValueError("--repeat K needs an LLM agent (--agent openai or transformers): each repeat samples with its "
                         "own seed")
    name, seed = policy_label(agent), agent.get("seed")
    base = 0 if seed is None else int(seed)
    return [LLMAgentFactory({**agent, "name": f"{name}#{i}", "seed": base + i - 1}) for i in range(1, k + 1)]


def play_sessions(args, box: list, out: Path, policies: list, labels: list, case_ids: list, session: dict,
                   run_kwargs: dict, settings: dict, model_revisions, resume: bool,
                   end_session: Callable) -> tuple[list, int]:
    """Play the run's episodes into the run directory ``box[0]``: in one session, or, for a new run of
    ``--repeat K``, one session per repeat (repeat 1 with the other policies; ``box[0]`` is then each
    session's directory object). Returns the records and the episodes played before the last session
    (whose count ``end_session``, the caller's end of a session, gives)."""
    from fwgym.evaluation import evaluate
    from fwgym.evaluation.rundir import RunDir
    from fwgym.evaluation.verify import settings_of

    k = int(settings.get("repeat", 1))
    plan: list[tuple[list, list, int | None]]
    if k > 1 and not resume:  # the agent's copies come first (repeated_agents)
        plan = [(policies[:1] + policies[k:], labels[:1] + labels[k:], 1)]
        plan += [([policies[i]], [labels[i]], i + 1) for i in range(1, k)]
    else:
        plan = [(policies, labels, None)]
    records: dict = {}
    done: list[str] = []
    played = 0
    for n, (pols, labs, repeat) in enumerate(plan):
        run = box[0]
        if n:
            end_session(run, [(lab, c) for lab in done for c in case_ids], None, model_revisions, settings)
            played += run.current_session["episodes"]
            run.close()
            run = box[0] = RunDir.resume(out, settings_of({"settings": settings}))
            run.begin()
            run.current_session.update({k_: v for k_, v in session.items()
                                        if k_ not in ("session", "started", "ended", "status", "episodes")})
        if repeat is not None:
            run.current_session["repeat"] = repeat
            run.save()
        got = evaluate(pols, split=args.split, domains=args.domain, lead=args.lead, limit=args.limit,
                       workers=args.workers, progress=not args.no_progress, env_kwargs=run_kwargs,
                       backend=args.backend, ray_address=args.ray_address, concurrency=args.concurrency,
                       run=run, preflight=False)
        records.update({(r["policy"], r["case_id"]): r for r in got})
        done += labs
    order = {lab: i for i, lab in enumerate(labels)}
    return sorted(records.values(), key=lambda r: order[r["policy"]]), played


def print_run_leaderboard(args, out: Path, records: list, ref: str | None, settings: dict, played: int, elapsed: float,
                       session: int | None, manifest: dict) -> None:
    """Write the run's leaderboard.md and .csv and print the leaderboard, under the one header
    (:mod:`fwgym.evaluation.header`; its counts are the whole run's, also after a resume; its marks those of
    the run's row marks, :func:`fwgym.evaluation.marks.row_marks`, and its run history)."""
    from fwgym.cli.progress import phase
    from fwgym.cli.tables import AUTO, TABLE, left_out_note, output_width, print_table, resolve_format
    from fwgym.evaluation import BOOT_SEED, N_BOOT, leaderboard
    from fwgym.evaluation.header import make_header, trust_marks
    from fwgym.evaluation.leaderboard import label_text, leaderboard_table, narrow_cells, write_leaderboard_files
    from fwgym.evaluation.marks import history_line, row_marks
    from fwgym.suites import suite_metric

    with phase(f"bootstrap intervals ({N_BOOT:,} draws)" if ref else "aggregates"):
        rows = leaderboard(records, reference=ref)
    metric = suite_metric(args.suite, settings.get("credit_weight") if args.suite == "forecast" else None)
    this = f"{played} episodes played in {elapsed:.1f} s" + (f" (session {session}; the others recorded before)"
                                                              if session else "")
    notes = [f"labels: {label_text(settings['labels'])}"] if settings.get("labels") else []
    notes += [x for x in (history_line(manifest),) if x]
    marks = row_marks(manifest, records)
    counts = {lab: len(settings["cases"]) for lab in settings["policies"]}
    header = make_header(records, suite=args.suite, formula=metric.formula, checked="scored by this run", notes=notes,
                         marks=trust_marks(marks, counts), reference=ref, n_boot=N_BOOT, seed=BOOT_SEED,
                         facts=[f"split {args.split}", this], row_marks=marks)
    with phase("writing leaderboard.md and leaderboard.csv"):
        write_leaderboard_files(out, rows, header, args.suite)
    fmt = resolve_format(getattr(args, "format", AUTO))
    width = output_width() if fmt == TABLE else None
    print()
    print("\n".join(header.lines(width)) if fmt == TABLE else header.markdown())
    print()
    table = leaderboard_table(rows, args.suite)
    note = left_out_note(print_table(narrow_cells(table) if width else table, fmt, width=width), width)
    if note:
        print(note)
    print(f"\nrun directory: {out}  (manifest.json, results.jsonl, leaderboard.md, leaderboard.csv"
          + (", traces.jsonl" if (out / "traces.jsonl").is_file() else "") + ")")
