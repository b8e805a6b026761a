"""``fwgym rl verify --recompute`` (fwgym.rl.outcomes.verify.recompute_cases): seeded draws of cases played again
through the env path of a build, every row (reset and each entry) compared bit for bit with the table; an edit of
any part of a row (reward, observation, mask, an info value in the pool) with the file re-hashed is caught, and
names the case, the entry and the field."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from fwgym.rl.outcomes import OutcomeTable, build_table
from fwgym.rl.outcomes.format import read_arrow, record_fields, unpack_rows, write_arrow
from fwgym.rl.outcomes.verify import recompute_cases


@pytest.fixture(scope="module")
def table_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("recompute") / "dev"
    build_table("dev", "macro", path, limit=2, chunk_size=4, progress=False)
    return path


def _forged(table_path, tmp_path, name, edit):
    out = tmp_path / "forged"
    shutil.copytree(table_path, out)
    cols = {k: (np.array(v) if isinstance(v, np.ndarray) else list(v)) for k, v in read_arrow(out / name).items()}
    doc = json.loads((out / "manifest.json").read_text())
    if name == "rows.arrow":  # the packed records: edited through writable views of a copy
        edit(unpack_rows(cols["record"], doc["layout"]["record"]))
    else:
        edit(cols)
    doc["files"][name] = write_arrow(out / name, cols)
    (out / "manifest.json").write_text(json.dumps(doc, indent=1))
    return OutcomeTable(out)  # every hash check passes


def test_a_clean_table_recomputes_equal_and_the_draw_is_seeded(table_path):
    table = OutcomeTable(table_path)
    a = recompute_cases(table, 2, np.random.default_rng(5))
    assert a["checked"] == 2 and a["equal"] == 2 and a["different"] == [] and a["cases"] == 4
    assert recompute_cases(table, 2, np.random.default_rng(5))["case_ids"] == a["case_ids"]
    assert sorted(recompute_cases(table, 10, np.random.default_rng(0))["case_ids"]) == sorted(table.case_ids)
    with pytest.raises(ValueError, match="n must be >= 1"):
        recompute_cases(table, 0, np.random.default_rng(0))


def _set(key, row, value):
    def edit(cols):
        cols[key][row] = value
    return edit


@pytest.mark.parametrize("name, edit, field", [
    ("rows.arrow", _set("reward", 1 + 13 + 6, 0.0), "reward"),  # slot 1, entry 6: a free perfect score
    ("rows.arrow", _set("mask", 1 + 13 + 12, True), "mask"),  # slot 1's reset: every entry unmasked
    ("rows.arrow", _set("obs", 1 + 3 * 13 + 2, 7.0), "obs"),
])
def test_a_rehashed_edit_of_a_row_is_caught(table_path, tmp_path, name, edit, field):
    table = _forged(table_path, tmp_path, name, edit)
    got = recompute_cases(table, 4, np.random.default_rng(1))
    assert got["equal"] == 3 and len(got["different"]) == 1, got["different"]
    assert field in got["different"][0]["fields"]


def test_a_rehashed_edit_of_an_info_value_is_caught(table_path, tmp_path):
    pool = list(read_arrow(table_path / "pool.arrow")["value"])
    k = next(i for i, v in enumerate(pool) if v.startswith("[") and "," in v)  # a plan's levels

    def edit(cols):
        cols["value"][k] = "[" + ",".join(["2.0"] * 8) + "]"

    got = recompute_cases(_forged(table_path, tmp_path, "pool.arrow", edit), 4, np.random.default_rng(2))
    assert got["different"] and all(d["fields"] == ["info"] for d in got["different"])


def test_pack_rows_round_trips_and_refuses_malformed_fields():
    from fwgym.rl.outcomes.format import pack_rows

    cols = {"flag": np.array([True, False, True]), "x": np.arange(3, dtype=np.float64) - 0.5,
            "m": np.arange(6, dtype=np.int32).reshape(3, 2), "f": np.array([1.5, -0.0, np.nan], dtype=np.float32),
            "empty": np.zeros((3, 0), dtype=np.int64)}
    record, fields = pack_rows(cols)
    assert record.shape == (3, 24)  # 8 + 2*4 + 4 + 1 = 21 bytes, padded to 24
    assert [f[0] for f in fields][:2] == ["x", "empty"]  # by decreasing alignment: every field aligned
    back = unpack_rows(record, fields)
    for k, v in cols.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and back[k].tobytes() == v.tobytes()
    assert np.shares_memory(back["x"], record)
    specs = record_fields(fields, record.shape[1])  # the checked specs, in the list's order; unpack_rows takes them too
    assert list(specs) == [f[0] for f in fields] and specs["m"] == (fields[[f[0] for f in fields].index("m")][1],
                                                                     np.dtype(np.int32), (2,))
    assert all(unpack_rows(record, specs)[k].tobytes() == v.tobytes() for k, v in cols.items())
    with pytest.raises(ValueError, match="outside the 16-byte record"):
        record_fields(fields, 16)
    for bad in ([["x", 0, "<f8", []], ["y", 4, "<f4", []]],  # overlap
                [["x", 20, "<f8", []]],  # outside the record
                [["x", 4, "<f8", []]],  # misaligned
                [["o", 0, "|O", []]], [["x", 0, "<f8", []], ["x", 8, "<f8", []]]):
        with pytest.raises(ValueError):
            unpack_rows(record, bad)
    with pytest.raises(ValueError, match="different row counts"):
        pack_rows({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(ValueError, match="structured"):  # dtype.str would not name its fields
        pack_rows({"s": np.zeros(2, dtype=[("x", "i4")])})
    wide, wide_fields = pack_rows({"l": np.arange(3, dtype=np.longdouble), "b": np.ones(3, dtype=bool)})
    assert wide.shape[1] % np.dtype(np.longdouble).alignment == 0 and unpack_rows(wide, wide_fields)["l"].flags.aligned
    empty, empty_fields = pack_rows({"a": np.zeros((0, 3)), "b": np.zeros(0, dtype=bool)})
    assert empty.shape == (0, 32) and unpack_rows(empty, empty_fields)["a"].shape == (0, 3)
