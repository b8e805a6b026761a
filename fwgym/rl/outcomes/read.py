"""Reading an outcome table: :class:`OutcomeTable`, :func:`open_table`, and :func:`find_table` (what the RL envs use).

A table is checked when it is opened: the manifest's format and the sha256 of its identity and fingerprint, every
file's sha256 and row count against the manifest (:class:`~fwgym.rl.outcomes.format.TableIntegrityError`), and
the info store's parts. Then it is matched to the env that wants to read it: the same identity (else it is not this
env's table) and the same fingerprint as the running code computes (else :class:`~fwgym.rl.outcomes.format.TableStale`,
naming the fields). :func:`open_table` checks a directory once per process.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from fwgym.core.cases import TRAINING_SPLITS
from fwgym.rl.outcomes.format import (MANIFEST, TableError, TableIntegrityError, TableStale, default_root, fingerprint_diff,
                                      read_arrow, read_manifest, record_fields, table_dir, unpack_rows)
from fwgym.rl.outcomes.identity import build_command, digest
from fwgym.warn import warn_user

__all__ = ["OutcomeTable", "open_table", "find_table", "OutcomeTableHint"]

_OPEN: dict[str, "OutcomeTable"] = {}
_LOCK = threading.Lock()
_SAID: set = set()


class OutcomeTableHint(UserWarning):
    """Said once per process and table identity: no outcome table, or a stale one, so the env plays outcomes live."""


def _command_of(path: Path) -> str:
    """:func:`~fwgym.rl.outcomes.build.build_command` of the table at ``path`` from its manifest as it is (one that
    may not verify)."""
    import json

    try:
        doc = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    ident, build = doc.get("identity"), doc.get("build")
    return build_command(ident if isinstance(ident, dict) else {}, path, build.get("limit") if isinstance(build, dict) else None)


class OutcomeTable:
    """An outcome table opened for reading (see :mod:`fwgym.rl.outcomes.format` for the layout).

    Args:
        path: the table directory.

    Attributes:
        path, manifest, identity, fingerprint, digest (hex sha256 of ``manifest.json``: names this exact table);
        case_ids (list, slot order); slot (``{case_id: slot}``); menu; features; n_fixed; entries (E);
        reset_obs ``(cases, features)`` float32 (the observation of each case's reset), fixed_obs its first n_fixed; obs ``(rows, d - n_fixed)`` float32; reward ``(rows,)`` float64;
        terminated, truncated ``(rows,)`` bool; masks ``(rows, E)`` bool; infos: a read-only
        :class:`~fwgym.rl.infos.InfoStore` whose row ``r`` is table row ``r``; record ``(rows, bytes)`` uint8, one
        packed record per row, and record_fields ``{name: (byte offset, dtype, shape)}`` (obs, reward, ... are views
        of it). Arrays are read-only views of the memory-mapped files.

    Raises:
        TableError: no or a malformed manifest. TableIntegrityError: a file differs from the manifest.
    """

    def __init__(self, path: str | Path):
        import hashlib

        from fwgym.rl.infos_export import load_store

        self.path = Path(path)
        try:
            self.manifest = doc = read_manifest(self.path)
        except TableStale as exc:  # another format version: the command that rebuilds this very table
            raise TableStale(f"{exc}: {_command_of(self.path)}") from None
        self.digest = hashlib.sha256((self.path / MANIFEST).read_bytes()).hexdigest()
        self.identity, self.fingerprint = doc["identity"], doc["fingerprint"]
        layout = doc["layout"]
        self.menu, self.features = list(layout["menu"]), list(layout["features"])
        self.n_fixed, self.entries = int(layout["n_fixed"]), len(self.menu)
        try:
            cases = read_arrow(self.path / "cases.arrow", doc["files"]["cases.arrow"])
            record = read_arrow(self.path / "rows.arrow", doc["files"]["rows.arrow"]).get("record")
            pool = read_arrow(self.path / "pool.arrow", doc["files"]["pool.arrow"])
        except TableIntegrityError as exc:  # the command that rebuilds this very table
            raise TableIntegrityError(f"{exc}; the command: {_command_of(self.path)}") from None
        try:
            self.case_ids = list(cases["case_id"])
            n, R, E = len(self.case_ids), int(layout["rows"]), self.entries
            if R != 1 + n * (E + 1) or n != int(layout["cases"]) or digest(self.case_ids) != layout["cases_sha256"]:
                raise ValueError("the case list does not match the layout")
            if not isinstance(record, np.ndarray) or record.ndim != 2 or record.shape[0] != R:
                raise ValueError("rows.arrow has no record column of one record per row")
            self.record, self.record_fields = record, record_fields(layout["record"], record.shape[1])
            rows = unpack_rows(record, self.record_fields)
            want = {"reward": (np.float64, (R,)), "terminated": (np.bool_, (R,)), "truncated": (np.bool_, (R,)),
                    "mask": (np.bool_, (R, E)), "info_pattern": (np.int32, (R,))}
            for k, (dt, shape) in want.items():  # what the build writes (the store reads the pattern field as is)
                if rows[k].dtype != dt or rows[k].shape != shape:
                    raise ValueError(f"record field {k} is {rows[k].dtype} {rows[k].shape}, expected {np.dtype(dt)} {shape}")
            self.reset_obs = cases["reset_obs"]
            self.fixed_obs = self.reset_obs[:, : self.n_fixed]
            self.obs, self.reward = rows["obs"], rows["reward"]
            self.terminated, self.truncated, self.masks = rows["terminated"], rows["truncated"], rows["mask"]
            if self.reset_obs.shape != (n, len(self.features)) or self.obs.shape != (R, len(self.features) - self.n_fixed) \
                    or self.masks.shape != (R, E) or self.reset_obs.dtype != np.float32 or self.obs.dtype != np.float32:
                raise ValueError("array shapes do not match the layout")
            arrays = {"row_pattern": rows["info_pattern"], "patterns": np.asarray(doc["infos"]["patterns"], dtype=np.uint8)
                      .reshape(-1, len(doc["infos"]["nodes"]))}
            arrays.update({f"table:{k[2:]}": v for k, v in rows.items() if k.startswith("t:")})
            arrays.update({f"array:{k[2:]}": v for k, v in rows.items() if k.startswith("a:")})
            info_fields = {"pattern": self.record_fields["info_pattern"],
                           **{("table:" if k[0] == "t" else "array:") + k[2:]: f for k, f in self.record_fields.items()
                              if k.startswith(("t:", "a:"))}}
            self.infos = load_store(arrays, doc["infos"], pool["value"], record=(record, info_fields))
        except (ValueError, KeyError, TypeError) as exc:
            raise TableError(f"outcome table {self.path} is inconsistent ({type(exc).__name__}: {exc})") from None
        self.slot = {cid: i for i, cid in enumerate(self.case_ids)}

    def __repr__(self) -> str:
        return f"OutcomeTable({str(self.path)!r}, {self.identity['variant']}/{self.identity['split']}, cases={len(self.case_ids)})"

    def check(self, identity: dict, fingerprint: dict) -> "OutcomeTable":
        """Refuse the table for an env of another identity, or a fingerprint other than the running code's.

        Raises:
            TableError: another identity (the fields are named). TableStale: another fingerprint (named).
        """
        if digest(identity) != self.manifest["identity_sha256"]:
            diff = fingerprint_diff(self.identity, identity)
            raise TableError(f"outcome table {self.path} is for other env settings ({'; '.join(diff)})")
        if digest(fingerprint) != self.manifest["fingerprint_sha256"]:
            diff = fingerprint_diff(self.fingerprint, fingerprint)
            raise TableStale(f"outcome table {self.path} was built by other code, data, prices or forecasters than this "
                             f"process runs ({'; '.join(diff[:6]) or 'fingerprints differ'}); rebuild it: "
                             f"{build_command(self.identity, self.path, self.manifest.get('build', {}).get('limit'))}")
        return self

    def rows_of(self, slots: np.ndarray, entries: np.ndarray | int) -> np.ndarray:
        """Rows of ``entries`` (menu indices; ``E`` = the reset) of ``slots``: ``1 + slot*(E+1) + entry``."""
        return 1 + np.asarray(slots, dtype=np.int64) * (self.entries + 1) + entries


def open_table(path: str | Path) -> OutcomeTable:
    """The :class:`OutcomeTable` at ``path``, opened (and its files checked) once per process.

    Raises:
        TableError, TableIntegrityError: as :class:`OutcomeTable`.
    """
    key = str(Path(path).resolve())
    with _LOCK:
        t = _OPEN.get(key)
        if t is None:
            t = _OPEN[key] = OutcomeTable(path)
        return t


def _say_once(key, message: str) -> None:
    if key not in _SAID:
        warn_user(message, OutcomeTableHint)
        _SAID.add(key)  # after: a filter that turns it into an error raises every time


def find_table(setting, identity: dict, fingerprint, case_ids) -> OutcomeTable | None:
    """The table an env reads, or ``None`` (the env then plays outcomes live).

    Args:
        setting: ``"auto"`` (the default table of ``identity`` under :func:`~fwgym.rl.outcomes.format.default_root`,
            when present, matching and holding every case of ``case_ids``), ``False`` / ``None`` (no table), or a
            table directory (it must match and hold every case).
        identity: the env's (:func:`~fwgym.rl.outcomes.identity.table_identity`).
        fingerprint: the running code's (:func:`~fwgym.rl.outcomes.identity.table_fingerprint`), or a callable
            returning it (computed only when a table is there to check).
        case_ids: the env's case pool.

    Raises:
        TableError, TableIntegrityError, TableStale: a table given by path that cannot serve the env; with
            ``"auto"``, a default table whose files were changed (integrity errors are never silent). A stale or
            partial default table is not read: said once (:class:`OutcomeTableHint`) with the command to rebuild it.
    """
    if setting is False or setting is None:
        return None
    fp = fingerprint if not callable(fingerprint) else None

    def current() -> dict:
        nonlocal fp
        if fp is None:
            fp = fingerprint()
        return fp

    split, variant = identity["split"], identity["variant"]
    if setting != "auto":
        table = open_table(setting).check(identity, current())
        missing = [c for c in case_ids if c not in table.slot]
        if missing:
            raise TableError(f"outcome table {table.path} lacks {len(missing)} of the env's cases (e.g. {missing[:3]}); "
                             f"build it over the whole split ({build_command(identity, table.path)})")
        return table
    root = default_root()
    if root is None:
        return None
    where = table_dir(root, identity)
    if not (where / MANIFEST).is_file():
        said = f"no outcome table for the {variant} RL env on the {split} split: every (case, entry) outcome is played " \
               "through the env the first time it is drawn; "
        if split in TRAINING_SPLITS:
            said += f"`{build_command(identity, overwrite=False)}` precomputes them once (then the vector env runs at " \
                    "table speed; see docs/rl.md)"
        else:  # no advice to train faster on a held-out split
            said += f"the {split} split is for reporting a policy once (fwgym evaluate), not for training on it"
        _say_once(("absent", str(where)), said)
        return None
    try:  # a table of another format version is stale too (read_manifest)
        table = open_table(where).check(identity, current())
    except TableStale as exc:
        _say_once(("stale", str(where)), f"{exc}. Not reading it: outcomes are played through the env")
        return None
    if any(c not in table.slot for c in case_ids):
        _say_once(("partial", str(where)), f"outcome table {where} does not hold every case of this env's pool; not "
                  f"reading it ({build_command(identity)} builds the whole split)")
        return None
    return table
