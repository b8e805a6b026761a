"""Recorded ``info`` dicts, batched exactly as Gymnasium's ``VectorEnv._add_info`` batches them: :class:`InfoStore`.

A vector env over recorded outcomes (:class:`fwgym.rl.vector.MacroVectorEnv`) must return, for any selection of
recorded rows, the batched info ``gymnasium.vector.SyncVectorEnv`` builds from the same per-env dicts:
``info[key]`` an array over envs plus the ``info["_key"]`` mask, nested dicts batched recursively; a key's array
type is decided by the first env that has it (``bool``/``int``/``float`` and NumPy number types: an array of that
type; an ndarray: ``(n, *shape)`` of its dtype; anything else: an object array); envs without it hold 0 / ``None``.

**Storage** (row-major, ``(rows, columns)`` per table, so that a batch reads each env's values side by side; in an
outcome table every table is a view of the row's packed record and a batch slices one gathered record block
(:meth:`InfoStore.batch`'s ``block``); row 0 is the empty row, an env that contributes nothing): a node per key path (in the order first seen); per row a *pattern*, the kind code of
every node (0 = absent), stored once per distinct pattern; per leaf one of ``const`` (every row that has it holds
the same value, same type and bits: no column), ``typed`` (a column of the table of its dtype; rows without it hold
0, what ``_add_info`` fills in), ``array`` (an ndarray leaf of one shape and dtype: its own ``(rows, *shape)``
table), ``object`` (strings, lists, ``None``: an int32 code into the pool of distinct values, code 0 = ``None``) or
``mixed`` (values of several kinds, ``1`` and ``2.5``: in the pool with their exact types, batched env by env with
``_add_info``'s own assignment, so a value that does not fit the first env's array type raises as it does there).

Pool values are shared between rows; a batch hands out copies of the mutable ones (lists, dicts, arrays), so a
caller changing a value it got changes no later batch. Keys of a batched dict come in the
store's node order, not in first-appearance order over the envs (dicts compare equal either way). Persistence
(:meth:`InfoStore.export`, :meth:`InfoStore.from_export`; the outcome tables of :mod:`fwgym.rl.outcomes`): the
tables as arrays, nodes, patterns and leaf states as JSON, the pool as tagged JSON (:mod:`fwgym.rl.values`: exact
types and float bits; never pickle, so loading a table runs no code).
"""
from __future__ import annotations

import copy
import operator
from typing import Any

import numpy as np

from fwgym.rl.values import OBJECT as _OBJECT
from fwgym.rl.values import (UnsupportedInfo, dumps_value, kind_key,
                              getter, same_value)

__all__ = ["InfoStore", "UnsupportedInfo", "record_slice", "record_part"]
_DICT_CODE = 1  # the kind code of a dict node
_CONST, _TYPED, _ARRAY, _OBJ, _MIXED = "const", "typed", "array", "object", "mixed"
_INT64 = (-(1 << 63), (1 << 63) - 1)



class _Node:
    __slots__ = ("key", "mask_key", "is_dict", "index", "parent", "path", "state", "kind", "group", "column",
                 "const", "table")

    def __init__(self, key: str, is_dict: bool, index: int, parent: int, path: tuple):
        self.key, self.mask_key, self.is_dict, self.index, self.parent, self.path = key, f"_{key}", is_dict, index, parent, path
        self.state: str | None = None  # leaves: _CONST, _TYPED, _ARRAY, _OBJ, _MIXED
        self.kind: Any = None  # the leaf's one kind (a kind_key; not for _MIXED)
        # _TYPED: dtype str and column; _OBJ/_MIXED: "codes" and column; no column: "" and -1
        self.group, self.column = "", -1
        self.const: Any = None  # _CONST: the value
        self.table: np.ndarray | None = None  # _ARRAY: (rows, *shape) table

    def array_table(self) -> np.ndarray:
        """The ``(rows, *shape)`` table of an ``array`` leaf.

        Raises:
            RuntimeError: the leaf has no table (it is not an ``array`` leaf; a store inconsistency).
        """
        if self.table is None:
            raise RuntimeError(f"info leaf {'.'.join(self.path)!r} ({self.state}) has no array table")
        return self.table


def record_slice(offset: int, dtype, shape: tuple) -> tuple:
    """The slice of a packed record's field (byte ``offset``, ``dtype``, per-row ``shape``) for :func:`record_part`."""
    dtype = np.dtype(dtype)
    end = offset + dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    how = 1 if shape == () else 0 if len(shape) == 1 else 2
    return offset, end, dtype, how, tuple(shape)


def record_part(block: np.ndarray, part: tuple) -> np.ndarray:
    """``(n, *shape)`` view of one field (:func:`record_slice`) of gathered packed records ``block`` (n, bytes)
    uint8 (:func:`fwgym.rl.outcomes.format.pack_rows`)."""
    off, end, dtype, how, shape = part
    v = block[:, off:end].view(dtype)
    return v if how == 0 else v[:, 0] if how == 1 else v.reshape(len(block), *shape)


_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes)


def _copy_kind(value) -> int:
    """How a pool value is handed out fresh: 0 as it is (immutable: None, numbers, strings, NumPy scalars, tuples of
    those; or an object the pool keeps by identity), 1 by ``.copy()`` (an ndarray, a list or dict of immutables),
    2 by ``copy.deepcopy``."""
    t = type(value)
    if t in _IMMUTABLE or isinstance(value, np.generic):
        return 0
    if t is np.ndarray:
        return 1
    if t is list or t is dict:
        items = value.values() if t is dict else value
        return 1 if all(type(x) in _IMMUTABLE or isinstance(x, np.generic) for x in items) else 2
    if t is tuple:
        return 0 if all(_copy_kind(x) == 0 for x in value) else 2
    return 0


def _fresh(value, kind):
    return value if not kind else value.copy() if kind == 1 else copy.deepcopy(value)


_SHALLOW = np.frompyfunc(operator.methodcaller("copy"), 1, 1)  # kind 1, without a Python frame per value
_DEEP = np.frompyfunc(copy.deepcopy, 1, 1)


def _zeros(shape, dtype) -> np.ndarray:
    return np.full(shape, None, dtype=object) if np.dtype(dtype) == object else np.zeros(shape, dtype=dtype)


class InfoStore:
    """Info dicts recorded one per row, batched as ``VectorEnv._add_info`` batches them (module docstring).

    Args:
        capacity: initial number of rows (grows by doubling).
    """

    def __init__(self, capacity: int = 1024):
        self._cap = max(int(capacity), 2)
        self.rows = 1  # row 0: the empty row
        self.nodes: list[_Node] = []
        self._children: dict[int, list[_Node]] = {-1: []}
        self._child: dict[tuple[int, str], _Node] = {}
        self._kinds: list = [None, "dict"]  # code -> kind key (0 absent, 1 dict)
        self._kind_code: dict = {}
        self._tables: dict[str, np.ndarray] = {}  # group -> (rows, columns): row-major
        #: an outcome table's packed row record (rows, bytes) uint8; None when recording. ``_slices``: where each part
        #: lives in it (``"pattern"``, ``"table:<group>"``, ``"array:<node>"`` -> :func:`record_slice`)
        self.record: np.ndarray | None = None
        self._slices: dict[str, tuple] = {}
        self._widths: dict[str, int] = {}
        self._row_pattern = np.zeros(self._cap, dtype=np.int32)
        self._patterns = np.zeros((4, 8), dtype=np.uint8)  # (patterns, nodes) kind codes; pattern 0 = empty
        self._pattern_id: dict[bytes, int] = {b"": 0}
        self.n_patterns = 1
        self._pool = np.empty(64, dtype=object)  # distinct object values; code 0 = None
        self._pool_kind = np.zeros(64, dtype=np.int8)  # per pool value its _copy_kind: lists are handed out as copies
        self._pool_size = 1
        self._pool_index: dict = {}
        self._layout = 0  # bumped whenever a node or a leaf's storage changes (compiled batch plans are dropped)
        self._plans: dict = {}
        self._bits: np.ndarray | None = None
        self.frozen = False

    def __len__(self) -> int:
        return self.rows - 1

    # -- recording ----------------------------------------------------------------------------------

    def add(self, info: dict) -> int:
        """Record ``info``; returns its row (>= 1).

        Raises:
            UnsupportedInfo: a key that is a dict in one record and a value in another, a non-string key,
                or ``final_obs`` (batched specially by Gymnasium).
            RuntimeError: the store was loaded from a table (read-only).
        """
        if self.frozen:
            raise RuntimeError("this InfoStore was loaded from an outcome table and is read-only")
        row = self.rows
        if row >= self._cap:
            self._grow_rows(2 * self._cap)
        codes: dict[int, int] = {}
        self._write(-1, info, row, codes)
        width = max(codes) + 1 if codes else 0
        pattern = np.zeros(width, dtype=np.uint8)
        for j, c in codes.items():
            pattern[j] = c
        key = pattern.tobytes()
        pid = self._pattern_id.get(key)
        if pid is None:
            pid = self._pattern_id[key] = self.n_patterns
            if pid >= self._patterns.shape[0] or width > self._patterns.shape[1]:
                p = np.zeros((max(2 * self._patterns.shape[0], pid + 1), max(self._patterns.shape[1], 2 * width)), np.uint8)
                p[: self._patterns.shape[0], : self._patterns.shape[1]] = self._patterns
                self._patterns = p
            self._patterns[pid, :width] = pattern
            self.n_patterns += 1
        self._row_pattern[row] = pid
        self.rows += 1
        return row

    def _grow_rows(self, new: int) -> None:
        p = np.zeros(new, dtype=np.int32)
        p[: self._cap] = self._row_pattern[: self._cap]
        self._row_pattern = p
        for g, t in self._tables.items():
            self._tables[g] = self._widened(t, new, t.shape[1])
        for node in self.nodes:
            if node.table is not None:
                t = node.table
                node.table = np.zeros((new, *t.shape[1:]), dtype=t.dtype)
                node.table[: t.shape[0]] = t
        self._cap = new

    @staticmethod
    def _widened(t: np.ndarray, rows: int, cols: int) -> np.ndarray:
        out = _zeros((rows, cols), t.dtype)
        out[: t.shape[0], : t.shape[1]] = t
        return out

    def _code(self, kind) -> int:
        code = self._kind_code.get(kind)
        if code is None:
            code = len(self._kinds)
            if code > 255:  # pragma: no cover - a handful of kinds exist
                raise UnsupportedInfo("too many info value kinds")
            self._kinds.append(kind)
            self._kind_code[kind] = code
        return code

    def _node(self, parent: int, key, is_dict: bool) -> _Node:
        node = self._child.get((parent, key))
        if node is None:
            if key == "final_obs":
                raise UnsupportedInfo("a recorded info has a 'final_obs' key (Gymnasium batches it specially)")
            if type(key) is not str:
                raise UnsupportedInfo(f"info keys must be strings, got {key!r}")
            path = (self.nodes[parent].path if parent >= 0 else ()) + (key,)
            node = _Node(key, is_dict, len(self.nodes), parent, path)
            self.nodes.append(node)
            self._children[parent].append(node)
            if is_dict:
                self._children[node.index] = []
            self._child[(parent, key)] = node
            self._layout += 1
        elif node.is_dict != is_dict:
            raise UnsupportedInfo(f"info key {'.'.join(node.path)!r} is a dict in one record and a value in another")
        return node

    def _write(self, parent: int, info: dict, row: int, codes: dict) -> None:
        for key, value in info.items():
            if isinstance(value, dict):
                node = self._node(parent, key, True)
                codes[node.index] = _DICT_CODE
                self._write(node.index, value, row, codes)
                continue
            node = self._node(parent, key, False)
            kind = kind_key(value)
            codes[node.index] = self._code(kind)
            self._put(node, kind, value, row)

    def _put(self, node: _Node, kind, value, row: int) -> None:
        st = node.state
        if st is None:
            node.state, node.kind = _CONST, kind
            node.const = value.copy() if isinstance(value, np.ndarray) else value
            self._layout += 1
            return
        if st == _CONST:
            if kind == node.kind and same_value(value, node.const):
                return
            self._materialise(node, kind)
            st = node.state
        if st != _MIXED and kind != node.kind:
            self._to_mixed(node)
            st = _MIXED
        if st == _TYPED:
            if kind is int and not _INT64[0] <= value <= _INT64[1]:
                self._to_mixed(node)
                self._tables["codes"][row, node.column] = self._intern(value)
                return
            self._tables[node.group][row, node.column] = value
        elif st == _ARRAY:
            node.array_table()[row] = value
        else:
            self._tables["codes"][row, node.column] = self._intern(value)

    def _materialise(self, node: _Node, new_kind) -> None:
        """A const leaf got a second value: give it storage and write the constant into its rows so far."""
        kind, value = node.kind, node.const
        if new_kind != kind:
            node.state = _MIXED
        elif isinstance(kind, tuple):
            node.state = _ARRAY
            node.table = np.zeros((self._cap, *kind[1]), dtype=np.dtype(kind[2]))
        elif kind == _OBJECT:
            node.state = _OBJ
        elif kind is int and not _INT64[0] <= value <= _INT64[1]:
            node.state = _MIXED
        else:
            node.state = _TYPED
        node.const = None
        if node.state == _TYPED:
            node.group, node.column = self._new_column(np.dtype(kind).str)
        elif node.state in (_OBJ, _MIXED):
            node.group, node.column = self._new_column("codes")
        rows = self._rows_with(node)
        if node.state == _TYPED:
            self._tables[node.group][rows, node.column] = value
        elif node.state == _ARRAY:
            node.array_table()[rows] = value
        else:
            self._tables["codes"][rows, node.column] = self._intern(value)
        self._layout += 1

    def _to_mixed(self, node: _Node) -> None:
        """A typed/array/object leaf got a value of another kind: keep every value in the pool from now on."""
        rows = self._rows_with(node)
        if node.state == _OBJ:
            node.state = _MIXED
            self._layout += 1
            return
        old_group, old_col = node.group, node.column
        old_table = node.array_table() if node.state == _ARRAY else None
        group, column = self._new_column("codes")
        codes = self._tables["codes"]
        kinds = self._patterns[self._row_pattern[rows], node.index]
        for r, k in zip(rows.tolist(), kinds.tolist()):
            if old_table is not None:
                v = old_table[r].copy()
            else:
                v = self._tables[old_group][r, old_col]
                v = self._kinds[k](v)  # back to the recorded Python / NumPy type
            codes[r, column] = self._intern(v)
        node.state, node.group, node.column, node.table = _MIXED, group, column, None
        self._layout += 1

    def _new_column(self, group: str) -> tuple[str, int]:
        t = self._tables.get(group)
        width = self._widths.get(group, 0)
        dtype = np.int32 if group == "codes" else np.dtype(group)
        if t is None:
            t = np.zeros((self._cap, 8), dtype=dtype)
        elif width >= t.shape[1]:
            t = self._widened(t, self._cap, 2 * t.shape[1])
        self._tables[group] = t
        self._widths[group] = width + 1
        return group, width

    def _rows_with(self, node: _Node) -> np.ndarray:
        """Rows recorded so far that have ``node``."""
        if node.index >= self._patterns.shape[1]:
            return np.zeros(0, dtype=np.int64)
        has = self._patterns[: self.n_patterns, node.index] != 0
        return np.flatnonzero(has[self._row_pattern[: self.rows]])

    def _intern(self, value) -> int:
        """The pool code of ``value`` (a new code for a value not seen before; 0 for ``None``)."""
        if value is None:
            return 0
        t = type(value)
        if t is str:
            key = value
        else:
            try:
                key = (t.__name__, dumps_value(value))
            except UnsupportedInfo:
                key = ("id", id(value), len(self._pool_index))  # not comparable: its own code, kept alive by the pool
        code = self._pool_index.get(key)
        if code is None:
            code = self._pool_size
            if code >= len(self._pool):
                pool = np.empty(2 * len(self._pool), dtype=object)
                pool[: len(self._pool)] = self._pool[: len(self._pool)]
                self._pool = pool
                self._pool_kind = np.concatenate([self._pool_kind, np.zeros(len(self._pool_kind), dtype=np.int8)])
            self._pool[code] = value
            self._pool_kind[code] = _copy_kind(value)
            self._pool_size += 1
            self._pool_index[key] = code
        return code

    # -- reading ------------------------------------------------------------------------------------

    def value(self, node: _Node, row: int):
        """The value recorded for leaf ``node`` in ``row`` (its recorded type), or ``None`` if absent."""
        code = self._pattern_code(row, node.index)
        if not code:
            return None
        if node.state == _CONST:
            v = node.const
            return v.copy() if isinstance(v, np.ndarray) else v
        if node.state == _ARRAY:
            return node.array_table()[row].copy()
        if node.state == _TYPED:
            return self._kinds[code](self._tables[node.group][row, node.column])
        return self._pool[self._tables["codes"][row, node.column]]

    def _pattern_code(self, row: int, j: int) -> int:
        return int(self._patterns[self._row_pattern[row], j]) if j < self._patterns.shape[1] else 0

    def row_dict(self, row: int) -> dict:
        """The info dict recorded in ``row`` (keys in the store's node order; object values shared)."""
        def build(parent: int) -> dict:
            out = {}
            for node in self._children[parent]:
                if self._pattern_code(row, node.index):
                    out[node.key] = build(node.index) if node.is_dict else self.value(node, row)
            return out
        return build(-1) if row else {}

    # -- batching ----------------------------------------------------------------------------------

    def batch(self, rows: np.ndarray, only: np.ndarray | None = None, block: np.ndarray | None = None) -> dict:
        """The batched info of ``rows`` (int array (n,)): what ``VectorEnv._add_info`` builds when env ``i``
        contributes the dict recorded in row ``rows[i]`` (row 0: nothing). Every returned array is a fresh one.

        Args:
            rows: recorded rows, one per env.
            only: optional bool mask (n,): envs outside it contribute nothing (as row 0).
            block: a store with a packed :attr:`record` only, and without ``only``: ``record[rows]`` (n, bytes) uint8
                when the caller has gathered it already (one gather per step for the observations, rewards and
                infos); gathered here when not given.

        Raises:
            TypeError, ValueError, OverflowError: where ``_add_info`` raises (a mixed leaf whose value
                does not fit the first env's array type); ValueError: a ``block`` for a store without a record.
        """
        rows = np.asarray(rows, dtype=np.int64)
        if only is not None:
            rows, block = np.where(only, rows, 0), None
        n = len(rows)
        if not n:
            return {}
        if self.record is None:
            if block is not None:
                raise ValueError("block: this InfoStore has no packed record (it records, or was loaded without one)")
        elif block is None:
            block = self.record[rows]
        pids = self._row_pattern[rows] if block is None else self._part("pattern", rows, block)
        key: tuple[int | bytes, int, int]  # (the patterns in the batch, batch size, layout version)
        if self.n_patterns <= 63:
            key = (int(np.bitwise_or.reduce(self._pattern_bits()[pids])), n, self._layout)
        else:
            key = (np.flatnonzero(np.bincount(pids, minlength=self.n_patterns)).tobytes(), n, self._layout)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) > 4096:
                self._plans.clear()
            plan = self._plans[key] = self._compile(n, np.unique(pids))
        return self._run(plan, rows, pids, block)

    def _part(self, name: str, rows: np.ndarray, block: np.ndarray) -> np.ndarray:
        """``(n, *shape)``: part ``name`` (``"pattern"``, ``"table:<group>"``, ``"array:<node>"``) of the gathered
        records ``block`` of a record-backed store, a view of the block."""
        return record_part(block, self._slices[name])

    def _pattern_bits(self) -> np.ndarray:
        bits = self._bits
        if bits is None or len(bits) != self.n_patterns:
            bits = self._bits = np.left_shift(np.uint64(1), np.arange(self.n_patterns, dtype=np.uint64))
        return bits

    def _compile(self, n: int, distinct: np.ndarray) -> tuple:  # noqa: C901 - one branch per leaf state
        """The steps of a batch over rows of the patterns ``distinct``: the tables to gather and the columns
        taken from each, the per-pattern tables of the constants, the mask rows, and the dicts to build
        (deepest first)."""
        width, P = len(self.nodes), self.n_patterns
        present = np.zeros((P, width), dtype=bool)  # node present per pattern
        w = min(width, self._patterns.shape[1])
        present[:, :w] = self._patterns[:P, :w] != 0
        anyp = present[distinct].any(axis=0)
        order: list[_Node] = []  # present nodes, depth first

        def walk(parent: int):
            for node in self._children[parent]:
                if anyp[node.index]:
                    order.append(node)
                    if node.is_dict:
                        walk(node.index)

        walk(-1)
        slot: dict[int, int] = {}  # node index -> position in the step's value list
        groups: dict[str, tuple[list, list]] = {}  # group -> (leaves with a column, constant leaves)
        arrays, mixed = [], []
        for node in order:
            if node.is_dict:
                continue
            if node.state in (_TYPED, _OBJ):
                groups.setdefault(node.group, ([], []))[0].append(node)
            elif node.state == _CONST and not isinstance(node.kind, tuple):
                g = "codes" if node.kind == _OBJECT else np.dtype(node.kind).str
                groups.setdefault(g, ([], []))[1].append(node)
            elif node.state in (_CONST, _ARRAY):
                arrays.append(node)
            else:
                mixed.append(node)
        pos, gathers = 0, []
        for g, (cols_of, consts) in groups.items():
            cols = [nd.column for nd in cols_of]
            width = self._tables[g].shape[1] if cols else 0
            # the rows' whole (n, width) block is read (row-major: side by side), then its columns, transposed
            pick = None if cols == list(range(width)) else np.array(cols, dtype=np.int64)
            ctab = ckind = None
            if consts:  # per pattern: the constant where the pattern has the leaf, 0 / None elsewhere
                ctab = _zeros((len(consts), P), object if g == "codes" else np.dtype(g))
                ckind = np.zeros((len(consts), P), dtype=np.int8)
                for i, nd in enumerate(consts):
                    for p in np.flatnonzero(present[:, nd.index]).tolist():
                        ctab[i, p], ckind[i, p] = nd.const, _copy_kind(nd.const) if g == "codes" else 0
                ckind = ckind if ckind.any() else None
            gathers.append((g, bool(cols), pick, ctab, ckind))
            for nd in cols_of + consts:
                slot[nd.index] = pos
                pos += 1
        atabs: list[tuple[np.ndarray | _Node, bool]] = []  # ndarray leaves: their table, or per pattern their constant
        for nd in arrays:
            if nd.state == _CONST:
                t = np.zeros((P, *nd.kind[1]), dtype=np.dtype(nd.kind[2]))
                t[present[:, nd.index]] = nd.const
                atabs.append((t, True))
            else:
                atabs.append((nd, False))  # the node: its table grows (is replaced) as rows are recorded
        for nd in arrays + mixed:
            slot[nd.index] = pos
            pos += 1
        mask_of = {nd.index: i for i, nd in enumerate(order)}
        dicts = []  # (slot, keys, mask keys, value slots, mask rows), deepest first
        for parent in [nd.index for nd in reversed(order) if nd.is_dict] + [-1]:
            kids = [nd for nd in self._children[parent] if anyp[nd.index]]
            if parent >= 0:
                slot[parent] = pos
                pos += 1
            dicts.append((slot.get(parent, -1), [nd.key for nd in kids], [nd.mask_key for nd in kids],
                          getter([slot[nd.index] for nd in kids]), getter([mask_of[nd.index] for nd in kids])))
        present_t = np.ascontiguousarray(present[:, [nd.index for nd in order]].T)  # (masks, patterns)
        return (gathers, atabs, [(nd, mask_of[nd.index]) for nd in mixed], pos, dicts, present_t)

    def _run(self, plan: tuple, rows: np.ndarray, pids: np.ndarray, block: np.ndarray | None) -> dict:
        gathers, atabs, mixed, size, dicts, present_t = plan
        masks = list(np.ascontiguousarray(present_t[:, pids]))  # a gather over axis 1 may come out in F order
        vals: list = []
        pool = self._pool
        for g, has_cols, pick, ctab, ckind in gathers:
            if has_cols:
                part = self._tables[g][rows] if block is None else self._part("table:" + g, rows, block)  # (n, width)
                cols = part.T.copy() if pick is None else part.T[pick]  # (k, n), contiguous: one array per leaf
                vals += list(_handed_out(pool.take(cols), self._pool_kind.take(cols)) if g == "codes" else cols)
            if ctab is not None:
                consts = np.ascontiguousarray(ctab[:, pids])  # (k, n): one contiguous array per leaf, as SyncVectorEnv's
                vals += list(consts if ckind is None else _handed_out(consts, ckind[:, pids]))
        for t, per_pattern in atabs:
            if per_pattern:
                vals.append(t[pids])
            elif block is None:
                vals.append(t.table[rows])
            else:
                vals.append(self._part(f"array:{t.index}", rows, block).copy())
        for nd, k in mixed:
            vals.append(self._mixed(nd, rows, masks[k], pids))
        vals += [None] * (size - len(vals))
        out: dict = {}
        for s, keys, mkeys, vget, mget in dicts:
            d = dict(zip(keys, vget(vals)))
            d.update(zip(mkeys, mget(masks)))
            if s < 0:
                out = d
            else:
                vals[s] = d
        return out

    def _mixed(self, node: _Node, rows: np.ndarray, mask: np.ndarray, pids: np.ndarray) -> np.ndarray:
        """A mixed leaf, env by env as ``_add_info`` does it (the first env that has it decides the type)."""
        envs = np.flatnonzero(mask)
        kind = self._kinds[int(self._patterns[pids[envs[0]], node.index])]
        n = len(rows)
        if isinstance(kind, tuple):
            array = np.zeros((n, *kind[1]), dtype=np.dtype(kind[2]))
        elif kind == _OBJECT:
            array = np.full(n, None, dtype=object)
        else:
            array = np.zeros(n, dtype=kind)
        codes = self._tables["codes"][rows, node.column]
        for i in envs.tolist():
            array[i] = _fresh(self._pool[codes[i]], self._pool_kind[codes[i]])
        return array


def _handed_out(values: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """``values`` (an object array) with every mutable pool value replaced by a copy (``kinds``: their
    :func:`_copy_kind`), so that a caller changing a list it got changes no later batch."""
    if kinds.any():
        values = np.ascontiguousarray(values)  # a fancy index over the second axis may be laid out in F order
        flat, k = values.reshape(-1), kinds.reshape(-1)
        idx = np.flatnonzero(k == 1)
        flat[idx] = _SHALLOW(flat[idx])
        if len(idx) < len(k) and (k == 2).any():
            deep = np.flatnonzero(k == 2)
            flat[deep] = _DEEP(flat[deep])
    return values
