"""The algorithm registry: which algorithms exist for each collective.

An algorithm is a pure function ``build(rank, size, **params)`` returning
``(nblocks, rounds)`` for one rank; :func:`schedule` wraps it in a cached
:class:`~mpicoll.ir.schedule.Schedule`.

Builders are only called with ``size >= 2``: a single rank needs no message, so
every algorithm of a collective shares one schedule at p = 1, derived here from
the collective's contract (:func:`trivial`).
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mpicoll.ir.contracts import spec
from mpicoll.ir.schedule import USER_BUFFERS, Block, Copy, Round, Schedule, ScheduleSet, Scratch

__all__ = ["Algorithm", "register", "algorithms", "get", "schedule", "schedules", "collectives", "gc_paused",
           "trivial"]

Build = Callable[..., tuple[int, tuple[Round, ...]]]


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm of one collective."""

    collective: str
    name: str
    build: Build
    keeps_order_for: Callable[[int], bool]
    params: tuple[str, ...]
    rotates: bool = False
    scratch: dict[str, Scratch] = field(default_factory=dict, compare=False)

    def keeps_order(self, size: int) -> bool:
        """Whether the algorithm reduces in rank order at ``size`` ranks (non-commutative ops)."""
        return size == 1 or self.keeps_order_for(size)

    def rounds(self, rank: int, size: int, **params: Any) -> tuple[int, tuple[Round, ...]]:
        """``(nblocks, rounds)`` of ``rank``: the builder's for p >= 2, :func:`trivial`'s for p = 1."""
        if size == 1:
            return trivial(self.collective, **params)
        nblocks, rounds = self.build(rank, size, **params)
        return nblocks, tuple(rounds)

    @property
    def summary(self) -> str:
        doc = (self.build.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


_REGISTRY: dict[str, dict[str, Algorithm]] = {}


def register(collective: str, name: str, *, keeps_order: bool | Callable[[int], bool] = True,
             params: tuple[str, ...] = (), rotates: bool = False,
             scratch: dict[str, Scratch] | None = None) -> Callable[[Build], Build]:
    """Decorator: register ``build`` as algorithm ``name`` of ``collective``.

    ``keeps_order`` says whether reductions happen in rank order (a bool, or a
    function of the size); ``params`` names the keyword parameters ``build`` takes
    (``root``, ``segments``).  ``rotates`` declares that rank r's schedule is rank
    0's with every peer and every block index shifted by r (mod p, with p blocks):
    the cost model then costs every rank exactly from rank 0's schedule alone
    (a unit test checks the claim for every algorithm that makes it).
    ``scratch`` declares every buffer other than ``send`` and ``recv`` that
    ``build`` may name, with its role and layout (:class:`~mpicoll.ir.schedule.Scratch`);
    binding, simulating or checking a schedule that names any other buffer raises.
    """
    order = keeps_order if callable(keeps_order) else (lambda size, _k=bool(keeps_order): _k)
    declared = dict(scratch or {})
    clash = set(declared) & set(USER_BUFFERS)
    if clash:
        raise ValueError(f"register: {collective}/{name} declares {', '.join(sorted(clash))} as scratch")
    for buf, decl in declared.items():
        if not isinstance(decl, Scratch) or decl.like not in ("send", "recv", "own"):
            raise ValueError(f"register: {collective}/{name} scratch {buf!r}: expected Scratch(role, like= 'send', "
                             f"'recv' or 'own'), got {decl!r}")

    def deco(build: Build) -> Build:
        _REGISTRY.setdefault(collective, {})[name] = Algorithm(collective, name, build, order, params, rotates,
                                                               declared)
        return build

    return deco


def _load() -> None:
    # the ``families`` subpackage registers every algorithm when imported (once: this runs on every call)
    global _LOADED
    if not _LOADED:
        import importlib

        importlib.import_module("mpicoll.families")
        _LOADED = True


_LOADED = False


def collectives() -> list[str]:
    """The collectives that have at least one algorithm.

    Returns
    -------
    list of str
        Lower-case names, sorted (``"allreduce"``, ``"bcast"``, ...).
    """
    _load()
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
    _load()
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


def trivial(collective: str, **params: Any) -> tuple[int, tuple[Round, ...]]:
    """The one-rank schedule of ``collective``: ``(1, rounds)``, from its contract alone.

    With one rank and one block, each output block whose expected value is an
    input block held elsewhere is copied from it in round 0 (``recv = send``
    for most collectives); an output already in place (a ``Bcast`` root's
    buffer) or left undefined (``Barrier``, rank 0 of ``Exscan``) needs nothing.
    An ``IN_PLACE`` call binds ``send`` to ``recv``'s memory, so its copy is onto itself.
    """
    contract = spec(collective)
    held = {value: Block(buf, b, b + 1)
            for buf, values in contract.inputs(0, 1, 1, **params).items() for b, value in enumerate(values)}
    copies = tuple(Copy(Block(buf, b, b + 1), held[value])
                   for buf, values in contract.outputs(0, 1, 1, **params).items()
                   for b, value in enumerate(values)
                   if value is not None and held[value] != Block(buf, b, b + 1))
    return 1, (Round(steps=copies),) if copies else ()


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

    def __call__(self, collective: str, name: str, rank: int, size: int,
                 params: tuple[tuple[str, Any], ...]) -> Schedule:
        key = (collective, name, rank, size, params)
        hit = self.data.get(key)
        if hit is not None:
            self.data.move_to_end(key)
            return hit
        alg = get(collective, name)
        nblocks, rounds = alg.rounds(rank, size, **dict(params))
        sched = Schedule(collective, name, rank, size, nblocks, rounds, params, alg.scratch)
        self.data[key] = sched
        self.rounds += len(sched.rounds) + 1
        while self.rounds > self.budget and len(self.data) > 1:
            _, old = self.data.popitem(last=False)
            self.rounds -= len(old.rounds) + 1
        return sched

    def cache_clear(self) -> None:
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
