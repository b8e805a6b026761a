"""Ways of writing a note's parts (time spans, quantities, reference days, register frames, filler and
distractor sentences), each in two disjoint pools: ``seen`` (train and dev notes) and ``held_out``
(test, sealed and every other split). A phrasing renders the generator's exact value: rounding never
changes what a note states, so every phrasing of a value means the same effect.

Pure functions of their arguments and a ``numpy.random.Generator``; printable ASCII only.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["POOLS", "pool_of", "number_words", "clock12", "span_text", "SPAN_FORMS", "quantity_text", "QUANTITY_FORMS",
           "FRAMES", "frame_note", "FILLERS", "hours_words"]

#: the two pools of writing
POOLS = ("seen", "held_out")


def pool_of(split: str) -> str:
    """``"seen"`` for the train and dev splits, ``"held_out"`` for every other split (test, sealed, ...)."""
    return "seen" if split in ("train", "dev") else "held_out"


_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def number_words(n: int) -> str:
    """English words of a non-negative integer below 10**9 (``1250`` -> ``one thousand two hundred and fifty``).

    Raises:
        ValueError: out of range.
    """
    n = int(n)
    if not 0 <= n < 10 ** 9:
        raise ValueError(f"number_words covers 0 .. 10**9 - 1, got {n}")
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10 - 2] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + " hundred" + (" and " + number_words(n % 100) if n % 100 else "")
    for size, name in ((10 ** 6, "million"), (1000, "thousand")):
        if n >= size:
            rest = n % size
            tail = "" if not rest else (" and " if rest < 100 else " ") + number_words(rest)
            return number_words(n // size) + " " + name + tail
    raise AssertionError  # pragma: no cover


def clock12(h: int) -> str:
    """A local clock hour in words of the 12-hour clock: ``0`` midnight, ``12`` noon, ``14`` ``2 pm``."""
    h %= 24
    if h == 0:
        return "midnight"
    if h == 12:
        return "noon"
    return f"{h % 12} {'am' if h < 12 else 'pm'}"


def hours_words(n: int) -> str:
    """``"one hour"``, ``"four hours"``."""
    return f"{number_words(n)} hour{'s' if n != 1 else ''}"


def _hhmm(h: int) -> str:
    return f"{h % 24:02d}:00"


# every span form: (start local hour a, end local hour b (exclusive, mod 24), n hours, UTC start, UTC end) -> text
SpanForm = Callable[[int, int, int, int, int], str]
SPAN_FORMS: dict[str, dict[str, SpanForm]] = {
    "seen": {
        "local_utc": lambda a, b, n, ua, ub: f"from {_hhmm(a)} to {_hhmm(b)} local time ({_hhmm(ua)}-{_hhmm(ub)} UTC)",
        "between_local": lambda a, b, n, ua, ub: f"between {_hhmm(a)} and {_hhmm(b)} local time",
        "dash_local": lambda a, b, n, ua, ub: f"{_hhmm(a)}-{_hhmm(b)} local",
    },
    "held_out": {
        "clock12": lambda a, b, n, ua, ub: f"from {clock12(a)} until {clock12(b)}",
        "duration": lambda a, b, n, ua, ub: f"for {hours_words(n)} starting at {clock12(a)}",
        "military": lambda a, b, n, ua, ub: f"between {a % 24:02d}00 and {b % 24:02d}00 hrs",
        "utc_to": lambda a, b, n, ua, ub: f"from {ua % 24:02d}:00 to {ub % 24:02d}:00 UTC",
    },
}


def span_text(pool: str, form: str, a: int, b: int, n: int, ua: int, ub: int) -> str:
    """The span in form ``form`` of ``pool`` (:data:`SPAN_FORMS`)."""
    return SPAN_FORMS[pool][form](a, b, n, ua, ub)


_FRACTIONS = {10: "a tenth", 20: "a fifth", 25: "a quarter", 50: "half", 40: "two-fifths", 60: "three-fifths",
              30: "three-tenths", 75: "three-quarters"}


_TIMES = {2.0: "twice", 2.5: "two and a half times", 3.0: "three times"}


def _mw_range(v: float) -> tuple[float, float] | None:
    d = 20.0 if v >= 200 else 2.0
    return (v - d, v + d) if v - d > 0 else None


# quantity forms by kind; each returns the text or None when the form cannot state the value exactly
QuantityForm = Callable[[float], "str | None"]
QUANTITY_FORMS: dict[str, dict[str, dict[str, QuantityForm]]] = {
    "pct_up": {  # demand up by v percent
        "seen": {"about_pct": lambda v: f"about {v:g}% above what it would normally be",
                 "up_pct": lambda v: f"up by roughly {v:g} percent on a normal day"},
        "held_out": {"per_cent_words": lambda v: f"{number_words(int(v))} per cent higher than usual",
                     "fraction": lambda v: f"{_FRACTIONS[int(v)]} more than usual" if int(v) in _FRACTIONS else None,
                     "times": lambda v: f"{1 + v / 100:g} times the usual level",
                     "range": lambda v: f"between {v - 2:g} and {v + 2:g} per cent over normal"},
    },
    "mw_down": {  # load lower by v MW
        "seen": {"about_mw": lambda v: f"about {v:.0f} MW of steady load",
                 "roughly_mw": lambda v: f"roughly {v:.0f} megawatts of round-the-clock demand"},
        "held_out": {"gw": lambda v: f"{v / 1000:g} GW of constant draw",
                     "mw_words": lambda v: f"{number_words(int(v))} megawatts of flat load",
                     "mw_range": lambda v: (f"somewhere between {r[0]:.0f} and {r[1]:.0f} MW of baseload"
                                            if (r := _mw_range(v)) else None)},
    },
    "mw_cap": {  # served load capped at v MW
        "seen": {"no_more": lambda v: f"no more than {v:.0f} MW",
                 "limit_mw": lambda v: f"a limit of {v:.0f} MW"},
        "held_out": {"gw_most": lambda v: f"at most {v / 1000:g} GW",
                     "ceiling_words": lambda v: f"a ceiling of {number_words(int(v))} megawatts",
                     "cannot_exceed": lambda v: f"a level that cannot go past {v:,.0f} megawatts"},
    },
    "factor": {  # hires multiplied by v
        "seen": {"times_usual": lambda v: f"about {v:g} times the usual number of hires",
                 "x_normal": lambda v: f"roughly {v:g}x the normal departures"},
        "held_out": {"words_times": lambda v: f"{_TIMES[v]} as many hires as usual" if v in _TIMES else None,
                     "pct_more": lambda v: f"{(v - 1) * 100:g} per cent more hires than usual",
                     "more_than": lambda v: f"hires up {(v - 1) * 100:g}% on a typical evening"},
    },
    "share": {  # hires fall to v percent of normal
        "seen": {"pct_normal": lambda v: f"about {v:g}% of normal",
                 "share_usual": lambda v: f"roughly {v:g} percent of their usual level"},
        "held_out": {"fall_by": lambda v: f"a drop of {100 - v:g} per cent",
                     "fraction_of": lambda v: f"{_FRACTIONS[int(v)]} of the usual number" if int(v) in _FRACTIONS else None,
                     "cut_words": lambda v: f"a cut of {number_words(int(100 - v))} per cent"},
    },
    "pct_of_ref": {  # a fraction v (percent) of a reference level in the history
        "seen": {"pct_of": lambda v: f"{v:g}% of"},
        "held_out": {"below": lambda v: f"{100 - v:g} per cent below", "words": lambda v: f"{number_words(int(v))} per cent of"},
    },
    "move_share": {  # a share v (percent) of usage moved out of the event hours
        "seen": {"about_pct": lambda v: f"about {v:g}% of their usage"},
        "held_out": {"fraction": lambda v: f"{_FRACTIONS[int(v)]} of their consumption" if int(v) in _FRACTIONS else None,
                     "words": lambda v: f"{number_words(int(v))} per cent of what they would use"},
    },
}


def quantity_text(kind: str, pool: str, value: float, rng: np.random.Generator) -> tuple[str, str]:
    """``(form name, text)`` of ``value`` in a form of ``pool`` that states it exactly (drawn with ``rng``)."""
    forms = QUANTITY_FORMS[kind][pool]
    names = sorted(forms)
    for i in rng.permutation(len(names)):
        text = forms[names[i]](value)
        if text:
            return names[i], text
    raise ValueError(f"no {pool} form states {kind} {value!r}")  # pragma: no cover - every kind has a total form


# register frames: (register, template with {body}, {sender}, {date}); the body is the family's core sentence(s);
# one line each (the note is one line of the context text)
FRAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "seen": (
        ("operator notice", "Operator note: {body}"),
        ("news item", "{sender} news: {body}"),
        ("e-mail", "From: {sender} operations desk. Subject: {date}. {body} Regards, the duty team."),
        ("log line", "[ops-log] {body}"),
        ("forecast bulletin", "BULLETIN ({sender}): {body}"),
    ),
    "held_out": (
        ("operator notice", "NOTICE TO MARKET PARTICIPANTS - {body}"),
        ("news item", "Local paper, morning edition. {body}"),
        ("e-mail", "hi all -- {body} thanks, {sender} planning"),
        ("log line", "evt> {body} <eot"),
        ("forecast bulletin", "Outlook issued by the {sender} desk. {body} End of outlook."),
    ),
}

#: background sentences for medium and long notes (no effect, no value of the target)
FILLERS: dict[str, dict[str, tuple[str, ...]]] = {
    "electricity": {
        "seen": ("Crews have been briefed and the control room will follow the usual procedures.",
                 "Customers do not need to take any action.",
                 "The operator publishes updates on its website as the day goes on.",
                 "Market participants are reminded that schedules are settled hourly."),
        "held_out": ("A spokesperson said the arrangements had been agreed with neighbouring utilities weeks ago.",
                     "Residents asked on social media whether bills would change; they will not.",
                     "Similar arrangements in past years passed without incident, officials noted.",
                     "The regulator has been informed, as is routine."),
    },
    "cycle_hire": {
        "seen": ("Riders can find live dock availability in the app.",
                 "The scheme reminds users to dock bikes firmly.",
                 "Other stations nearby are not affected by this notice.",
                 "Staff will be on hand to answer questions."),
        "held_out": ("A council officer said the arrangements were planned with the operator in advance.",
                     "Regular riders said they were used to such changes in the area.",
                     "The borough has expanded cycle lanes nearby over the past year.",
                     "Transport campaigners welcomed the advance warning."),
    },
}


def frame_note(pool: str, register_index: int, body: str, sender: str, date: str) -> tuple[str, str]:
    """``(register, text)``: ``body`` in the frame ``register_index`` of ``pool``."""
    register, template = FRAMES[pool][register_index]
    return register, template.format(body=body, sender=sender, date=date)
