"""fwgym.rl.infos.InfoStore batches recorded info dicts exactly as gymnasium's VectorEnv._add_info does (hypothesis
over random records and batches), survives export/import unchanged, and persists values with their exact types."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwgym.rl.infos import InfoStore, UnsupportedInfo
from fwgym.rl.infos_export import export_store, load_store
from fwgym.rl.values import decode_value, encode_value
from vector_checks import assert_same, reference_batch


_leaf = st.one_of(st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True, width=64), st.booleans(),
                  st.none(), st.sampled_from(["a", "b", ""]), st.lists(st.integers(0, 2), max_size=3),
                  st.sampled_from([np.float32(1.5), np.int64(2), np.bool_(True), (1, "a"), 2 ** 70]))
_KEYS = ("x", "y", "z")


@st.composite
def info_dict(draw, depth=0):
    d = {}
    for k in draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=3)):
        if k == "z" and depth < 2:  # "z" is always a dict, "x"/"y" always values (gymnasium cannot batch a mix)
            d[k] = draw(info_dict(depth=depth + 1))
        elif k != "z":
            d[k] = draw(_leaf)
    if draw(st.booleans()):
        d["m"] = np.array([draw(st.booleans()), True])  # an array leaf of a fixed shape
    return d


def _raises(f):
    try:
        f()
    except (OverflowError, ValueError, TypeError) as exc:  # e.g. a float too large, NaN or None for an int array
        return type(exc)
    return None


def same_outcome(ours, reference):
    """Equal batches, or both refuse (gymnasium's array assignment raises where numpy cannot put the value into
    the array type of the first env, e.g. None or "a" into an int array)."""
    if _raises(reference) is not None:
        with pytest.raises((OverflowError, ValueError, TypeError)):
            ours()
    else:
        assert_same(ours(), reference())


def roundtrip(store: InfoStore) -> InfoStore:
    arrays, parts = export_store(store)
    json.dumps(parts)  # JSON data only
    return load_store({k: v.copy() for k, v in arrays.items()}, parts["meta"], parts["pool"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(info_dict(), min_size=1, max_size=8), data=st.data())
def test_batches_as_gymnasium_add_info(records, data):
    store = InfoStore(capacity=2)
    rows = [store.add(r) for r in records]
    assert rows == list(range(1, len(records) + 1)) and len(store) == len(records)
    loaded = roundtrip(store)
    for _ in range(3):
        batch = np.array(data.draw(st.lists(st.integers(0, len(records)), min_size=1, max_size=6)))
        only = np.array(data.draw(st.lists(st.booleans(), min_size=len(batch), max_size=len(batch))))
        for s in (store, loaded):
            same_outcome(lambda: s.batch(batch), lambda: reference_batch(records, batch))
            same_outcome(lambda: s.batch(batch, only=only), lambda: reference_batch(records, np.where(only, batch, 0)))
    for r, rec in enumerate(records, start=1):
        assert_same(store.row_dict(r), rec)
        assert_same(loaded.row_dict(r), rec)


def test_type_changes_exact_floats_and_pool():
    records = [{"v": 1, "f": 0.0, "s": "a"}, {"v": 2.5, "f": -0.0, "s": [1, 2]}, {"f": float("nan"), "s": "a"},
               {"v": 3, "f": 1e300, "s": (1, 2)}]
    store = InfoStore()
    for r in records:
        store.add(r)
    for s in (store, roundtrip(store)):
        for rows in ([1, 2, 3], [2, 1, 3], [3, 2], [0, 3, 1], [4, 4, 1]):
            rows = np.array(rows)
            assert_same(s.batch(rows), reference_batch(records, rows))
        out = s.batch(np.array([2, 1]))
        assert out["v"].dtype == np.float64 and out["v"].tolist() == [2.5, 1.0]  # the first env's type decides
        assert s.batch(np.array([1, 2]))["v"].tolist() == [1, 2]  # int array: 2.5 truncated, as _add_info does
    with pytest.raises(UnsupportedInfo):
        store.add({"s": {"nested": 1}})
    with pytest.raises(UnsupportedInfo):
        store.add({"final_obs": 1})


def test_many_rows_constants_and_shared_pool():
    """Growth of rows and columns; a constant leaf keeps no column; distinct strings and lists share one pool."""
    records = [{"id": f"case-{i}", "grid": [float(i), 0.5], "k": i % 3, "c": "same", "d": {"s": "x" if i % 2 else "y"},
                "levels": None if i % 7 == 0 else [0.5, 1.0 + i % 4]} for i in range(3000)]
    store = InfoStore(capacity=2)
    for r in records:
        store.add(r)
    node = {n.path: n for n in store.nodes}
    assert node[("c",)].state == "const" and node[("k",)].state == "typed" and node[("id",)].state == "object"
    rows = np.random.default_rng(0).integers(0, 3001, 300)
    for s in (store, roundtrip(store)):
        assert_same(s.batch(rows), reference_batch(records, rows))
        assert_same(s.batch(rows[:1]), reference_batch(records, rows[:1]))


def test_loaded_store_is_read_only_and_checked():
    store = InfoStore()
    store.add({"a": 1.5, "b": "x"})
    store.add({"a": 2.5, "b": "y"})
    arrays, parts = export_store(store)
    loaded = load_store(arrays, parts["meta"], parts["pool"])
    with pytest.raises(RuntimeError, match="read-only"):
        loaded.add({"a": 1.0})
    bad = dict(arrays)
    bad["table:codes"] = arrays["table:codes"] + 5  # codes outside the pool
    with pytest.raises(ValueError, match="pool"):
        load_store(bad, parts["meta"], parts["pool"])
    with pytest.raises(ValueError):
        load_store(arrays, {**parts["meta"], "rows": 7}, parts["pool"])


@pytest.mark.parametrize("value", [None, True, 0, -3, 2 ** 80, 1.5, -0.0, float("nan"), float("inf"), "é\n", [1, [2.5]],
                                   -float("nan"), -float("inf"), float(np.uint64(0x7FF8000000000123).view(np.float64)),
                                   (1, "a"), {"k": (1,)}, np.float32(1.25), np.int16(-2), np.bool_(False),
                                   np.arange(6, dtype=np.int32).reshape(2, 3), np.str_("x")])
def test_encode_value_round_trips_exactly(value):
    back = decode_value(json.loads(json.dumps(encode_value(value), allow_nan=False)))
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    else:
        assert_same(back, value)


def test_encode_value_refuses_what_it_cannot_restore():
    for value in (object(), {1: 2}, np.array([None], dtype=object)):
        with pytest.raises(UnsupportedInfo):
            encode_value(value)
    with pytest.raises(ValueError):
        decode_value({"__t": "pickle", "v": "..."})


def test_a_block_needs_a_record_backed_store():
    store = InfoStore(capacity=2)
    store.add({"x": 1})
    with pytest.raises(ValueError, match="no packed record"):
        store.batch(np.array([1]), block=np.zeros((1, 8), dtype=np.uint8))


def test_a_caller_changing_a_value_it_got_changes_no_later_batch():
    """Lists, nested lists, tuples holding lists and arrays in object leaves come out as copies (as each
    SyncVectorEnv step builds new ones); immutable values are shared."""
    records = [{"levels": [1.0, 2.0], "deep": [[1], 2], "t": ([1],), "c": [7], "m": np.arange(2) if i else "s",
                "s": "a"} for i in range(3)]
    records[2]["levels"] = [3.0]
    store = InfoStore(capacity=2)
    for r in records:
        store.add(r)
    for s in (store, roundtrip(store)):
        rows = np.array([1, 2, 3, 3])
        first = s.batch(rows)
        for key in ("levels", "deep", "t", "c", "m"):
            for v in first[key]:
                if isinstance(v, tuple):
                    v[0].append("X")
                elif isinstance(v, np.ndarray):
                    v[:] = 9
                elif isinstance(v, list):
                    v.append("X")
                    if isinstance(v[0], list):
                        v[0].append("X")
        assert first["levels"][2] is not first["levels"][3]
        assert_same(s.batch(rows), reference_batch(records, rows))
        assert first["s"][0] is s.batch(rows)["s"][0]  # strings are shared
