"""Writing a drawn event's note (:mod:`fwgym.context.families`): a core sentence of the family in a register
frame, with the time span, quantity, date, reference day and covariate table phrased in one of the
forms of the case's writing pool (:func:`fwgym.context.phrasing.pool_of`), a length (short, medium,
long) and optionally a distractor (an irrelevant event, the same kind of event on another date, or at
another place). Every choice comes from the text stream, never the event's, so the effect does not
depend on the wording; numbers are stated exactly.
"""
from __future__ import annotations

import numpy as np

from fwgym.context import phrasing as ph
from fwgym.context.families import MECHANISMS, Draw, Family
from fwgym.core.cases import Case
from fwgym.core.series import hour_to_datetime

__all__ = ["render_note", "LENGTHS", "DISTRACTORS"]

#: note lengths: frame + core (short), + 1 background sentence (medium), + 3 (long)
LENGTHS = {"short": 0, "medium": 1, "long": 3}
#: distractor kinds (CiK's distractor tasks): none, an irrelevant event, a wrong-date event, another place
DISTRACTORS = ("none", "irrelevant", "misdated", "elsewhere")
_LOCAL_ONLY = {"between_local", "dash_local", "clock12", "duration", "military"}

_IRRELEVANT = {
    "electricity": ("A water-main repair will close one lane of a downtown street {date}.",
                    "The city council meets {date} to discuss a new library.",
                    "A gas utility in the area is replacing meters {date}; electricity service is unaffected."),
    "cycle_hire": ("The cafe next to the station changes its opening hours {date}.",
                   "A film crew will use the pavement across the road {date}; the docks stay open.",
                   "The borough repaints the bus lane markings nearby {date} at night."),
}
_OTHER_STATIONS = ("Hyde Park Corner", "Waterloo Station 3", "Kings Cross", "Bank of England Museum",
                   "Borough High Street", "Belgrove Street")


def _date(case: Case, pool: str, rng, d=None) -> str:
    d = d or case.target_date
    forms = ({"weekday": f"on {d:%A} {d.day} {d:%B %Y}", "short": f"on {d.day} {d:%B}"} if pool == "seen" else
             {"iso": f"on {d.isoformat()}", "ordinal": f"on the {_ordinal(d.day)} of {d:%B}",
              "weekday_only": f"this coming {d:%A} ({d:%d/%m})"})
    names = sorted(forms)
    return forms[names[int(rng.integers(len(names)))]]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 11 <= n % 100 <= 13 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _span(case: Case, draw: Draw, lh: np.ndarray, pool: str, rng, form: str | None) -> tuple[str, str]:
    i0, i1 = draw.span
    a, b, n = int(lh[i0]), (int(lh[i1 - 1]) + 1) % 24, i1 - i0
    ua = hour_to_datetime(int(case.target_hours[i0])).hour
    ub = (hour_to_datetime(int(case.target_hours[i1 - 1])).hour + 1) % 24
    forms = ph.SPAN_FORMS[pool]
    if form is None:
        form = sorted(forms)[int(rng.integers(len(forms)))]
    elif form not in forms:
        raise ValueError(f"span form {form!r} is not one of the {pool} pool's {sorted(forms)}")
    return form, ph.span_text(pool, form, a, b, n, ua, ub)


def _ref(case: Case, lag: int, pool: str, rng) -> str:
    d = case.target_date.toordinal() - lag
    from datetime import date

    ref = date.fromordinal(d)
    if pool == "seen":
        return f"on {ref:%A} {ref.day} {ref:%B}"
    forms = (f"{ph.number_words(lag)} days before that date", f"on the {ref:%A} {lag} days earlier",
             f"on {ref.isoformat()}")
    return forms[int(rng.integers(len(forms)))]


def _factor(f: float, pool: str) -> str:
    if f == 1.0:
        return ""
    pct = round(abs(f - 1) * 100)
    up = f > 1
    if pool == "seen":
        return f", about {pct}% {'higher' if up else 'lower'}"
    return f", only {ph.number_words(pct)} per cent {'busier' if up else 'quieter'} than then"


def _table(case: Case, values_obs, hours_obs, values_tgt, lh) -> str:
    def seg(label, vals):
        return f"{label}: " + " ".join(f"{v + 0.0:g}" for v in vals)

    from fwgym.context.zones import local_zone

    tz = local_zone(case)
    parts = []
    for k in range(0, len(values_obs), 24):
        t = hour_to_datetime(int(hours_obs[k])).astimezone(tz)
        parts.append(seg(f"observed from {t:%Y-%m-%d %H}h", values_obs[k:k + 24]))
    t = hour_to_datetime(int(case.target_hours[0])).astimezone(tz)
    parts.append(seg(f"forecast from {t:%Y-%m-%d %H}h", values_tgt))
    return "; ".join(parts)


def _place(case: Case) -> tuple[str, str]:
    if case.domain == "electricity":
        from fwgym.context.zones import ba_zones

        region = ba_zones()[case.series_id][1]
        return region, case.series_id
    return case.series.name, "Santander Cycles"


def _slots(case: Case, spec: Family, draw: Draw, pool: str, rng, lh) -> tuple[dict, str | None]:
    slots = {k: v for k, v in draw.slots.items() if isinstance(v, str)}
    form = None
    if draw.qty is not None:
        kind, value = draw.qty
        form, slots["qty"] = ph.quantity_text(kind, pool, value, rng)
        if kind == "pct_of_ref":  # transmission_limit, relative to the history
            ref = _ref(case, draw.slots["ref_lag"], pool, rng)
            slots["qty"] = (f"no more than {slots['qty']} the peak load of those hours {ref}" if pool == "seen" else
                            f"at most {slots['qty']} the highest hourly load at those same hours {ref}")
    if "ref_lag" in draw.slots and spec.name == "analog_day":
        slots["ref"] = _ref(case, draw.slots["ref_lag"], pool, rng)
        slots["factor"] = _factor(draw.slots["factor"], pool)
    if "t_obs" in draw.slots:
        slots["table"] = _table(case, draw.slots["t_obs"], draw.slots["obs_hours"], draw.slots["t_tgt"], lh)
    if "r_obs" in draw.slots:
        slots["table"] = _table(case, draw.slots["r_obs"], draw.slots["obs_hours"], draw.slots["r_tgt"], lh)
    if "mechanism" in draw.slots:
        slots["mechanism"] = MECHANISMS[pool][draw.slots["mechanism"]]
    if "k" in draw.slots:
        slots["k"] = ph.number_words(draw.slots["k"]) if pool == "held_out" else str(draw.slots["k"])
    return slots, form


def _distractor(case: Case, spec: Family, pool: str, rng, kind: str, lh) -> str:
    if kind == "irrelevant":
        opts = _IRRELEVANT[case.domain]
        return opts[int(rng.integers(len(opts)))].format(date=_date(case, pool, rng))
    a = int(rng.integers(6, 18))
    n = int(rng.integers(2, 5))
    span = ph.span_text(pool, sorted(ph.SPAN_FORMS[pool])[0], a, (a + n) % 24, n, a, (a + n) % 24)
    if kind == "misdated":
        from datetime import timedelta

        other = case.target_date + timedelta(days=int(rng.choice([-3, -2, 2, 3, 7])))
        return f"Separately, {spec.event} is also announced {_date(case, pool, rng, other)} {span}."
    if case.domain == "electricity":
        from fwgym.context.zones import ba_zones

        regions = sorted({r for _, r in ba_zones().values()} - {_place(case)[0]})
        where = regions[int(rng.integers(len(regions)))]
    else:
        where = _OTHER_STATIONS[int(rng.integers(len(_OTHER_STATIONS)))] + " station"
    return f"Separately, {spec.event} is expected at {where} {_date(case, pool, rng)} {span}."


def render_note(case: Case, spec: Family, draw: Draw, rng: np.random.Generator, lh: np.ndarray,
                force: dict) -> tuple[str, dict]:
    """``(text, metadata)`` of the note (metadata: ``skeleton``, ``pool``, ``register``, ``length``,
    ``distractor``, ``span_form``, ``quantity_form``, extra ``context_types`` and ``skills``).

    Args:
        force: fix choices (``span``: a span form of the pool, ``core``/``register``: indices,
            ``length``, ``distractor``).
    """
    pool = ph.pool_of(case.split)
    span_form, span = _span(case, draw, lh, pool, rng, force.get("span"))
    place, sender = _place(case)
    slots, qty_form = _slots(case, spec, draw, pool, rng, lh)
    cores = spec.cores[pool]
    ci = int(force.get("core", rng.integers(len(cores))))
    core = cores[ci].format(place=place, date=_date(case, pool, rng), span=span, **slots)
    core = core[0].upper() + core[1:]
    ri = int(force.get("register", rng.integers(len(ph.FRAMES[pool]))))
    length = force.get("length") or ("short", "medium", "long")[int(rng.integers(3))]
    distractor = force.get("distractor") or DISTRACTORS[int(rng.choice(4, p=[0.55, 0.15, 0.15, 0.15]))]
    fillers = ph.FILLERS[case.domain][pool]
    parts = [core] + [fillers[i] for i in rng.permutation(len(fillers))[:LENGTHS[length]]]
    if distractor != "none":  # before the core, or after any of its sentences
        parts.insert(int(rng.integers(len(parts) + 1)), _distractor(case, spec, pool, rng, distractor, lh))
    body = " ".join(parts)
    register, text = ph.frame_note(pool, ri, body, sender, case.target_date.isoformat())
    types = ("c_i",) if span_form in _LOCAL_ONLY and "{span}" in cores[ci] else ()
    skills = (("retrieval: context",) if distractor != "none" or length == "long" else ()) + \
        (("reasoning: math",) if qty_form in ("range", "times", "gw", "gw_most", "fall_by", "pct_more", "more_than",
                                              "below", "cut_words", "mw_range") else ())
    meta = {"skeleton": f"{spec.name}/{pool}/core{ci}/{register}", "pool": pool, "register": register,
            "length": length, "distractor": distractor, "span_form": span_form, "quantity_form": qty_form,
            "context_types": types, "skills": skills}
    return text, meta
