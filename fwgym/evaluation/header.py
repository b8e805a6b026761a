"""The header of every leaderboard artefact, and its marks: ONE writer for ``fwgym evaluate``'s printed
table, a run directory's ``leaderboard.md`` and ``leaderboard.csv``, ``fwgym leaderboard`` in every
format (table, Markdown, CSV, LaTeX, JSON) and the figures (``fwgym plot``).

A header (:class:`Header`) says what a table is: the suite and its score formula, policies x cases with
the coverage of the split, what checked the records, the paired-bootstrap intervals, and its **marks**
(:class:`Mark`): what does NOT vouch for the numbers, as data, so each producer adds its own and every
output shows them the same way:

* ``PARTIAL`` (:func:`partial_mark`): the cases are not the whole split (a ``--limit`` run, a lead or
  domain filter, ``--common-cases``);
* ``NOT HASH-CHECKED`` (:func:`not_hash_checked_mark`): records of a source without a run manifest (re-scored
  from their submissions, not checked against the run's hashes, count and statuses);
* ``EXPOSED`` (:func:`exposed_mark`): records replayed after a prompt holding their target was sent
  (:mod:`fwgym.evaluation.schedule`);
* ``RETRIED AFTER SPEND`` (:func:`retried_mark`): records scored after unscored attempts of their case that made
  calls or spent credits (what those bought may have reached the scored attempt for free);
* ``MIXED CODE`` (:func:`mixed_code_mark`): records played by sessions that ran different versions of fwgym's own
  code (``fwgym evaluate --resume --allow-code-change``);
* ``W=<w>`` (:func:`loss_weight_mark`): S re-scored with a loss weight other than the protocol's 1/2;
* other producers' marks are :class:`Mark` objects too, passed in the ``marks`` list.

The per-row marks of :mod:`fwgym.evaluation.marks` (what vouches for each row: re-scored, hash-checked,
replayed, isolation, in-process, exposed, retried after spend, code versions;
:func:`fwgym.evaluation.marks.row_marks`) are the data the ``NOT HASH-CHECKED``, ``EXPOSED``, ``RETRIED AFTER
SPEND`` and ``MIXED CODE`` marks are made of (:func:`trust_marks`, texts from
:func:`fwgym.evaluation.marks.format_marks`) and travel with the header (:attr:`Header.row_marks`).

How a mark shows: its code in the title (``fwgym leaderboard (PARTIAL, NOT HASH-CHECKED): ...``) and its text
in the header line; in CSV and JSON rows (no header line) as columns on every row (:func:`mark_rows`: the
:data:`~fwgym.evaluation.marks.MARK_COLUMNS` of the row marks, then ``partial`` and each
:attr:`Mark.column`, ``true`` / ``false``); in JSON as ``"marks"`` too; in LaTeX as ``%`` comments; in a
figure drawn at the top in dark red and written to the file's metadata (:meth:`Header.figure_mark`).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from fwgym.evaluation.marks import MARK_COLUMNS, format_marks, mark_columns
from fwgym.evaluation.records import coverage

__all__ = ["Mark", "Header", "partial_mark", "not_hash_checked_mark", "exposed_mark", "trust_marks",
           "loss_weight_mark", "PROTOCOL_LOSS_WEIGHT", "NOT_HASH_CHECKED", "result_set_marks", "make_header",
           "single_cluster_notes", "retried_mark", "isolation_marks", "mixed_code_mark",
           "mark_rows"]

#: the protocol's loss weight W of ``S = W*R + (1 - W)*c/B`` (FWBench protocol §5.2: S = (R + c/B)/2)
PROTOCOL_LOSS_WEIGHT = 0.5
#: the code of the mark of records without a run manifest (:func:`not_hash_checked_mark`)
NOT_HASH_CHECKED = "NOT HASH-CHECKED"


@dataclass(frozen=True)
class Mark:
    """A mark on a leaderboard artefact.

    Attributes:
        code: the short name shown in titles (``"PARTIAL"``, ``"NOT HASH-CHECKED"``), upper case by convention.
        text: one sentence for the header line and file metadata (it should start with ``code``).
        short: a few words for a figure's title line (default: ``text``).
        policies: the rows it applies to (``None``: every row).
        column: the CSV/JSON column that carries it per row (``None``: none).
        column_when_marked: the column's value on a marked row (the other rows get the opposite), e.g.
            ``True`` for the ``partial`` column of the ``PARTIAL`` mark.
    """

    code: str
    text: str
    short: str | None = None
    policies: frozenset[str] | None = None
    column: str | None = None
    column_when_marked: bool = True

    def applies_to(self, policy: str) -> bool:
        """Whether the mark applies to the row of ``policy``."""
        return self.policies is None or policy in self.policies

    def as_json(self) -> dict:
        """``{"code", "text", "policies"}`` (``policies`` ``None``: every row)."""
        return {"code": self.code, "text": self.text,
                "policies": None if self.policies is None else sorted(self.policies)}


def partial_mark(cov: Mapping) -> Mark | None:
    """``PARTIAL`` for a coverage (:func:`fwgym.evaluation.records.coverage`) that is not the whole split,
    else ``None``; column ``partial``."""
    if cov.get("complete", True):
        return None
    return Mark("PARTIAL", f"PARTIAL: {cov['cases']} of the {cov['index_cases']} cases of the split, not the whole "
                           "split (aggregates weight the cases present)",
                short=f"not the whole split ({cov['cases']} of {cov['index_cases']} cases)", column="partial")


def not_hash_checked_mark(policies: Iterable[str], text: str | None = None) -> Mark | None:
    """``NOT HASH-CHECKED`` for the rows of ``policies`` (records of sources without a run manifest; ``text``:
    the note of :func:`fwgym.evaluation.load_results`), else ``None``. Its column is the row marks'
    ``hash_checked`` (:func:`mark_rows`: ``false`` on those rows)."""
    pols = frozenset(policies)
    if not pols:
        return None
    return Mark(NOT_HASH_CHECKED, text or f"{NOT_HASH_CHECKED}: {', '.join(map(repr, sorted(pols)))} (no run manifest)",
                short="no run manifest", policies=pols)


def exposed_mark(row_marks: Mapping[str, Mapping], n_records: Mapping[str, int] | None = None) -> Mark | None:
    """``EXPOSED`` for the rows whose row marks (:func:`fwgym.evaluation.marks.row_marks`) count exposed
    records (replayed after a prompt holding their target was sent), its text
    :func:`fwgym.evaluation.marks.format_marks`'s; else ``None``."""
    pols = frozenset(p for p, m in row_marks.items() if m.get("exposed"))
    if not pols:
        return None
    text = next(x for x in format_marks({p: row_marks[p] for p in pols}, n_records) if x.startswith("EXPOSED"))
    return Mark("EXPOSED", text, short="records replayed after their target was sent", policies=pols)


def retried_mark(row_marks: Mapping[str, Mapping]) -> Mark | None:
    """``RETRIED AFTER SPEND`` for the rows whose row marks count unscored attempts that made calls or spent credits
    before a retry (:func:`fwgym.evaluation.rundir.superseded_history`), its text
    :func:`fwgym.evaluation.marks.format_marks`'s; else ``None``."""
    pols = frozenset(p for p, m in row_marks.items() if m.get("retried_after_spend"))
    if not pols:
        return None
    text = next(x for x in format_marks({p: row_marks[p] for p in pols}) if x.startswith("RETRIED AFTER SPEND"))
    return Mark("RETRIED AFTER SPEND", text, short="scored after unscored attempts that bought", policies=pols)


def mixed_code_mark(row_marks: Mapping[str, Mapping]) -> Mark | None:
    """``MIXED CODE`` for the rows whose records the row marks say were played by two or more code versions of
    fwgym (``code_versions``, :func:`fwgym.evaluation.marks.row_marks`), its text
    :func:`fwgym.evaluation.marks.format_marks`'s; else ``None``."""
    pols = frozenset(p for p, m in row_marks.items() if (m.get("code_versions") or 0) > 1)
    if not pols:
        return None
    text = next(x for x in format_marks({p: row_marks[p] for p in pols}) if x.startswith("MIXED CODE"))
    n = max(int(row_marks[p]["code_versions"]) for p in pols)
    return Mark("MIXED CODE", text, short=f"sessions ran {n} code versions", policies=pols)


def isolation_marks(row_marks: Mapping[str, Mapping]) -> list[Mark]:
    """``IN-PROCESS`` for rows whose agent's own code ran in the evaluating process (it could read the target: such a
    row measures nothing the name says unless the code is trusted) and ``NO SANDBOX`` for rows of a worker without a
    sandbox; texts :func:`fwgym.evaluation.marks.format_marks`'s. fwgym's policies, its LLM harness and external
    clients (MCP, inspect) get neither."""
    out = []
    for code, key, short in (("IN-PROCESS", "in_process", "agent code in the evaluating process"),
                             ("NO SANDBOX", "no_sandbox", "agent worker without a sandbox")):
        pols = frozenset(p for p, m in row_marks.items()
                         if (m.get("in_process") if key == "in_process" else m.get("isolation") == "process"))
        if pols:
            text = next(x for x in format_marks({p: row_marks[p] for p in pols}) if x.startswith(code))
            out.append(Mark(code, text, short=short, policies=pols))
    return out


def trust_marks(row_marks: Mapping[str, Mapping], n_records: Mapping[str, int] | None = None,
                text: str | None = None) -> list[Mark]:
    """The header marks of per-row marks (:mod:`fwgym.evaluation.marks`): ``EXPOSED``
    (:func:`exposed_mark`), ``RETRIED AFTER SPEND`` (:func:`retried_mark`), ``MIXED CODE`` (:func:`mixed_code_mark`) and ``NOT HASH-CHECKED`` for the rows not hash-checked (:func:`not_hash_checked_mark`,
    ``text`` its text), ``IN-PROCESS`` and ``NO SANDBOX`` (:func:`isolation_marks`); what else the row marks say
    (isolation, replayed) travels as columns."""
    unchecked = [p for p, m in row_marks.items() if not m.get("hash_checked")]
    return [m for m in (exposed_mark(row_marks, n_records), retried_mark(row_marks), mixed_code_mark(row_marks),
                        *isolation_marks(row_marks), not_hash_checked_mark(unchecked, text)) if m is not None]


def loss_weight_mark(loss_weight: float | None) -> Mark | None:
    """``W=<w>`` when S was re-scored with a loss weight other than the protocol's (``None`` or 0.5: none)."""
    if loss_weight is None or loss_weight == PROTOCOL_LOSS_WEIGHT:
        return None
    w = float(loss_weight)
    return Mark(f"W={w:g}", f"W={w:g}: S re-scored from the saved decisions with loss weight W = {w:g}, "
                            f"S = {w:g}·R + {1 - w:g}·c/B (the protocol's W is {PROTOCOL_LOSS_WEIGHT:g})",
                short=f"S = {w:g}·R + {1 - w:g}·c/B, not the protocol's S")


def result_set_marks(rs: Any) -> list[Mark]:
    """The marks of a :class:`fwgym.evaluation.ResultSet`: :func:`trust_marks` of its row marks
    (:attr:`~fwgym.evaluation.ResultSet.marks`; ``NOT HASH-CHECKED`` with the note that names the sources
    without a manifest)."""
    counts: dict[str, int] = {}
    for r in rs.records:
        counts[r["policy"]] = counts.get(r["policy"], 0) + 1
    note = next((n for n in rs.notes if n.startswith(NOT_HASH_CHECKED)), None) if rs.unverified else None
    return trust_marks(rs.marks, counts, note)


@dataclass
class Header:
    """What a leaderboard table is (see the module docstring); made by :func:`make_header`.

    Attributes:
        title: ``"fwgym leaderboard"`` (or another producer's name).
        suite, formula: the suite and its score formula (:attr:`fwgym.core.metrics.SuiteMetric.formula`).
        n_policies, n_cases: rows and cases. by_domain: ``{"split/domain": (cases, of)}``.
        n_records: records aggregated (``None``: not said). checked: what checked them (``None``: not said).
        marks: :class:`Mark` objects, in order. notes: further facts of the merge (mixed versions, ...).
        reference, n_boot, seed: the paired bootstrap of the interval columns (``reference`` ``None``: none).
        facts: further facts of the producer, shown after the counts (e.g. the episodes played and the time).
        contrast: what the intervals are of (default ``"policy - <reference>"``; e.g. ``"B - A"``).
        row_unit: what a row is, singular and plural (default ``("policy", "policies")``).
        row_marks: ``{policy: marks}`` of :func:`fwgym.evaluation.marks.row_marks` (``None``: not known; the
            columns of :func:`mark_rows` then follow the ``NOT HASH-CHECKED`` mark).
    """

    title: str
    suite: str
    formula: str
    n_policies: int
    n_cases: int
    by_domain: Mapping[str, Sequence[int]]
    n_records: int | None = None
    checked: str | None = None
    marks: list[Mark] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reference: str | None = None
    n_boot: int | None = None
    seed: int | None = None
    facts: list[str] = field(default_factory=list)
    contrast: str | None = None
    row_unit: tuple[str, str] = ("policy", "policies")
    row_marks: Mapping[str, Mapping] | None = None

    @property
    def codes(self) -> list[str]:
        """The marks' codes, in order (without repeats)."""
        return list(dict.fromkeys(m.code for m in self.marks))

    def mark(self, code: str) -> Mark | None:
        """The mark with this code, or ``None``."""
        return next((m for m in self.marks if m.code == code), None)

    def _parts(self) -> list[str]:
        cov = ", ".join(f"{k} {a}/{b}" for k, (a, b) in self.by_domain.items())
        counts = (f"{self.n_policies} {self.row_unit[self.n_policies != 1]} x {self.n_cases} "
                  f"{'case' if self.n_cases == 1 else 'cases'}" + (f" ({cov})" if cov else ""))
        parts = [f"suite={self.suite} ({self.formula})", counts]
        parts += self.facts
        if self.n_records is not None:
            parts.append(f"{self.n_records} records" + (f" {self.checked}" if self.checked else ""))
        parts += self.all_notes()
        if self.reference or self.contrast:
            parts.append(f"intervals: paired series-cluster bootstrap, {self.n_boot:,} draws, seed {self.seed}, "
                         f"{self.contrast or f'policy - {self.reference}'}")
        return parts

    def all_notes(self) -> list[str]:
        """The marks' texts (each once), then the notes other than the marks' own (a note that starts with a
        mark's code and a colon, e.g. :func:`fwgym.evaluation.load_results`' ``NOT HASH-CHECKED: ...``, is
        said by the mark)."""
        out = list(dict.fromkeys(m.text for m in self.marks))
        codes = tuple(f"{c}:" for c in self.codes)
        return out + [n for n in self.notes if n not in out and not (codes and n.startswith(codes))]

    def line(self, bold: str = "") -> str:
        """The header as one line: ``<title> (<marks>): <suite and formula>, <policies x cases (coverage)>;
        <facts>; <records checked>; <marks' and further notes>; <intervals>`` (``bold``: put around each
        mark's code in the title, e.g. ``"**"`` in Markdown)."""
        codes = [f"{bold}{c}{bold}" for c in self.codes]
        head = self.title + (f" ({', '.join(codes)})" if codes else "")
        parts = self._parts()
        return f"{head}: {parts[0]}, " + "; ".join(parts[1:])

    def lines(self, width: int | None = None) -> list[str]:
        """The header wrapped at ``width`` characters (continuation lines indented by 2), or as one line."""
        text = self.line()
        if width is None or len(text) <= width:
            return [text]
        return textwrap.wrap(text, width=max(width, 20), subsequent_indent="  ", break_on_hyphens=False,
                             break_long_words=False)

    def markdown(self) -> str:
        """The header as a Markdown paragraph, its marks' codes in bold in the title."""
        return self.line(bold="**")

    def latex_comment(self) -> str:
        """The header as ``%`` lines for a LaTeX table (wrapped at 100 characters)."""
        return "\n".join(self.lines(100))

    def json_fields(self) -> dict:
        """``{"header", "marks": [...], "notes"}`` for a JSON document."""
        return {"header": self.line(), "marks": [m.as_json() for m in self.marks], "notes": self.all_notes()}

    def csv_rows(self, rows: Sequence[Mapping]) -> list[dict]:
        """``rows`` with the columns of the header's marks and row marks (:func:`mark_rows`)."""
        return mark_rows(rows, self.marks, self.row_marks)

    def figure_mark(self) -> tuple[str | None, str | None]:
        """``(mark, description)`` for :func:`fwgym.plots.save_figure`: the marks' codes and short texts
        (``"NOT HASH-CHECKED: ...; PARTIAL: not the whole split (8 of 1259 cases)"``, ASCII for PDF metadata) and their full texts;
        ``(None, None)`` without marks."""
        if not self.marks:
            return None, None
        seen: dict[str, Mark] = {}
        for m in self.marks:
            seen.setdefault(m.code, m)
        mark = "; ".join(f"{m.code}: {m.short or m.text}" for m in seen.values())
        return mark, " ".join(m.text for m in seen.values())


def mark_rows(rows: Sequence[Mapping], marks: Iterable[Mark], row_marks: Mapping[str, Mapping] | None = None
              ) -> list[dict]:
    """Rows with columns saying what vouches for them, for outputs without a header line (CSV, JSON rows):
    the :data:`~fwgym.evaluation.marks.MARK_COLUMNS` of their policy's row marks (``row_marks``; a policy
    without any: re-scored, hash-checked unless the ``NOT HASH-CHECKED`` mark applies to it, not replayed,
    isolation ``unknown``), then ``partial`` (always there) and one column per other mark with a
    :attr:`Mark.column` (``bool`` on every row: the mark's ``column_when_marked`` on the rows it applies to,
    the opposite elsewhere)."""
    marks = list(marks)
    unchecked = next((m for m in marks if m.code == NOT_HASH_CHECKED), None)
    given = dict(row_marks or {})
    for r in rows:
        p = r["policy"]
        if p not in given:
            given[p] = {"rescored": True, "hash_checked": unchecked is None or not unchecked.applies_to(p),
                        "replayed": False, "isolation": "unknown", "in_process": False, "exposed": 0,
                        "retried_after_spend": 0, "code_versions": 0}
        elif unchecked is not None and unchecked.applies_to(p):
            given[p] = {**given[p], "hash_checked": False}
    columns: dict[str, list[Mark]] = {"partial": []}
    for m in marks:
        if m.column and m.column not in MARK_COLUMNS:
            columns.setdefault(m.column, []).append(m)
    out = []
    for row in mark_columns(rows, given):
        for col, ms in columns.items():
            hit = next((m for m in ms if m.applies_to(row["policy"])), None)
            if hit is not None:
                row[col] = bool(hit.column_when_marked)
            else:
                row[col] = (not ms[0].column_when_marked) if ms else False
        out.append(row)
    return out


def single_cluster_notes(records: Sequence[Mapping]) -> list[str]:
    """A caution for each domain whose records hold one series (one bootstrap cluster): the paired series-cluster
    bootstrap (:class:`fwgym.evaluation.bootstrap.ClusterBootstrap`) draws series within a domain, so such a domain
    adds no variation and an interval over such domains alone is 0 wide, which is no certainty (``[]`` when every
    domain has at least two series)."""
    series: dict[str, set] = {}
    for r in records:
        series.setdefault(r["domain"], set()).add(r["series_id"])
    single = sorted(d for d, s in series.items() if len(s) < 2)
    if not single:
        return []
    every = len(single) == len(series)
    return [f"CAUTION: {', '.join(single)} {'has' if len(single) == 1 else 'have'} one series: the series-cluster "
            "bootstrap cannot resample it, so the intervals leave its variation out"
            + (" (they are 0 wide here, which is no certainty)" if every else "")]


def make_header(records: Sequence[Mapping], *, suite: str, formula: str, title: str = "fwgym leaderboard",
                marks: Iterable[Mark | None] = (), notes: Iterable[str] = (), checked: str | None = None,
                reference: str | None = None, n_boot: int | None = None, seed: int | None = None,
                facts: Iterable[str] = (), n_records: int | None = None, contrast: str | None = None,
                row_marks: Mapping[str, Mapping] | None = None) -> Header:
    """The :class:`Header` of a table of ``records`` (one or more policies on the same cases).

    The coverage of the split is the first policy's (:func:`fwgym.evaluation.records.coverage`); a
    ``PARTIAL`` mark is added after ``marks`` when it is not the whole split. ``marks`` may hold ``None`` (skipped).
    ``row_marks`` (:func:`fwgym.evaluation.marks.row_marks`) are kept for :func:`mark_rows`; the header marks
    they imply are the caller's (:func:`trust_marks`, :func:`result_set_marks`).

    Raises:
        ValueError: no records.
    """
    if not records:
        raise ValueError("no result records")
    policies = list(dict.fromkeys(r["policy"] for r in records))
    cov = coverage([r for r in records if r["policy"] == policies[0]])
    all_marks = [m for m in (*marks, partial_mark(cov)) if m is not None]
    if reference or contrast:
        notes = [*notes, *single_cluster_notes([r for r in records if r["policy"] == policies[0]])]
    return Header(title=title, suite=suite, formula=formula, n_policies=len(policies), n_cases=cov["cases"],
                  by_domain={k: tuple(v) for k, v in cov["by_domain"].items()},
                  n_records=len(records) if n_records is None else n_records, checked=checked, marks=all_marks,
                  notes=list(notes), reference=reference, n_boot=n_boot, seed=seed, facts=list(facts),
                  contrast=contrast, row_marks=row_marks)
