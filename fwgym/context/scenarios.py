"""Context scenarios (Context is Key, Williams et al. 2024): an announced event that changes the real target.

A :class:`Scenario` is a deterministic (seeded by case id and seed) transformation of a case's realised
24-hour target plus the note that announces it, a region of interest (RoI, the hours the note names)
and optional bounds. The families (:mod:`fwgym.context.families`) cover CiK's context types: future
events stated in the note (c_f), effects relative to a pattern in the visible history (c_h), a covariate
table whose relation the history shows (c_cov), mechanisms (c_causal); notes that give local times only
also need the series' time zone (c_i). Every note is written in one of many registers, lengths and
phrasings (:mod:`fwgym.context.phrasing`); test and sealed cases use a pool of writing never used on
train and dev cases. The event is drawn first from its own random stream and the note written after it
from another, so no wording changes an effect. The note states the event, never a realised value.

Cycle-hire values stay non-negative integers; electricity values stay >= 0.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from fwgym.context.families import CYCLE_HIRE_FAMILIES, ELECTRICITY_FAMILIES, Family, apply_ops
from fwgym.context.notes import render_note
from fwgym.context.zones import ba_zones, local_zone
from fwgym.core.cases import Case
from fwgym.core.series import hour_to_datetime

__all__ = ["FAMILIES", "ba_zones", "local_zone", "local_hours", "Scenario", "make_scenario", "register_families",
           "family_spec", "skeleton_ids"]

_REGISTRY: dict[str, dict[str, Family]] = {}


def register_families(domain: str, families) -> None:
    """Declare a domain's scenario families (a domain module's own :class:`~fwgym.context.families.Family`
    tuple); later families of the same name replace earlier ones.

    Raises:
        ValueError: a family of another domain.
    """
    for f in families:
        if f.domain != domain:
            raise ValueError(f"family {f.name!r} belongs to {f.domain!r}, not {domain!r}")
        _REGISTRY.setdefault(domain, {})[f.name] = f
    FAMILIES[domain] = tuple(_REGISTRY[domain])


#: family names per domain (in draw order)
FAMILIES: dict[str, tuple[str, ...]] = {}
register_families("electricity", ELECTRICITY_FAMILIES)
register_families("cycle_hire", CYCLE_HIRE_FAMILIES)


def family_spec(domain: str, name: str) -> Family:
    """The :class:`~fwgym.context.families.Family` ``name`` of ``domain``.

    Raises:
        ValueError: unknown family for the domain.
    """
    try:
        return _REGISTRY[domain][name]
    except KeyError:
        raise ValueError(f"unknown scenario family {name!r} for {domain}; expected one of "
                         f"{list(FAMILIES.get(domain, ()))}") from None


def local_hours(case: Case) -> np.ndarray:
    """Local clock hour (0..23) of each of the 24 target hours, int (24,).

    When the UTC offset is the same at the first and the last target hour (every day but the two
    clock changes of a year) the hours are the first one plus 0..23 (mod 24); otherwise each hour
    is converted on its own."""
    tz = local_zone(case)
    hours = case.target_hours
    first = hour_to_datetime(int(hours[0])).astimezone(tz)
    last = hour_to_datetime(int(hours[-1])).astimezone(tz)
    if first.utcoffset() == last.utcoffset() and int(hours[-1]) - int(hours[0]) == len(hours) - 1:
        return (first.hour + np.arange(len(hours), dtype=np.int64)) % 24
    return np.array([hour_to_datetime(int(h)).astimezone(tz).hour for h in hours], dtype=np.int64)


@dataclass(frozen=True)
class Scenario:
    """An announced event and its effect on the target.

    Attributes:
        family: family name (see :data:`FAMILIES`).
        text: the note shown to agents (one line).
        roi: bool (24,), the target hours the note names.
        lower, upper: float (24,) bounds (NaN where unbounded) or None.
        params: the family's parameters (factor, MW, cap, ...) for analysis; not shown to agents.
        effect: the effect operations (:func:`fwgym.context.families.apply_ops`); not shown to agents.
        context_types: CiK context types the note needs (``c_i``, ``c_h``, ``c_cov``, ``c_f``, ``c_causal``).
        skills: CiK skill tags.
        skeleton: id of the note's skeleton (``family/pool/core<k>/<register>``).
        variant: how the note is written (``pool``, ``register``, ``length``, ``distractor``, ``span_form``,
            ``quantity_form``).
    """

    family: str
    text: str
    roi: np.ndarray
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    effect: tuple = ()
    context_types: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    skeleton: str = ""
    variant: dict = field(default_factory=dict)
    domain: str = "electricity"

    def apply(self, target: np.ndarray) -> np.ndarray:
        """The scenario's target: the realised target transformed by the event (float64 (24,))."""
        return apply_ops(target, list(self.effect), integer=self.domain == "cycle_hire")

    def metadata(self) -> dict:
        """What agents may know about the note (JSON-safe): ``context_types``, ``skills`` (no family, no effect)."""
        return {"context_types": list(self.context_types), "skills": list(self.skills)}


def make_scenario(case: Case, seed: int = 0, family: str | None = None, *, phrasing: dict | None = None) -> Scenario:
    """The scenario of ``case`` (deterministic in ``case.case_id`` and ``seed``).

    Args:
        case: the case (its visible history sets magnitudes such as caps; never its target).
        seed: scenario seed.
        family: force a family (default: chosen from the case id and seed).
        phrasing: force parts of the writing (``{"span": form, "register": i, "core": i, "length": ...,
            "distractor": ...}``, :func:`fwgym.context.notes.render_note`); the effect never depends on it.

    Raises:
        ValueError: unknown family for the case's domain; a phrasing of the other pool.
    """
    names = FAMILIES[case.domain]
    key = zlib.crc32(f"{case.case_id}|{seed}".encode())
    name = family or names[key % len(names)]
    spec = family_spec(case.domain, name)
    lh = local_hours(case)
    draw = spec.draw(case, np.random.default_rng([key, 1]), lh)  # the event: its own stream
    text, meta = render_note(case, spec, draw, np.random.default_rng([key, 2]), lh, phrasing or {})
    extra_types, extra_skills = meta.pop("context_types"), meta.pop("skills")
    types = tuple(t for t in ("c_i", "c_h", "c_cov", "c_f", "c_causal")
                  if t in spec.context_types + draw.context_types + extra_types)
    skills = tuple(dict.fromkeys(("forecasting", "natural language processing") + spec.skills + draw.skills
                                 + extra_skills))
    return Scenario(name, text, draw.roi, draw.lower, draw.upper, dict(draw.params), tuple(draw.ops), types, skills,
                    meta.pop("skeleton"), meta, case.domain)


def skeleton_ids(domain: str, family: str, pool: str) -> list[str]:
    """Every skeleton id of a family in a pool (cores x register frames)."""
    from fwgym.context.phrasing import FRAMES

    spec = family_spec(domain, family)
    return [f"{family}/{pool}/core{i}/{reg}" for i in range(len(spec.cores[pool])) for reg, _ in FRAMES[pool]]
