"""A run-time check of JSON data against the TypedDicts that type it (tests only): :func:`shape_problems`.

mypy holds the code that builds a ``ToolResult``, a ``Catalog`` or a ``Trace`` to its TypedDict where it can see
the literal; these checks hold what the writers actually produce (dicts built from comprehensions, casts, JSON read
back) to the same classes, key by key and value by value.
"""
import types
import typing
from typing import Any

#: JSON scalars: a bool is no int or float; an int fits a float field (JSON does not tell 2 from 2.0)
_SCALARS = {
    type(None): ("null", lambda v: v is None),
    bool: ("a bool", lambda v: isinstance(v, bool)),
    int: ("an int", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    float: ("a float", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    str: ("a string", lambda v: isinstance(v, str)),
}


def _typeddict_problems(value: Any, tp: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__} is not a {tp.__name__} object"]
    hints = typing.get_type_hints(tp)
    out = [f"{where}: {tp.__name__} lacks {k!r}" for k in sorted(tp.__required_keys__ - set(value))]
    out += [f"{where}: {k!r} is not a field of {tp.__name__}" for k in value if k not in hints]
    for k, v in value.items():
        if k in hints:
            out += shape_problems(v, hints[k], f"{where}.{k}")
    return out


def _container_problems(value: Any, origin: Any, args: tuple, where: str) -> list[str]:
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__} is not a list"]
        return [p for i, v in enumerate(value) for p in shape_problems(v, args[0] if args else Any, f"{where}[{i}]")]
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__} is not an object"]
    key_t, val_t = args or (Any, Any)
    return [p for k, v in value.items()
            for p in shape_problems(k, key_t, f"{where} key") + shape_problems(v, val_t, f"{where}.{k}")]


def shape_problems(value: Any, tp: Any, where: str = "$") -> list[str]:
    """What in ``value`` does not fit ``tp`` (a TypedDict, ``list[X]``, ``dict[str, X]`` or ``Mapping[str, X]``,
    ``X | None``, a JSON scalar type or ``Any``): ``["$.contract.scale: 'x' is not a float", ...]``; ``[]`` when it
    fits. A TypedDict must have its required keys and no key it does not declare.

    Raises:
        TypeError: ``tp`` is none of these.
    """
    if tp is Any or tp is object:
        return []
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        fits = any(not shape_problems(value, a, where) for a in args)
        return [] if fits else [f"{where}: {value!r:.80} fits none of {tp}"]
    if origin in (typing.NotRequired, typing.Required):
        return shape_problems(value, args[0], where)
    if typing.is_typeddict(tp):
        return _typeddict_problems(value, tp, where)
    if origin is list or origin is dict or getattr(origin, "__name__", "") == "Mapping":
        return _container_problems(value, origin, args, where)
    if tp in _SCALARS:
        what, fits = _SCALARS[tp]
        return [] if fits(value) else [f"{where}: {value!r:.80} is not {what}"]
    raise TypeError(f"shape_problems cannot check against {tp!r}")


def assert_shape(value: Any, tp: Any) -> None:
    """Fail with every problem :func:`shape_problems` finds."""
    problems = shape_problems(value, tp)
    assert not problems, "\n".join(problems[:20])
