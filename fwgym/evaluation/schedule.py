"""The play order of an evaluation, and which replays were exposed (DESIGN §11, sealed split; issue 25).

A case's prompt (its observations and tool results) carries values of the hours in its prompt windows
(:func:`fwgym.context.text.prompt_windows`: the visible history and the window the context text quotes
statistics of). On the test split most targets lie inside another case's windows, so an agent with memory
(a server that keeps prompts, retrieval, an online learner, a worker that keeps state) could learn a
case's answer from another case's prompt. Every evaluation therefore:

* plays episodes in ``as_of`` order across all series and policies (:func:`play_order`);
* starts an episode only when every episode whose target hours its prompt holds (any policy, any series)
  has ended (:class:`Schedule`): concurrency is only among episodes none of whose prompts holds the
  target of another one in flight or not yet played;
* marks a record ``exposed`` when a prompt holding its target had been sent to an agent of the run before
  its episode began (:func:`exposed_cases`): only possible for a replay (``fwgym evaluate --resume`` of a
  harness_error, or of an episode in flight when a session was killed) after the episodes that hold its
  target were played. fwgym's named policies (baselines, oracles: fwgym's code, no memory) send no prompt
  anywhere; every other policy (an agent) does.

Within one session the schedule makes exposure impossible; across sessions the run's ``started.jsonl``
(:mod:`fwgym.evaluation.rundir`) says which prompts were sent.
"""
from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from fwgym.context.text import prompt_windows
from fwgym.core.cases import Case

__all__ = ["TargetKey", "target_key", "held_targets", "play_order", "Schedule", "exposed_cases"]

#: a target window shared by every case of a domain with that target start: ``(domain, target_start hour)``
TargetKey = tuple[str, int]


def target_key(case: Case) -> TargetKey:
    """``(domain, target_start)``: cases of one domain with one target start share their 24 target hours."""
    return case.domain, int(case.target_start)


def held_targets(case: Case, targets: Mapping[str, Sequence[int]]) -> list[TargetKey]:
    """The target windows (of ``targets``: ``{domain: sorted target starts}``) with an hour inside one of the
    case's prompt windows, i.e. whose values the case's prompt carries."""
    starts = targets.get(case.domain, ())
    out: list[TargetKey] = []
    for a, b in prompt_windows(case):
        # target [t, t + 24) meets [a, b) iff a - 24 < t < b
        lo = bisect.bisect_right(starts, a - 24)
        hi = bisect.bisect_left(starts, b)
        out.extend((case.domain, int(t)) for t in starts[lo:hi])
    return sorted(set(out))


def _target_starts(cases: Iterable[Case]) -> dict[str, list[int]]:
    by: dict[str, set[int]] = defaultdict(set)
    for c in cases:
        by[c.domain].add(int(c.target_start))
    return {d: sorted(v) for d, v in by.items()}


def play_order(items: Sequence[tuple], case_of: Mapping[str, Case]) -> list[tuple]:
    """``items`` (tuples whose element 2 is a case id and element 0 the policy index) sorted by the case's
    ``as_of``, then its position in ``items`` (stable: split order, then policy order)."""
    return [it for _, it in sorted(enumerate(items), key=lambda p: (case_of[p[1][2]].as_of, p[0]))]


class Schedule:
    """Which units of episodes may start: a unit (a list of items, played in order by one worker) may start when
    every episode whose target its episodes' prompts hold has ended, except the ones inside the unit itself,
    which precede them there (they have an earlier ``as_of``).

    Args:
        units: the units, each a list of items whose element 2 is a case id, in :func:`play_order`.
        case_of: ``{case id: Case}``.

    Use: ``ready()`` gives the units that may start now (in order, each once); ``finish(i)`` when unit ``i``
    has ended (its records are written); ``pending`` counts the units not finished.
    """

    def __init__(self, units: Sequence[Sequence[tuple]], case_of: Mapping[str, Case]):
        self.units = [list(u) for u in units]
        cases = [case_of[it[2]] for u in self.units for it in u]
        targets = _target_starts(cases)
        self._remaining: dict[TargetKey, int] = defaultdict(int)  # episodes of each target not yet ended
        self._inside: list[dict[TargetKey, int]] = []  # per unit: its own episodes of each target
        self._needs: list[list[TargetKey]] = []  # per unit: the targets its prompts hold
        self._waiting: dict[TargetKey, set[int]] = defaultdict(set)
        for u in self.units:
            inside: dict[TargetKey, int] = defaultdict(int)
            needs: set[TargetKey] = set()
            for it in u:
                c = case_of[it[2]]
                k = target_key(c)
                self._remaining[k] += 1
                inside[k] += 1
                needs.update(held_targets(c, targets))
            self._inside.append(dict(inside))
            self._needs.append(sorted(needs))
        self._heap: list[int] = []
        self._started: set[int] = set()
        self._blocked: dict[int, int] = {}
        for i in range(len(self.units)):
            self._check(i)
        self.pending = len(self.units)

    def _open(self, i: int) -> list[TargetKey]:
        return [k for k in self._needs[i] if self._remaining.get(k, 0) > self._inside[i].get(k, 0)]

    def _check(self, i: int) -> None:
        blocking = self._open(i)
        if blocking:
            self._blocked[i] = len(blocking)
            for k in blocking:
                self._waiting[k].add(i)
        else:
            self._blocked.pop(i, None)
            heapq.heappush(self._heap, i)

    def ready(self) -> list[int]:
        """The units that may start now (each returned once, lowest index first)."""
        out = []
        while self._heap:
            i = heapq.heappop(self._heap)
            if i not in self._started:
                self._started.add(i)
                out.append(i)
        return out

    def next_ready(self) -> int | None:
        """The first unit that may start now (then counted as started), or ``None``."""
        while self._heap:
            i = heapq.heappop(self._heap)
            if i not in self._started:
                self._started.add(i)
                return i
        return None

    def finish(self, i: int) -> None:
        """Unit ``i`` has ended: release the units waiting for its episodes' targets."""
        self.pending -= 1
        released: set[int] = set()
        for k, n in self._inside[i].items():
            self._remaining[k] -= n
            for j in list(self._waiting.get(k, ())):
                if self._remaining[k] <= self._inside[j].get(k, 0):
                    self._waiting[k].discard(j)
                    released.add(j)
        for j in sorted(released):
            if j in self._blocked and not self._open(j):
                self._blocked.pop(j)
                heapq.heappush(self._heap, j)


def exposed_cases(candidates: Iterable[Case], sent: Iterable[Case]) -> set[str]:
    """Ids of the ``candidates`` whose target hours lie in a prompt window of a case of ``sent`` (the cases whose
    prompts were sent to an agent of the run before), of the same domain."""
    cands = list(candidates)
    targets = _target_starts(cands)
    held: set[TargetKey] = set()
    for c in sent:
        held.update(held_targets(c, targets))
    return {c.case_id for c in cands if target_key(c) in held}
