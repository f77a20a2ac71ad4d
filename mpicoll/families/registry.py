"""The algorithm registry: which algorithms exist for each collective, and their schedules.

An algorithm is a pure function ``build(rank, size, **params)`` returning
``(nblocks, rounds)`` for one rank, registered by its family module with
:func:`~mpicoll.families.catalog.register` (re-exported here);
:func:`schedule` wraps it in a cached :class:`~mpicoll.ir.schedule.Schedule`.
Importing this module imports :mod:`mpicoll.families`, which registers every
algorithm (the family modules import only :mod:`mpicoll.families.catalog`, so
there is no import circle).

Builders are only called with ``size >= 2``: a single rank needs no message, so
every algorithm of a collective shares one schedule at p = 1, derived from the
collective's contract (:func:`~mpicoll.families.catalog.trivial`).
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mpicoll import families as _families  # noqa: F401 - importing the package registers every algorithm
from mpicoll.families.catalog import _REGISTRY, Algorithm, Build, register, trivial  # noqa: F401 (re-exported)
from mpicoll.ir.schedule import Schedule, ScheduleSet

__all__ = ["Algorithm", "register", "algorithms", "get", "schedule", "schedules", "collectives", "gc_paused",
           "trivial"]

def collectives() -> list[str]:
    """The collectives that have at least one algorithm.

    Returns
    -------
    list of str
        Lower-case names, sorted (``"allreduce"``, ``"bcast"``, ...).
    """
    return sorted(_REGISTRY)


def algorithms(collective: str) -> list[str]:
    """The names of the algorithms registered for ``collective``.

    Parameters
    ----------
    collective : str
        A name from :func:`collectives` (any case), e.g. ``"allreduce"``.

    Returns
    -------
    list of str
        In registration order; every one is a valid ``algorithm=`` of the collective's method.

    Raises
    ------
    ValueError
        Unknown collective (the message lists the known ones).
    """
    key = collective.lower()
    if key not in _REGISTRY:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(sorted(_REGISTRY))}")
    return list(_REGISTRY[key])


def get(collective: str, name: str) -> Algorithm:
    """The registered algorithm, or a ValueError that lists the choices."""
    names = algorithms(collective)
    if name not in names:
        raise ValueError(f"algorithm: {collective} has no algorithm {name!r}; choose one of "
                         f"{', '.join(names)} or 'auto'")
    return _REGISTRY[collective.lower()][name]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while many small objects are made.

    Schedules are millions of small tuples without cycles; at p = 1024 the
    collector's repeated full passes over them cost more than building them
    (27 s instead of 10 s for the ring all-reduce).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _ScheduleCache:
    """A least-recently-used cache of schedules bounded by their total number of rounds.

    A count bound would not do: one rank's ring schedule at p = 1024 has 2046
    rounds (about 1.6 MB), at p = 4 six.  The budget (about 400 MB) keeps every
    schedule of the small sizes and the most recent ones of a large size.
    """

    def __init__(self, budget: int = 500_000):
        self.budget = budget
        self.rounds = 0
        self.data: OrderedDict[tuple, Schedule] = OrderedDict()
        self.lock = threading.Lock()   # threads prepare calls on their own communicators at once

    def __call__(self, collective: str, name: str, rank: int, size: int,
                 params: tuple[tuple[str, Any], ...]) -> Schedule:
        key = (collective, name, rank, size, params)
        with self.lock:
            hit = self.data.get(key)
            if hit is not None:
                self.data.move_to_end(key)
                return hit
        alg = get(collective, name)
        nblocks, rounds = alg.rounds(rank, size, **dict(params))
        sched = Schedule(collective, name, rank, size, nblocks, rounds, params, alg.scratch)
        with self.lock:
            if key not in self.data:
                self.rounds += len(sched.rounds) + 1
            self.data[key] = sched
            while self.rounds > self.budget and len(self.data) > 1:
                _, old = self.data.popitem(last=False)
                self.rounds -= len(old.rounds) + 1
        return sched

    def cache_clear(self) -> None:
        with self.lock:
            self.data.clear()
            self.rounds = 0


_schedule = _ScheduleCache()


def schedule(collective: str, name: str, rank: int, size: int, **params: Any) -> Schedule:
    """One rank's schedule: the rounds of messages and local steps it runs.

    Built once and kept in a cache bounded by the total number of rounds.

    Parameters
    ----------
    collective : str
        A name from :func:`collectives`, e.g. ``"allreduce"``.
    name : str
        An algorithm of it, from :func:`algorithms` (not ``"auto"``).
    rank : int
        The rank, ``0 <= rank < size``.
    size : int
        The number of ranks.
    **params
        The algorithm's own parameters, if it has any (e.g. ``root``).

    Returns
    -------
    Schedule

    Raises
    ------
    ValueError
        Unknown collective or algorithm, or ``rank`` out of range.
    TypeError
        A parameter the algorithm does not take.
    """
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is out of range for size {size}")
    alg = get(collective, name)
    extra = set(params) - set(alg.params)
    if extra:
        raise TypeError(f"{collective}/{name} takes no parameter(s) {', '.join(sorted(extra))}")
    return _schedule(collective.lower(), name, rank, size, tuple(sorted(params.items())))


def moves_ranges(collective: str, name: str, rank: int, size: int, **params: Any) -> bool:
    """Whether this rank's schedule sends or receives a run of several blocks in one message.

    Such a message is one contiguous span of its buffer, so the blocks of the run
    must lie one after the other (a v-layout with gaps or blocks out of rank order
    is gathered in scratch first, see :mod:`mpicoll.calls.allgatherv`).
    """
    sched = schedule(collective, name, rank, size, **params)
    return any(x.block.hi - x.block.lo > 1 for rnd in sched.rounds for x in (*rnd.sends, *rnd.recvs))


def schedules(collective: str, name: str, size: int, **params: Any) -> ScheduleSet:
    """The schedules of all ``size`` ranks; ``print()`` it for a rounds x ranks table.

    Parameters
    ----------
    collective, name, size, **params
        As for :func:`schedule`.

    Returns
    -------
    ScheduleSet

    Raises
    ------
    ValueError, TypeError
        As :func:`schedule`.
    """
    with gc_paused():
        return ScheduleSet(tuple(schedule(collective, name, r, size, **params) for r in range(size)))
