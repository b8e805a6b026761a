"""Persistence of :class:`fwgym.rl.infos.InfoStore`: the store as NumPy arrays plus JSON data (what an outcome table
writes as Arrow columns and its manifest, :mod:`fwgym.rl.outcomes.format`), and a read-only store from those parts.
Nothing is pickled: values are tagged JSON (:mod:`fwgym.rl.values`)."""
from __future__ import annotations

import json

import numpy as np

from fwgym.rl.infos import _ARRAY, _CONST, _MIXED, _OBJ, _TYPED, InfoStore, _copy_kind, _Node, record_slice
from fwgym.rl.values import decode_value, dumps_value, encode_value, kind_from_json, kind_to_json

__all__ = ["export_store", "load_store"]


def export_store(self: InfoStore) -> tuple[dict[str, np.ndarray], dict]:
    """The store as arrays and JSON data (see :func:`load_store`): arrays ``row_pattern`` (rows,) int32,
    ``patterns`` (P, nodes) uint8, one ``table:<group>`` (rows, columns) per typed group and ``codes``,
    one ``array:<node>`` (rows, *shape) per ndarray leaf; JSON: nodes, kinds, pool (tagged JSON).

    Raises:
        UnsupportedInfo: a pool value or a constant that :func:`encode_value` cannot encode.
    """
    r = self.rows
    patterns = np.zeros((self.n_patterns, len(self.nodes)), dtype=np.uint8)
    w = min(len(self.nodes), self._patterns.shape[1])
    patterns[:, :w] = self._patterns[: self.n_patterns, :w]
    arrays: dict[str, np.ndarray] = {"row_pattern": self._row_pattern[:r].copy(), "patterns": patterns}
    for g, t in self._tables.items():
        arrays[f"table:{g}"] = np.ascontiguousarray(t[:r, : self._widths[g]])
    nodes = []
    for node in self.nodes:
        d = {"path": list(node.path), "dict": node.is_dict, "parent": node.parent}
        if not node.is_dict:
            d["state"] = node.state
            if node.state != _MIXED:
                d["kind"] = kind_to_json(node.kind)
            if node.state == _CONST:
                d["const"] = encode_value(node.const)
            elif node.state in (_TYPED, _OBJ, _MIXED):
                d["group"], d["column"] = node.group, node.column
            elif node.state == _ARRAY:
                arrays[f"array:{node.index}"] = np.ascontiguousarray(node.array_table()[:r])
        nodes.append(d)
    meta = {"rows": r, "nodes": nodes, "kinds": [None, "dict"] + [kind_to_json(k) for k in self._kinds[2:]]}
    pool = [dumps_value(v) for v in self._pool[1: self._pool_size]]
    return arrays, {"meta": meta, "pool": pool}


def load_store(arrays: dict[str, np.ndarray], meta: dict, pool: list[str],
               record: tuple[np.ndarray, dict] | None = None) -> InfoStore:
    """A read-only :class:`~fwgym.rl.infos.InfoStore` from :func:`export_store`'s parts (arrays may be read-only
    memory maps, or strided views of a packed row record).

    Args:
        arrays, meta, pool: :func:`export_store`'s parts.
        record: ``(record (rows, bytes) uint8, {name: (byte offset, dtype, shape)})`` when ``row_pattern`` (there
            ``"pattern"``), every ``table:<group>`` and ``array:<node>`` are views of one packed record per row (an
            outcome table's ``rows.arrow``): batches then gather each env's record once
            (:attr:`~fwgym.rl.infos.InfoStore.record`).

    Raises:
        ValueError: inconsistent parts (shapes, references, kinds, pool values).
    """
    self = InfoStore(capacity=2)
    try:
        r = int(meta["rows"])
        _load_patterns(self, arrays, meta, r)
        values = np.empty(len(pool) + 1, dtype=object)
        for i, text in enumerate(pool, start=1):
            values[i] = decode_value(json.loads(text))
        self._pool, self._pool_size = values, len(values)
        self._pool_kind = np.fromiter((_copy_kind(v) for v in values), dtype=np.int8, count=len(values))
        _load_tables(self, arrays, r, len(values))
        for i, d in enumerate(meta["nodes"]):
            _load_node(self, i, d, arrays, r)
        if self._patterns.shape[1] > len(self.nodes):
            raise ValueError("patterns have more columns than there are nodes")
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"malformed info store ({type(exc).__name__}: {exc})") from None
    if "codes" not in self._tables:
        self._tables["codes"], self._widths["codes"] = np.zeros((r, 0), dtype=np.int32), 0
    self.rows, self._cap, self.frozen = r, r, True
    if record is not None:
        _attach_record(self, arrays, *record)
    return self


def _attach_record(self: InfoStore, arrays: dict[str, np.ndarray], record: np.ndarray, fields: dict) -> None:
    """Check that every part is the view of ``record`` that ``fields`` says, then keep the record.

    Raises:
        ValueError: a part is missing from ``fields`` or is not that view.
    """
    if record.ndim != 2 or record.dtype != np.uint8 or record.shape[0] != self.rows:
        raise ValueError(f"record of shape {record.shape} and dtype {record.dtype} for {self.rows} rows")
    names = ["pattern"] + [k for k in arrays if k.startswith(("table:", "array:"))]
    base = record.__array_interface__["data"][0]
    for name in names:
        a = arrays["row_pattern" if name == "pattern" else name]
        if name not in fields:
            raise ValueError(f"the record has no field for {name}")
        off, dtype, shape = fields[name]
        if a.dtype != dtype or a.shape != (self.rows, *shape) or (self.rows and a[0].nbytes and (
                a.__array_interface__["data"][0] != base + off or a.strides[0] != record.strides[0])):
            raise ValueError(f"{name} is not the record's field {fields[name]}")
    self.record, self._slices = record, {k: record_slice(*fields[k]) for k in names}


def _load_patterns(self: InfoStore, arrays: dict[str, np.ndarray], meta: dict, r: int) -> None:
    self._row_pattern = np.asarray(arrays["row_pattern"], dtype=np.int32)
    self._patterns = np.asarray(arrays["patterns"], dtype=np.uint8)
    if self._row_pattern.shape != (r,) or self._patterns.ndim != 2:
        raise ValueError("row patterns do not match the row count")
    self.n_patterns = self._patterns.shape[0]
    if r and (self._row_pattern.min() < 0 or self._row_pattern.max() >= self.n_patterns):
        raise ValueError("a row refers to an unknown pattern")
    self._kinds = [None, "dict"] + [kind_from_json(k) for k in meta["kinds"][2:]]
    if self._patterns.size and int(self._patterns.max()) >= len(self._kinds):
        raise ValueError("a pattern refers to an unknown kind")


def _load_tables(self: InfoStore, arrays: dict[str, np.ndarray], r: int, n_values: int) -> None:
    for g in [k[6:] for k in arrays if k.startswith("table:")]:
        t = arrays[f"table:{g}"]
        if t.ndim != 2 or t.shape[0] != r or (g != "codes" and t.dtype != np.dtype(g)) or \
                (g == "codes" and t.dtype != np.int32):
            raise ValueError(f"table {g} has shape {t.shape} and dtype {t.dtype}")
        self._tables[g], self._widths[g] = t, t.shape[1]
    if "codes" in self._tables and self._tables["codes"].size:
        c = self._tables["codes"]
        if c.min() < 0 or c.max() >= n_values:
            raise ValueError("a code refers to a value outside the pool")


def _load_node(self: InfoStore, i: int, d: dict, arrays: dict[str, np.ndarray], r: int) -> None:
    parent = int(d["parent"])
    if not -1 <= parent < i or (parent >= 0 and not self.nodes[parent].is_dict):
        raise ValueError(f"node {i} has a bad parent")
    node = _Node(str(d["path"][-1]), bool(d["dict"]), i, parent, tuple(str(p) for p in d["path"]))
    self.nodes.append(node)
    self._children[parent].append(node)
    self._child[(parent, node.key)] = node
    if node.is_dict:
        self._children[i] = []
        return
    node.state = d["state"]
    if node.state != _MIXED:
        node.kind = kind_from_json(d["kind"])
    if node.state == _CONST:
        node.const = decode_value(d["const"])
    elif node.state in (_TYPED, _OBJ, _MIXED):
        node.group, node.column = str(d["group"]), int(d["column"])
        if node.group not in self._tables or not 0 <= node.column < self._widths[node.group]:
            raise ValueError(f"node {i} refers to a missing column")
    elif node.state == _ARRAY:
        node.table = arrays[f"array:{i}"]
        kind = node.kind
        if node.table.shape != (r, *kind[1]) or node.table.dtype != np.dtype(kind[2]):
            raise ValueError(f"array of node {i} has the wrong shape or dtype")
    else:
        raise ValueError(f"node {i} has an unknown state {node.state!r}")
