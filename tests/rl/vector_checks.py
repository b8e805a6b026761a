"""Checks shared by the RL vector-env tests: outputs equal as SyncVectorEnv's are compared, and gymnasium's own
``VectorEnv._add_info`` as the reference batch."""
from __future__ import annotations

import math
import struct

import numpy as np
from gymnasium.vector import VectorEnv

__all__ = ["assert_same", "reference_batch"]


def assert_same(a, b, path="info"):
    """Equal as SyncVectorEnv's outputs are compared: same keys, array dtypes, shapes and values (a NaN equal to
    a NaN of the same bits, object elements compared by type and value, floats by sign too)."""
    if isinstance(a, dict):
        assert isinstance(b, dict), path
        assert set(a) == set(b), (path, sorted(set(a) ^ set(b)))
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), (path, type(b))
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (path, a.dtype, b.dtype, a.shape, b.shape)
        if a.dtype == object:
            for x, y in zip(a.tolist(), b.tolist()):
                assert_same(x, y, path + "[]")
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), path
            if a.dtype.kind == "f":
                assert np.array_equal(np.signbit(a), np.signbit(b)), path
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for x, y in zip(a, b):
            assert_same(x, y, path + "[]")
    elif isinstance(a, float) and math.isnan(a):  # the same NaN: sign and payload bits
        assert isinstance(b, float) and struct.pack(">d", a) == struct.pack(">d", b), (path, a, b)
    else:
        assert type(a) is type(b) and a == b, (path, a, b)
        if isinstance(a, float):
            assert math.copysign(1, a) == math.copysign(1, b), path


class _Batcher(VectorEnv):
    def __init__(self, n: int):
        self.num_envs = n


def reference_batch(records, rows):
    ref, infos = _Batcher(len(rows)), {}
    for i, r in enumerate(rows):
        if r:
            infos = ref._add_info(infos, records[r - 1], i)
    return infos
