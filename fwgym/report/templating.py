"""The report's templates (Jinja2, autoescaped, strict) and the filters its pages use: number formats,
sort keys, file-name slugs, sentence case."""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np

__all__ = ["slug", "fmt", "sentence", "num", "is_report", "environment"]


def slug(name: str) -> str:
    """File-name-safe form of a policy name (a short hash is added when characters had to change)."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "policy"
    return s if s == name else f"{s}-{zlib.crc32(name.encode()):08x}"


def fmt(v, spec: str = ".4f") -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    try:
        out = format(v, spec)
    except (TypeError, ValueError):
        return str(v)
    if out[:1] == "-" and not out.strip("-+0.,"):  # a negative zero after rounding
        out = ("+" if "+" in spec else "") + out[1:]
    return out


def sentence(text) -> str:
    """``text`` with its first character upper case and the rest as it is (Jinja's ``capitalize`` lowers the
    rest: "RCRPS (capped at 5)" would read "Rcrps (capped at 5)")."""
    text = str(text)
    return text[:1].upper() + text[1:]


def num(v) -> str:
    """Full-precision sort key of a table cell."""
    if v is None or isinstance(v, bool):
        return "" if v is None else str(int(v))
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return repr(f) if np.isfinite(f) else ""


def is_report(out: Path) -> bool:
    """``out`` holds a report written by this module (its index names fwgym as the generator)."""
    try:
        return '<meta name="generator" content="fwgym' in (out / "index.html").read_text(encoding="utf-8")[:2000]
    except OSError:
        return False


def environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("fwgym.report", "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = fmt
    env.filters["num"] = num
    env.filters["slug"] = slug
    env.filters["sentence"] = sentence
    return env
