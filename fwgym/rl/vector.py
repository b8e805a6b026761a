"""A native vector env for the macro RL id (``FWBench-RL-Macro-v0``), as Gymnasium's ``CartPoleVectorEnv``.

``gym.make_vec("FWBench-RL-Macro-v0", num_envs=N)`` (``vectorization_mode`` ``None`` or
``"vector_entry_point"``) returns a :class:`MacroVectorEnv`: N macro envs stepped per call with NumPy
gathers over **per-case outcomes recorded from the real env**. It returns exactly what
``gym.vector.SyncVectorEnv`` over N ``gym.make("FWBench-RL-Macro-v0")`` envs returns (observations,
rewards, terminations, truncations, infos, ``action_masks()``, seeding and autoreset; proven by
``tests/test_vector_env.py`` on >= 10,000 episodes), only faster once the outcomes are cached.

**Where the numbers come from.** Nothing here computes a loss, a plan or a score. Every outcome is
played once through one :class:`~fwgym.rl.macro.MacroActionWrapper` over
:class:`~fwgym.envs.fwbench.FWBenchEnv` (built by :func:`fwgym.rl.make_rl_env` with the same
arguments, so the env's own tools, ledger and scorer) and recorded: for each case, the reset
(observation, info, mask) after ``reset(options={"case_id": ...})``; for each (case, menu entry) the
step (observation, reward, terminated, truncated, info, mask). A macro episode is one step, so these
two records are the whole episode. Recording is lazy: a (case, entry) pair is played the first time
an env of the batch needs it (:meth:`MacroVectorEnv.precompute` records a pool up front), and kept
for the life of the process. So a first visit costs about what the wrapped env costs (a reset when
the case is drawn, and a reset and the macro step when the entry is chosen: one recording env serves
all sub-envs), later visits cost a few NumPy gathers. This is for **training only**:
``fwgym evaluate`` and every reported number run the one episode loop, never this cache. It assumes
what holds for every fwgym forecaster, that a (case, entry) outcome is a deterministic function of
the case (a forecaster whose result varies between calls, or a timeout that fires sometimes, would be
recorded once).

**Seeding** is SyncVectorEnv's: ``reset(seed=s)`` seeds sub-env ``i`` with ``s + i`` (a list seeds
each), ``seed=None`` continues each sub-env's own generator; each sub-env draws its case with its
own ``np.random.Generator`` (Gymnasium's ``seeding.np_random``) exactly as ``FWBenchEnv.reset`` does
(one uniform, the pool's cumulative aggregation weights, ``searchsorted(side="right")``); the
uniforms are drawn in blocks, which gives the same sequence as one draw per reset.

**Autoreset**: ``autoreset_mode`` ``"next_step"`` (default, Gymnasium's and CartPoleVectorEnv's: the
step after a termination resets that sub-env, ignores its action and returns its reset observation
and info with reward 0), ``"same_step"`` (the terminating step returns the new episode's reset
observation and info, with ``info["final_obs"]`` and ``info["final_info"]``; what SB3 expects, see
:class:`fwgym.rl.sb3_vec.SB3VecEnv`) or ``"disabled"`` (reset sub-envs yourself with
``reset(options={"reset_mask": mask})``). Every macro step ends its episode.

**Infos** are Gymnasium's batched dicts (``info[key]`` an array over envs plus the ``info["_key"]``
mask, nested dicts batched recursively), built like ``VectorEnv._add_info`` builds them from the
recorded per-env dicts (array dtype from the first env that has the key, zeros / ``None`` where an
env lacks it). Object-valued entries (strings, lists such as ``levels``) are the recorded objects,
shared between steps: read them, do not mutate them. ``infos=False`` returns ``{}`` instead (as
``CartPoleVectorEnv`` does; under same-step autoreset only ``final_obs``), for training loops that
read no info: at large ``num_envs`` the infos are most of a step's cost.

Memory: measured ~9 KB per case with its reset and two entries recorded (train split, all 403
features: 352 episode-fixed feature values are stored once per case), so a run that visits the whole
140k-case train pool holds ~1.3 GB of records; ``precompute`` of every entry costs more.
"""
from __future__ import annotations

import math
import pickle
from typing import Any, Sequence

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from fwgym.validation import check_int, is_int

#: uniforms drawn per sub-env generator at a time (the same sequence as one draw per reset)
_DRAW_BLOCK = 256
_MODES = {**{m.value: m for m in AutoresetMode}, **{m.name.lower(): m for m in AutoresetMode}}


def _kind_key(value):
    """The batching class of an info value, following ``VectorEnv._add_info``: Python bool/int/float
    and NumPy scalar types batch into an array of that type, an ndarray into ``(n, *shape)`` of its
    dtype, anything else into an object array."""
    t = type(value)
    if t in (bool, int, float) or issubclass(t, np.number):
        return t
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.str)
    return object


def _freeze(value) -> bytes | None:
    """A key that identifies ``value`` exactly (types included: 1 and 1.0, True and 1, 0.0 and -0.0,
    list and tuple differ): its pickle; ``None`` when it has none (unpicklable)."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - anything pickle refuses is simply stored as it is
        return None


class _Node:
    """One key path of the recorded infos: a dict, or a leaf with its storage."""

    __slots__ = ("key", "mask_key", "is_dict", "index", "path", "children", "kinds", "group", "column", "const",
                 "const_key", "const_value", "pool", "pool_index", "_const_out")

    def __init__(self, key, is_dict: bool, index: int, path: tuple = ()):
        self.key, self.mask_key, self.is_dict, self.index, self.path = key, f"_{key}", is_dict, index, path
        self.children: list[_Node] = []
        self.kinds: set = set()  # kind codes seen (leaves)
        # storage of a leaf: None while constant (one value in every row so far: const_value), else a
        # dtype str (typed column), "codes" (an object leaf: int32 codes into its pool of distinct
        # values), "object" (raw objects: unhashable values, or a leaf whose type changed) or
        # ("ndarray", index) (an array leaf's own table)
        self.group, self.column = None, -1
        self.const, self.const_key, self.const_value = False, None, None
        self.pool: np.ndarray | None = None
        self.pool_index: dict = {}
        self._const_out: dict = {}

    def const_array(self, n: int, kind) -> np.ndarray:
        """A fresh ``(n, ...)`` array of the constant value (the batched form of a constant leaf)."""
        a = self._const_out.get(n)
        if a is None:
            v = self.const_value
            if isinstance(kind, tuple):
                a = np.broadcast_to(v, (n, *v.shape)).copy()
            elif kind is object:
                a = np.empty(n, dtype=object)
                for i in range(n):  # element-wise: a list value must not broadcast
                    a[i] = v
            else:
                a = np.full(n, v, dtype=np.dtype(kind))
            self._const_out[n] = a
        return a.copy()


def _const_key(value, kind):
    """What identifies a leaf value exactly (type, sign of zero, NaN bits, array bytes), or ``None``."""
    if isinstance(kind, tuple):
        return (kind, value.tobytes())
    return _freeze(value)


_CONST, _CODES, _COLUMN, _ARRAY, _DICT, _MIXED = range(6)  # build steps of InfoTable.batch
#: an object leaf keeps a pool of its distinct values until the pool has this many and more than
#: one value per two rows (then raw objects: case ids, per-outcome lists)
_POOL_MIN = 4096


def _same_value(value, const, kind, const_key) -> bool:
    """``value`` is exactly the constant ``const`` (same type; a float's sign of zero; a container's
    element types, checked through its pickle)."""
    if type(value) is not type(const):
        return False
    if isinstance(kind, tuple):
        return value.tobytes() == const_key[1]
    if value is const:
        return True
    if value != const:
        return False
    if kind is float:
        return math.copysign(1.0, value) == math.copysign(1.0, const)
    if kind is object and not isinstance(value, str):
        return _freeze(value) == const_key
    return True


def _zeros(shape, dtype) -> np.ndarray:
    return np.full(shape, None, dtype=object) if np.dtype(dtype) == object else np.zeros(shape, dtype=dtype)


class InfoTable:
    """Recorded info dicts, one row each, and the batched dict that ``VectorEnv._add_info`` builds
    from any selection of them (row 0 is the empty row: an env that contributes nothing).

    Storage (row-major, so a batch is one gather per table): a leaf with one value in every row so far
    is a constant (no column); otherwise a column of the table of its dtype (bool, int64, float64,
    NumPy scalar types), or for strings, lists and ``None`` an int32 code into the leaf's pool of
    distinct values (so a batch takes from a small, cache-resident pool), raw objects where a value
    is unhashable or a leaf's type changed between rows, and one ``(rows, *shape)`` table per ndarray
    leaf. Each row has a presence pattern (the kind code of every node, 0 = absent), stored once per
    distinct pattern.
    """

    def __init__(self, capacity: int = 1024):
        self._cap = max(int(capacity), 2)
        self._rows = 1  # row 0: empty
        self.root = _Node(None, True, -1)
        self.nodes: list[_Node] = []
        self._kinds: dict = {}  # kind key -> code (1..255)
        self._kind_of_code: list = [None]
        self._tables: dict = {}  # group -> (rows, columns) array; ndarray leaves: (rows, *shape)
        self._widths: dict = {}  # group -> columns in use
        self._child: dict = {}  # (parent index, key) -> node
        self._by_path: dict = {}  # key path -> node
        self._row_pattern = np.zeros(self._cap, dtype=np.int32)
        self._pattern_id: dict = {b"": 0}
        self._pattern_codes = np.zeros((8, 16), dtype=np.uint8)  # (patterns, nodes)
        self._n_patterns = 1
        self._mixed = False  # some leaf has values of several kinds (needs the per-row kind codes)
        self._codes_now: dict = {}  # node index -> kind code of the row being written
        self._plan = None
        self._layout = 0  # bumped when a node is added or changes storage (the batch plan is recompiled)

    def __len__(self) -> int:
        return self._rows - 1

    # -- recording -------------------------------------------------------------------------------

    def add(self, info: dict) -> int:
        """Record ``info``; returns its row (>= 1).

        Raises:
            NotImplementedError: a key that is a dict in one record and a value in another, an
                array that changes shape, or ``final_obs`` (batched specially by Gymnasium).
        """
        row = self._rows
        if row >= self._cap:
            self._grow_rows()
        self._codes_now = {}
        self._write(self.root, info, row)
        codes = np.zeros(len(self.nodes), dtype=np.uint8)
        for j, c in self._codes_now.items():
            codes[j] = c
        key = codes.tobytes().rstrip(b"\0")
        pid = self._pattern_id.get(key)
        if pid is None:
            pid = self._pattern_id[key] = self._n_patterns
            if pid >= self._pattern_codes.shape[0] or len(codes) > self._pattern_codes.shape[1]:
                self._pattern_codes = self._widened(self._pattern_codes, 2 * max(pid + 1, self._pattern_codes.shape[0]),
                                                    max(2 * len(codes), self._pattern_codes.shape[1]))
            self._pattern_codes[pid, : len(codes)] = codes
            self._n_patterns += 1
        self._row_pattern[row] = pid
        self._rows += 1
        return row

    def _grow_rows(self):
        new = 2 * self._cap
        p = np.zeros(new, dtype=np.int32)
        p[: self._cap] = self._row_pattern
        self._row_pattern = p
        for g, t in self._tables.items():
            self._tables[g] = self._widened(t, new, None)
        self._cap = new

    @staticmethod
    def _widened(t: np.ndarray, rows: int, cols: int | None) -> np.ndarray:
        shape = (rows, *t.shape[1:]) if cols is None else (rows, cols)
        out = _zeros(shape, t.dtype)
        if cols is None:
            out[: t.shape[0]] = t
        else:
            out[: t.shape[0], : t.shape[1]] = t
        return out

    def _node(self, parent: _Node, key, is_dict: bool) -> _Node:
        node = self._child.get((parent.index, key))
        if node is None:
            if key == "final_obs":
                raise NotImplementedError("a recorded info has a 'final_obs' key (Gymnasium batches it specially)")
            node = _Node(key, is_dict, len(self.nodes), parent.path + (key,))
            self.nodes.append(node)
            self._by_path[node.path] = node
            parent.children.append(node)
            self._child[(parent.index, key)] = node
            self._layout += 1
        elif node.is_dict != is_dict:
            raise NotImplementedError(f"info key {key!r} is a dict in one record and a value in another")
        return node

    def _code(self, kind) -> int:
        code = self._kinds.get(kind)
        if code is None:
            code = len(self._kind_of_code)
            if code > 255:  # pragma: no cover - a handful of kinds exist
                raise NotImplementedError("too many info value kinds")
            self._kinds[kind] = code
            self._kind_of_code.append(kind)
        return code

    def _new_column(self, group, dtype, shape=()) -> tuple:
        if isinstance(group, tuple):  # an ndarray leaf: its own table
            self._tables[group] = _zeros((self._cap, *shape), dtype)
            return group, 0
        t = self._tables.get(group)
        width = self._widths.get(group, 0)
        if t is None:
            t = _zeros((self._cap, 8), dtype)
        elif width >= t.shape[1]:
            t = self._widened(t, self._cap, 2 * t.shape[1])
        self._tables[group] = t
        self._widths[group] = width + 1
        return group, width

    def _rows_with(self, node: _Node) -> np.ndarray:
        """Rows recorded so far that have ``node``."""
        has = self._pattern_codes[: self._n_patterns, node.index] != 0 if node.index < self._pattern_codes.shape[1] else \
            np.zeros(self._n_patterns, dtype=bool)
        return np.flatnonzero(has[self._row_pattern[: self._rows]])

    def _write(self, parent: _Node, info: dict, row: int):
        for key, value in info.items():
            if isinstance(value, dict):
                node = self._node(parent, key, True)
                self._codes_now[node.index] = 1
                self._write(node, value, row)
                continue
            node = self._node(parent, key, False)
            kind = _kind_key(value)
            code = self._code(kind)
            self._codes_now[node.index] = code
            if node.group is None and not node.const:  # a new leaf: constant until a second value arrives
                node.kinds.add(code)
                node.const_key = _const_key(value, kind)
                if node.const_key is not None:
                    node.const = True
                    node.const_value = value.copy() if isinstance(kind, tuple) else value
                    continue
                self._place(node, kind)
            elif node.const:
                if code in node.kinds and _same_value(value, node.const_value, kind, node.const_key):
                    continue
                self._place(node, self._kind_of_code[next(iter(node.kinds))])
            if code not in node.kinds:
                node.kinds.add(code)
                self._layout += 1
                self._mixed = True  # batches need the per-row kind codes
                if node.group != "object":  # the leaf changed type: keep its values as raw objects from now on
                    self._to_object(node)
            self._store(node, row, value, kind)

    def _place(self, node: _Node, kind):
        """Give a leaf its column (by its first kind); a constant leaf's value goes into the rows so far."""
        self._layout += 1
        if isinstance(kind, tuple):
            node.group, node.column = self._new_column(("ndarray", node.index), np.dtype(kind[2]), kind[1])
        elif kind is object:
            node.group, node.column = self._new_column("codes", np.int32)
            node.pool = np.empty(16, dtype=object)
        else:
            dt = np.dtype(kind)
            node.group, node.column = self._new_column(dt.str, dt)
        if node.const:
            value = node.const_value
            node.const, node.const_value, node.const_key = False, None, None
            for r in self._rows_with(node):
                self._store(node, r, value, kind)

    def _store(self, node: _Node, row: int, value, kind):
        t = self._tables[node.group]
        if node.group == "codes":
            key = value if type(value) is str else _freeze(value)  # a str key never equals a pickle (bytes)
            if key is None:  # unhashable: this leaf keeps raw objects from now on
                self._to_object(node)
                self._tables["object"][row, node.column] = value
                return
            code = node.pool_index.get(key)
            if code is None:
                code = len(node.pool_index)
                if code >= _POOL_MIN and 2 * code > self._rows:  # nearly one value per row: keep raw objects
                    self._to_object(node)
                    self._tables["object"][row, node.column] = value
                    return
                node.pool_index[key] = code
                if code >= len(node.pool):
                    pool = np.empty(2 * len(node.pool), dtype=object)
                    pool[: len(node.pool)] = node.pool
                    node.pool = pool
                node.pool[code] = value
            t[row, node.column] = code
        elif isinstance(node.group, tuple):
            if value.shape != t.shape[1:]:
                raise NotImplementedError(f"info array {node.key!r} changes shape between records")
            t[row] = value
        else:
            t[row, node.column] = value

    def _to_object(self, node: _Node):
        old_group, old = node.group, self._tables[node.group]
        col = node.column
        group, column = self._new_column("object", object)
        t = self._tables["object"]
        for r in self._rows_with(node):
            if r == self._rows:
                continue  # the row being written
            v = old[r] if isinstance(old_group, tuple) else old[r, col]
            if old_group == "codes":
                v = node.pool[v]
            elif isinstance(v, np.ndarray):
                v = v.copy()
            else:  # back to the recorded Python type
                v = self._kind_of_code[self._pattern_codes[self._row_pattern[r], node.index]](v)
            t[r, column] = v
        node.group, node.column, node.pool, node.pool_index = group, column, None, {}
        self._layout += 1

    def value(self, node: _Node, row: int):
        """The value recorded for leaf ``node`` in ``row`` (its recorded Python type), or ``None``."""
        code = self._pattern_codes[self._row_pattern[row], node.index] if node.index < self._pattern_codes.shape[1] else 0
        if not row or not code:
            return None
        if node.const:
            v = node.const_value
            return v.copy() if isinstance(v, np.ndarray) else v
        t = self._tables[node.group]
        if isinstance(node.group, tuple):
            return t[row].copy()
        v = t[row, node.column]
        if node.group == "codes":
            return node.pool[v]
        if node.group == "object":
            return v
        return self._kind_of_code[code](v)

    def raw(self, path: tuple, rows: np.ndarray) -> list:
        """The recorded values of the leaf at ``path`` for ``rows`` (``None`` where absent)."""
        node = self._by_path.get(path)
        return [None if node is None else self.value(node, int(r)) for r in rows]

    # -- batching -------------------------------------------------------------------------------

    def batch(self, rows: np.ndarray, only: np.ndarray | None = None) -> dict:
        """The batched info of ``rows`` (int array (n,)): what ``VectorEnv._add_info`` builds when env
        ``i`` contributes the dict recorded in row ``rows[i]`` (row 0: nothing).

        Args:
            rows: recorded rows, one per env.
            only: optional bool mask (n,): envs outside it contribute nothing (as row 0).
        """
        if only is not None:
            rows = np.where(only, rows, 0)
        n, n_nodes = len(rows), len(self.nodes)
        pids = self._row_pattern[rows]
        codes = self._pattern_codes[: self._n_patterns, :n_nodes]
        if n and (pids == pids[0]).all():  # one pattern (the usual case): every mask is all True or all False
            has = codes[pids[0]] != 0
            masks = np.empty((n_nodes, n), dtype=bool)
            masks[:] = has[:, None]
            anyp = allp = has.tolist()
            present = None
        else:
            present = codes[pids]  # (n, nodes) kind codes
            masks = np.ascontiguousarray((present != 0).T)  # (nodes, n): masks[j] is node j's "_key" array
            anyp, allp = masks.any(axis=1).tolist(), masks.all(axis=1).tolist()
        if self._mixed and present is None:
            present = codes[pids]
        blocks = {g: t[rows] if isinstance(g, tuple) or self._widths[g] == t.shape[1] else t[rows, : self._widths[g]]
                  for g, t in self._tables.items()}
        plan = self._plan_for(n)
        out: dict = {}
        dicts = [out] * (len(plan) + 1)  # dicts[k]: the dict made by step k (0: the output)
        codes_block = blocks.get("codes")
        for k, (p, key, mkey, j, op, arg) in enumerate(plan, start=1):
            if not anyp[j]:
                continue
            if op == _COLUMN:
                value = blocks[arg[0]][:, arg[1]]
            elif op == _CONST:
                value = arg.copy()
                if not allp[j]:  # zeros / None where an env lacks it
                    value[~masks[j]] = np.zeros(value.shape[1:], dtype=value.dtype) if value.dtype != object else None
            elif op == _CODES:
                value = arg.pool.take(codes_block[:, arg.column])
                if not allp[j]:
                    value[~masks[j]] = None
            elif op == _DICT:
                value = dicts[k] = {}
            elif op == _ARRAY:
                value = blocks[arg]
            else:
                value = self._mixed_leaf(self.nodes[j], masks[j], present, blocks)
            d = dicts[p]
            d[key] = value
            d[mkey] = masks[j]
        return out

    def _plan_for(self, n: int) -> list:
        """The build steps of a batch of ``n`` envs, depth first: ``(parent step, key, mask key,
        node index, op, arg)`` (step numbers from 1; parent 0 is the output dict); recompiled when
        the nodes or their storage change."""
        if self._plan is not None and self._plan[0] == (n, self._layout):
            return self._plan[1]
        plan: list = []

        def walk(node: _Node, parent: int):
            for child in node.children:
                if child.is_dict:
                    plan.append((parent, child.key, child.mask_key, child.index, _DICT, None))
                    walk(child, len(plan))
                    continue
                if child.const:
                    op, arg = _CONST, child.const_array(n, self._kind_of_code[next(iter(child.kinds))])
                elif child.group == "codes":
                    op, arg = _CODES, child
                elif isinstance(child.group, tuple):
                    op, arg = _ARRAY, child.group
                elif len(child.kinds) == 1:
                    op, arg = _COLUMN, (child.group, child.column)
                else:
                    op, arg = _MIXED, None
                plan.append((parent, child.key, child.mask_key, child.index, op, arg))

        walk(self.root, 0)
        self._plan = ((n, self._layout), plan)
        return plan

    def _mixed_leaf(self, node: _Node, m: np.ndarray, present, blocks) -> np.ndarray:
        """A leaf with values of several kinds: the first env that has it decides the array type, as
        ``_add_info`` does."""
        kind = self._kind_of_code[present[int(np.argmax(m)), node.index]]
        raw = blocks["object"][:, node.column]
        if kind is object:
            return raw.copy()
        shape, dtype = (kind[1], np.dtype(kind[2])) if isinstance(kind, tuple) else ((), np.dtype(kind))
        value = np.zeros((len(m), *shape), dtype=dtype)
        for i in np.flatnonzero(m):
            value[i] = raw[i]
        return value


def batch_two(ta: "InfoTable", rows_a: np.ndarray, tb: "InfoTable", rows_b: np.ndarray) -> dict:
    """The batched info of envs whose records are in two tables (env ``i`` contributes row
    ``rows_a[i]`` of ``ta`` or row ``rows_b[i]`` of ``tb``; the other one is 0), exactly as
    ``VectorEnv._add_info`` builds it over all envs in env order."""
    return _merge(ta.batch(rows_a), tb.batch(rows_b), ta, rows_a, tb, rows_b, ())


class _Batcher(VectorEnv):
    """Gymnasium's own ``VectorEnv._add_info`` (for the rare leaves whose type differs between envs)."""

    def __init__(self, n: int):
        self.num_envs = n


def _merge(a: dict, b: dict, ta, rows_a, tb, rows_b, path: tuple) -> dict:
    out = dict(a)
    for key, vb in b.items():
        if isinstance(key, str) and key.startswith("_") and key[1:] in b:
            continue  # a mask: merged with its key
        mb = b[f"_{key}"]
        if key not in a:
            out[key], out[f"_{key}"] = vb, mb
            continue
        va, ma = a[key], a[f"_{key}"]
        if isinstance(va, dict) and isinstance(vb, dict):
            out[key] = _merge(va, vb, ta, rows_a, tb, rows_b, path + (key,))
        elif va.dtype == vb.dtype:  # both cast the recorded values to this type, as one batch would
            value = va.copy()
            value[mb] = vb[mb]
            out[key] = value
        else:  # the first env that has it decides the type: batch the recorded values with _add_info
            raw_a, raw_b = ta.raw(path + (key,), rows_a), tb.raw(path + (key,), rows_b)
            ref, infos = _Batcher(len(ma)), {}
            for i in np.flatnonzero(ma | mb):
                infos = ref._add_info(infos, {key: raw_a[i] if ma[i] else raw_b[i]}, int(i))
            out[key] = infos[key]
        out[f"_{key}"] = ma | mb
    return out


class MacroVectorEnv(VectorEnv):
    """``num_envs`` macro RL envs (``FWBench-RL-Macro-v0``) stepped together with NumPy over
    recorded per-case outcomes (see the module docstring).

    Observation: ``Box(num_envs, n)`` float32 (the features of the single env). Action:
    ``MultiDiscrete([12] * num_envs)`` (one :data:`~fwgym.rl.macro.SINGLE_MENU` index per env).
    :meth:`action_masks` gives ``(num_envs, 12)`` bool (what ``SyncVectorEnv.call("action_masks")``
    stacks).

    Args:
        num_envs: number of sub-envs (>= 1).
        autoreset_mode: a :class:`gymnasium.vector.AutoresetMode` (``NEXT_STEP``, the default,
            ``SAME_STEP`` or ``DISABLED``), its value (``"NextStep"``, ...) or ``"next_step"``,
            ``"same_step"``, ``"disabled"``.
        variant: must be ``"macro"`` (the sequential menu has multi-step episodes: use
            ``SyncVectorEnv``/``AsyncVectorEnv`` over ``FWBench-RL-Sequential-v0``).
        infos: ``True`` (default): the batched infos, equal to SyncVectorEnv's. ``False``: ``{}``
            (as ``CartPoleVectorEnv``; under same-step autoreset only ``final_obs`` / ``_final_obs``),
            for training loops that read no info (observations, rewards, terminations, truncations
            and masks are unchanged); most of a step's cost at large ``num_envs`` is the infos.
        **kwargs: :func:`fwgym.rl.make_rl_env` arguments (domain, split, lead, reward, features,
            cycle_hire_stations, budget, max_calls, tools, case_ids, models, forecasters, sigma ...).

    Attributes:
        recorded: ``{"cases": resets recorded, "steps": (case, entry) outcomes recorded}``, i.e. the
            episodes played through the real env so far.

    Raises:
        ValueError: ``num_envs < 1``, an unknown autoreset mode, a variant other than ``"macro"``, or
            any :func:`~fwgym.rl.make_rl_env` argument error.
    """

    def __init__(self, num_envs: int = 1, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 variant: str = "macro", infos: bool = True, **kwargs):
        from fwgym.rl.features import feature_index
        from fwgym.rl.env import make_rl_env

        num_envs = check_int("num_envs", num_envs, minimum=1)
        if not isinstance(autoreset_mode, AutoresetMode):
            if autoreset_mode not in _MODES:
                raise ValueError(f"autoreset_mode must be one of {list(_MODES)}, got {autoreset_mode!r}")
            autoreset_mode = _MODES[autoreset_mode]
        if not isinstance(infos, (bool, np.bool_)):
            raise ValueError(f"infos must be True or False, got {infos!r}")
        self.infos = bool(infos)
        if variant != "macro":
            raise ValueError(f"the native vector env is for the macro variant (one step per episode), got variant={variant!r}; "
                             "use gymnasium's SyncVectorEnv/AsyncVectorEnv for the sequential menu")
        self.num_envs = int(num_envs)
        self.autoreset_mode = autoreset_mode
        self.metadata = {"autoreset_mode": autoreset_mode, "render_modes": []}
        self.render_mode = None
        self._oracle = make_rl_env(variant="macro", **kwargs)  # the one episode loop every outcome comes from
        self.env_kwargs = dict(kwargs)
        self.single_observation_space = self._oracle.observation_space
        self.single_action_space = self._oracle.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.menu = self._oracle.menu
        self._n_entries = E = len(self.menu)

        inner = self._oracle.unwrapped
        self.cases = inner.cases
        self._cum = np.asarray(inner._cum_weights, dtype=np.float64)
        self._slot_of_case = np.full(len(self.cases), -1, dtype=np.int64)
        self._slot_of_id: dict[str, int] = {}
        self._slot_ids: list[str] = []
        self._fresh: int | None = None  # the slot whose reset the oracle is at (no step taken yet)

        # Rows: slot s owns rows 1 + s*(E+1) + e (e < E: the outcome of entry e; e == E: its reset).
        # Observations: per row when the episode-fixed features are few (compact), else the fixed
        # part per slot and the rest per row (all 403: 352 fixed).
        first_varying = feature_index("budget_left_frac")  # features before it are fixed once the catalog is known
        fixed = np.array([feature_index(f) < first_varying for f in self._oracle.controller.feature_names], dtype=bool)
        self._n_obs = n_obs = len(fixed)
        self._split_obs = int(fixed.sum()) > n_obs // 2
        self._fixed_pos, self._var_pos = np.flatnonzero(fixed), np.flatnonzero(~fixed)
        k = len(self._fixed_pos)  # the usual layout: the fixed features first (slices, not index arrays)
        self._fixed_first = bool(fixed[:k].all()) and not fixed[k:].any()
        self._stride = E + 1
        cap = 64
        self._fixed_obs = np.zeros((cap, len(self._fixed_pos) if self._split_obs else 0), dtype=np.float32)
        rows = 1 + cap * self._stride
        self._row_slot = np.zeros(rows, dtype=np.int64)
        self._obs = np.zeros((rows, len(self._var_pos) if self._split_obs else n_obs), dtype=np.float32)
        self._reward = np.zeros(rows, dtype=np.float64)
        self._term = np.zeros(rows, dtype=bool)
        self._trunc = np.zeros(rows, dtype=bool)
        self._masks = np.zeros((rows, E), dtype=bool)
        self._info_row = np.zeros(rows, dtype=np.int64)  # row in its InfoTable; 0 = not recorded yet
        self._reset_infos, self._step_infos = InfoTable(1024), InfoTable(4096)
        self.recorded = {"cases": 0, "steps": 0}

        self._gens: list = [None] * self.num_envs
        self._u = np.zeros((self.num_envs, _DRAW_BLOCK), dtype=np.float64)
        self._u_pos = np.full(self.num_envs, _DRAW_BLOCK, dtype=np.int64)
        self._rows = np.zeros(self.num_envs, dtype=np.int64)  # each env's current row
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._ever_reset = False

    # -- recording the real env's outcomes -----------------------------------------------------

    def _grow(self, slots_needed: int):
        cap = self._fixed_obs.shape[0]
        if slots_needed <= cap:
            return
        new = max(2 * cap, slots_needed)
        f = np.zeros((new, self._fixed_obs.shape[1]), dtype=np.float32)
        f[:cap] = self._fixed_obs
        self._fixed_obs = f
        rows_old, rows_new = 1 + cap * self._stride, 1 + new * self._stride
        for name in ("_row_slot", "_obs", "_reward", "_term", "_trunc", "_masks", "_info_row"):
            old = getattr(self, name)
            a = np.zeros((rows_new, *old.shape[1:]), dtype=old.dtype)
            a[:rows_old] = old
            setattr(self, name, a)

    def _record(self, row: int, slot: int, obs, info: dict, reset: bool):
        obs = np.asarray(obs)
        if obs.dtype != np.float32 or obs.shape != (self._n_obs,):  # pragma: no cover - the wrapper's Box
            raise RuntimeError(f"unexpected observation {obs.dtype} {obs.shape}")
        if self._split_obs:
            if reset:
                self._fixed_obs[slot] = obs[self._fixed_pos]
            elif not np.array_equal(obs[self._fixed_pos], self._fixed_obs[slot]):  # pragma: no cover
                raise RuntimeError("an episode-fixed feature changed within the episode; the native vector env cannot batch it")
            self._obs[row] = obs[self._var_pos]
        else:
            self._obs[row] = obs
        self._row_slot[row] = slot
        self._masks[row] = self._oracle.action_masks()
        self._info_row[row] = (self._reset_infos if reset else self._step_infos).add(info)

    def _new_slot(self, case_id) -> int:
        """Record the reset of ``case_id`` (played through the real env, which validates the id) in a new slot."""
        slot = len(self._slot_ids)
        self._grow(slot + 1)
        obs, info = self._oracle.reset(options={"case_id": case_id})
        self._record(1 + slot * self._stride + self._n_entries, slot, obs, info, reset=True)
        self._slot_ids.append(case_id)
        self._slot_of_id[case_id] = slot
        self.recorded["cases"] += 1
        self._fresh = slot
        return slot

    def _record_step(self, slot: int, entry: int) -> None:
        """Play ``entry`` on the slot's case through the real env (reset + one macro step) and record it."""
        if self._fresh != slot:
            self._oracle.reset(options={"case_id": self._slot_ids[slot]})
        self._fresh = None
        obs, reward, terminated, truncated, info = self._oracle.step(entry)
        row = 1 + slot * self._stride + entry
        self._reward[row], self._term[row], self._trunc[row] = float(reward), bool(terminated), bool(truncated)
        self._record(row, slot, obs, info, reset=False)
        self.recorded["steps"] += 1

    def _slots_for_cases(self, case_index: np.ndarray) -> np.ndarray:
        slots = self._slot_of_case[case_index]
        new = slots < 0
        for k in (np.flatnonzero(new) if new.any() else ()):
            c = int(case_index[k])
            if self._slot_of_case[c] < 0:
                cid = self.cases[c].case_id
                s = self._slot_of_id.get(cid)
                self._slot_of_case[c] = s if s is not None else self._new_slot(cid)
            slots[k] = self._slot_of_case[c]
        return slots

    def _slot_for_id(self, case_id) -> int:
        s = self._slot_of_id.get(case_id) if isinstance(case_id, str) else None
        return self._new_slot(case_id) if s is None else s

    def precompute(self, case_ids: Sequence[str] | None = None, entries: Sequence[int] | None = None) -> dict:
        """Record the outcomes of ``case_ids`` (default: the whole pool) x ``entries`` (default: the
        whole menu) now, through the real env, so that later steps on them are cache hits.

        Returns:
            a copy of :attr:`recorded`.

        Raises:
            ValueError: a case id the env refuses, an entry outside the menu.
        """
        ids = [c.case_id for c in self.cases] if case_ids is None else list(case_ids)
        entries = list(range(self._n_entries)) if entries is None else [int(e) for e in entries]
        if any(not 0 <= e < self._n_entries for e in entries):
            raise ValueError(f"entries must be menu indices 0..{self._n_entries - 1}, got {entries}")
        for cid in ids:
            slot = self._slot_for_id(cid)
            for e in entries:
                if self._info_row[1 + slot * self._stride + e] == 0:
                    self._record_step(slot, e)
        return dict(self.recorded)

    # -- seeding and case draws ----------------------------------------------------------------

    def _draw(self, envs: np.ndarray) -> np.ndarray:
        """One uniform per env of ``envs`` from its own generator, as ``FWBenchEnv.reset`` draws it."""
        pos = self._u_pos[envs]
        refill = pos >= _DRAW_BLOCK
        for k in (np.flatnonzero(refill) if refill.any() else ()):
            i = int(envs[k])
            if self._gens[i] is None:  # never seeded: gymnasium seeds from entropy on first use
                self._gens[i], _ = seeding.np_random(None)
            self._u[i] = self._gens[i].random(_DRAW_BLOCK)
            pos[k] = 0
        u = self._u[envs, pos]
        self._u_pos[envs] = pos + 1
        return u

    def _reset_rows(self, envs: np.ndarray, case_id=None) -> np.ndarray:
        """The reset rows of ``envs``: ``case_id`` for all, or each env's weighted case draw."""
        if case_id is not None:
            slots = np.full(len(envs), self._slot_for_id(case_id), dtype=np.int64)
        else:
            idx = np.searchsorted(self._cum, self._draw(envs), side="right")
            slots = self._slots_for_cases(np.minimum(idx, len(self.cases) - 1))
        return 1 + slots * self._stride + self._n_entries

    # -- gymnasium API -------------------------------------------------------------------------

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every sub-env (or those of ``options["reset_mask"]``), seeded as SyncVectorEnv seeds
        (``seed + i``, a list, or ``None`` to continue each generator); ``options["case_id"]`` plays
        that case in every reset env.

        Returns:
            ``(observations (num_envs, n) float32, batched info)``.

        Raises:
            ValueError, TypeError: a seed list of the wrong length, a bad ``reset_mask``, unknown
                option keys, or a case id the env refuses (another split or domain, unknown).
        """
        n = self.num_envs
        if seed is None:
            seeds = [None] * n
        elif is_int(seed):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
        if len(seeds) != n:
            raise ValueError(f"If seeds are passed as a list the length must match num_envs={n} but got length={len(seeds)}.")
        options = dict(options) if options else {}
        reset_mask = options.pop("reset_mask", None)
        unknown = set(options) - {"case_id"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; supported: ['case_id', 'reset_mask']")
        if reset_mask is not None:
            if not isinstance(reset_mask, np.ndarray):
                raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(reset_mask)}")
            if reset_mask.shape != (n,):
                raise ValueError(f"`options['reset_mask']` must have shape `({n},)`, got {reset_mask.shape}")
            if reset_mask.dtype != np.bool_:
                raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {reset_mask.dtype}")
            if not reset_mask.any():
                raise ValueError("`options['reset_mask']` must contain a boolean array with at least one True value, "
                                 f"got reset_mask={reset_mask}")
            envs = np.flatnonzero(reset_mask)
        else:
            envs = np.arange(n)
        for i in envs:
            if seeds[i] is not None:
                self._gens[i], _ = seeding.np_random(seeds[i])
                self._u_pos[i] = _DRAW_BLOCK
        rows = self._reset_rows(envs, options.get("case_id"))
        self._rows[envs] = rows
        self._autoreset[envs] = False
        self._ever_reset = True
        info = self._reset_infos.batch(self._info_row[self._rows], only=reset_mask) if self.infos else {}
        return self._observations(self._rows), info

    def step(self, actions):
        """Step every sub-env with its menu index (under next-step autoreset, the envs whose episode
        ended at the previous step are reset instead and their actions ignored).

        Returns:
            ``(observations (num_envs, n) float32, rewards (num_envs,) float64, terminations,
            truncations (num_envs,) bool, batched info)``.

        Raises:
            RuntimeError: ``reset`` was never called.
            ValueError: ``actions`` is not ``num_envs`` integer indices of the menu.
            AssertionError: under ``autoreset_mode="disabled"``, a step of an env whose episode has
                ended (as SyncVectorEnv asserts).
        """
        if not self._ever_reset:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(actions)
        n, E = self.num_envs, self._n_entries
        if a.shape != (n,) or a.dtype.kind not in "iu":
            raise ValueError(f"actions must be {n} integer menu indices (shape ({n},)), got a {a.dtype} array of shape {a.shape}")
        mode = self.autoreset_mode
        if mode == AutoresetMode.DISABLED:
            assert not self._autoreset.any(), f"{self._autoreset=}"
        stepping = ~self._autoreset if mode == AutoresetMode.NEXT_STEP else None
        act = a if stepping is None else a[stepping]
        if act.size and (act.min() < 0 or act.max() >= E):
            raise ValueError(f"macro index must be in 0..{E - 1}, got {int(act[(act < 0) | (act >= E)][0])}")
        slots = self._row_slot[self._rows]
        rows = 1 + slots * self._stride + a.astype(np.int64, copy=False)
        if stepping is not None and not stepping.all():  # next-step autoreset of the envs that ended
            resetting = ~stepping
            rows[resetting] = self._reset_rows(np.flatnonzero(resetting))
        else:
            resetting = None
        info_rows = self._info_row[rows]
        missing = info_rows == 0
        if missing.any():
            for i in np.flatnonzero(missing):  # first visit of a (case, entry): play it through the real env
                if self._info_row[rows[i]] == 0:
                    self._record_step(int(slots[i]), int(a[i]))
            info_rows = self._info_row[rows]
        reward, term, trunc = self._reward[rows], self._term[rows], self._trunc[rows]
        if resetting is not None:
            if not self.infos:
                info = {}
            elif resetting.all():
                info = self._reset_infos.batch(info_rows)
            else:
                info = batch_two(self._step_infos, np.where(stepping, info_rows, 0),
                                 self._reset_infos, np.where(resetting, info_rows, 0))
            self._rows = rows
            self._autoreset = term | trunc
            return self._observations(rows), reward, term, trunc, info
        done = term | trunc
        if mode == AutoresetMode.SAME_STEP and done.any():
            envs = np.flatnonzero(done)
            final = self._observations(rows)
            final_obs = np.full(n, None, dtype=object)
            final_obs[envs] = np.fromiter((final[i] for i in envs), dtype=object, count=len(envs))
            new_rows = rows.copy()
            new_rows[envs] = self._reset_rows(envs)
            new_info_rows = self._info_row[new_rows]
            if not self.infos:
                self._rows = new_rows
                return (self._observations(new_rows), reward, term, trunc,
                        {"final_obs": final_obs, "_final_obs": done.copy()})
            if done.all():
                rest = self._reset_infos.batch(new_info_rows)
            else:
                rest = batch_two(self._step_infos, np.where(done, 0, new_info_rows),
                                 self._reset_infos, np.where(done, new_info_rows, 0))
            info = {"final_obs": final_obs, "_final_obs": done.copy(),
                    "final_info": self._step_infos.batch(info_rows, only=done), "_final_info": done.copy(), **rest}
            self._rows = new_rows
            return self._observations(new_rows), reward, term, trunc, info
        self._rows = rows
        self._autoreset = done
        return self._observations(rows), reward, term, trunc, self._step_infos.batch(info_rows) if self.infos else {}

    def _observations(self, rows: np.ndarray) -> np.ndarray:
        if not self._split_obs:
            return self._obs[rows]
        if self._fixed_first:
            return np.concatenate((self._fixed_obs[self._row_slot[rows]], self._obs[rows]), axis=1)
        out = np.empty((len(rows), self._n_obs), dtype=np.float32)
        out[:, self._fixed_pos] = self._fixed_obs[self._row_slot[rows]]
        out[:, self._var_pos] = self._obs[rows]
        return out

    def action_masks(self) -> np.ndarray:
        """``(num_envs, 12)`` bool: each sub-env's allowed menu entries now (all False for an env
        whose episode has just ended, until its reset), as the single env's ``action_masks()``."""
        return self._masks[self._rows]

    def call(self, name: str, *args, **kwargs) -> tuple:
        """``SyncVectorEnv.call`` for ``"action_masks"`` (a tuple of per-env masks).

        Raises:
            AttributeError: any other name (the sub-envs are rows of a table here, not env objects).
        """
        if name == "action_masks":
            return tuple(self.action_masks())
        raise AttributeError(f"MacroVectorEnv supports call('action_masks') only, got {name!r}")

    def close_extras(self, **kwargs):
        self._oracle.close()


__all__ = ["MacroVectorEnv", "InfoTable", "batch_two"]
