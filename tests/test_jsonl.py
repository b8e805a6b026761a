"""JSON Lines files (fwgym.jsonl): exact round trips, clear errors, atomic writes, appends."""
import json
import math
import os

import numpy as np
import pytest

from fwgym.jsonl import append_jsonl, dumps_line, iter_jsonl, read_jsonl, to_jsonable, write_jsonl


def test_values_round_trip_exactly(tmp_path):
    values = [{"b": 0.1 + 0.2, "a": "ü \ud800 \n", "n": None, "l": [1, 2.5e-308, -0.0]},
              {"x": math.inf, "y": 1e300}]
    p = write_jsonl(tmp_path / "sub" / "v.jsonl", values, sort_keys=True)
    back = read_jsonl(p)
    assert back == values and math.copysign(1, back[0]["l"][2]) == -1
    text = p.read_text(encoding="ascii")  # every line is ASCII
    assert text.splitlines()[0].startswith('{"a": "\\u00fc \\ud800 \\n"')
    assert [n for n, _ in iter_jsonl(p)] == [1, 2]
    assert dumps_line({"z": 1, "a": 2}, sort_keys=True) == '{"a": 2, "z": 1}\n'


def test_numpy_values_are_written_as_python_values(tmp_path):
    assert to_jsonable(np.int64(3)) == 3 and to_jsonable(np.array([[1.5]])) == [[1.5]] and to_jsonable(object)
    p = tmp_path / "np.jsonl"
    write_jsonl(p, [{"i": np.int64(7), "f": np.float32(0.5), "a": np.arange(3), "b": np.bool_(True)}])
    assert read_jsonl(p) == [{"i": 7, "f": 0.5, "a": [0, 1, 2], "b": True}]


def test_errors_name_the_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3: not a JSON line .*truncated or corrupt"):
        read_jsonl(p)
    p.write_text('{"a": 1}\n"text"\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: expected a JSON object, got a str"):
        read_jsonl(p)
    assert read_jsonl(p, objects=False) == [{"a": 1}, "text"]
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "none.jsonl")


def test_a_failed_write_leaves_the_old_file(tmp_path):
    p = write_jsonl(tmp_path / "keep.jsonl", [{"a": 1}])
    with pytest.raises(ValueError):  # a circular value cannot be written
        loop = []
        loop.append(loop)
        write_jsonl(p, [{"a": 2}, loop])
    assert read_jsonl(p) == [{"a": 1}] and os.listdir(tmp_path) == ["keep.jsonl"]


def test_append_adds_lines(tmp_path):
    p = tmp_path / "deep" / "log.jsonl"
    append_jsonl(p, {"k": 1})
    append_jsonl(p, {"k": 2, "v": np.float64(0.25)}, fsync=True)
    assert read_jsonl(p) == [{"k": 1}, {"k": 2, "v": 0.25}]
    assert p.read_text().count("\n") == 2 and json.loads(p.read_text().splitlines()[1]) == {"k": 2, "v": 0.25}
