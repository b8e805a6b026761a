"""fwgym.validation: the one "integer, not a bool" check and its messages."""
import numpy as np
import pytest

from fwgym.validation import check_int, int_description, is_int, is_number


@pytest.mark.parametrize("value, expected", [(3, True), (np.int64(3), True), (0, True), (True, False),
                                             (np.bool_(True), False), (3.0, False), ("3", False), (None, False)])
def test_is_int(value, expected):
    assert is_int(value) is expected


@pytest.mark.parametrize("value, expected", [(3, True), (2.5, True), (np.float32(1.5), True), (np.int8(1), True),
                                             (float("nan"), True), (False, False), (np.bool_(False), False),
                                             (None, False), ("1", False)])
def test_is_number(value, expected):
    assert is_number(value) is expected


@pytest.mark.parametrize("minimum, maximum, words", [(1, None, "a positive integer"), (0, None, "a non-negative integer"),
                                                     (100, None, "an integer >= 100"), (None, 9, "an integer <= 9"),
                                                     (0, 15, "an integer in 0..15"), (None, None, "an integer")])
def test_int_description(minimum, maximum, words):
    assert int_description(minimum, maximum) == words


def test_check_int_returns_a_python_int_and_refuses_bools_floats_and_out_of_range_values():
    v = check_int("n", np.int32(7), minimum=1)
    assert v == 7 and type(v) is int
    with pytest.raises(ValueError, match=r"^n must be a positive integer, got True$"):
        check_int("n", True, minimum=1)
    with pytest.raises(ValueError, match=r"^digits must be an integer in 0\.\.15, got 16$"):
        check_int("digits", 16, minimum=0, maximum=15)
    with pytest.raises(ValueError, match=r"^budget must be a non-negative integer, got 2\.0$"):
        check_int("budget", 2.0, minimum=0)


def test_check_int_raises_the_callers_error_class():
    class StoreError(Exception):
        pass

    with pytest.raises(StoreError, match="workers must be a positive integer, got 0"):
        check_int("workers", 0, minimum=1, error=StoreError)


@pytest.mark.parametrize("call, message", [
    (lambda: __import__("fwgym.envs.fwbench", fromlist=["FWBenchEnv"]).FWBenchEnv("electricity", budget=True),
     "budget must be a non-negative integer, got True"),
    (lambda: __import__("fwgym.evaluation.bootstrap", fromlist=["x"]).ClusterBootstrap([], 0, 1),
     "n_boot must be a positive integer, got 0"),
    (lambda: __import__("fwgym.core.contract", fromlist=["x"]).shortage_weights(7),
     r"target_weekday \(Monday = 0\) must be an integer in 0\.\.6, got 7"),
])
def test_callers_use_the_shared_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()
