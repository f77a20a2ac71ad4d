"""The cache of one communicator's plans, which lets repeated calls skip preparing them.

Blocking calls look their plan up in a :class:`PlanCache` (one per
communicator) before parsing anything, by the call's key
(:mod:`mpicoll.program.callkey`).  A miss need not prepare the call again: a
call whose *shape* is that of a cached plan gets that plan moved to its memory
(:meth:`~mpicoll.program.plan.Plan.rebased`), which skips the checks, the choice
of algorithm and the allocation of scratch.  Nonblocking calls have a cache of
their own (``CommState.request_plans``), whose plans own their scratch and are
lent to one request at a time.

A cached plan views the user's memory through raw addresses
(``MPI.buffer.fromaddress``), not through the user's objects, so caching
never keeps a user's buffer alive, never stops a ``bytearray`` from growing or
an ``mmap`` from closing.  That is safe because a plan is only ever reused by a
call whose buffers occupy exactly the same memory range with the same format
at that moment.  GPU arrays are keyed by identity instead, and their entry keeps
them alive (their plan holds pinned mirrors or IPC mappings).  Plans that
finish by writing to a user object (an in-place result copied back) are not
cached.

The cache holds at most :data:`PLAN_CACHE_ENTRIES` plans per communicator
(evicted by the one rule of :mod:`mpicoll.bounded`).
Blocking calls on one communicator run one at a time, so the scratch buffers
of their plans all view one arena per communicator (:meth:`PlanCache.arena`),
as large as the largest scratch a plan needs, at most
:data:`PLAN_CACHE_SCRATCH` bytes; memory a plan allocates for itself otherwise
(a non-root's stand-in receive buffer, say) totals at most that much again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mpicoll.bounded import Bounded
from mpicoll.program.plan import NOTHING, Plan

__all__ = ["PlanCache", "Entry", "PLAN_CACHE_ENTRIES", "PLAN_CACHE_SCRATCH", "REQUEST_PLAN_SCRATCH"]

PLAN_CACHE_ENTRIES = 64
PLAN_CACHE_SCRATCH = 256 * 1024 * 1024   # bytes of scratch the cached plans of one communicator may hold
REQUEST_PLAN_SCRATCH = 64 * 1024 * 1024  # ... and its cached nonblocking plans, each with scratch of its own


def _disjoint(spans: Sequence[tuple[int, int]]) -> bool:
    """True when no two of the memory ranges ``(address, nbytes)`` overlap (empty ones never do)."""
    if len(spans) == 2:      # the common case, inline
        (a, n), (b, m) = spans
        return not (n and m and a < b + m and b < a + n)
    ranges = sorted((address, address + n) for address, n in spans if n)
    return all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:]))


# -- the cache -------------------------------------------------------------------------------------

def _skip(tag: int) -> None:
    """What a cached call with nothing to do runs."""


class Entry:
    """One call kept bound, as the hot path finds it (``CommState.entries``, an intercommunicator's
    ``InterState.entries``): its ``program`` (a :class:`~mpicoll.program.plan.Plan`; an intercommunicator's is
    composed, :func:`~mpicoll.program.plan.composed`), ``run(tag)`` (the program's blocking runner), what its key names
    by identity (``refs``, kept alive), whether it was used since the last eviction sweep, and what the flight
    recorder notes of its calls and the mismatch check compares (``what``, a
    :class:`~mpicoll.engine.mismatch.CallNote`; None: nothing to do)."""

    __slots__ = ("program", "run", "refs", "used", "what")

    def __init__(self, program: Any, run: Callable[[int], None], refs: list, what: Any) -> None:
        self.program, self.run, self.refs, self.used, self.what = program, run, refs, False, what


class PlanCache:
    """Bound plans of one communicator's blocking calls, least recently used first out (approximately).

    Holds at most ``entries`` plans whose own memory (scratch buffers) totals at
    most ``scratch`` bytes, by the one eviction rule of :class:`~mpicoll.bounded.Bounded`.  Plans
    view the callers' memory by address (see :meth:`Plan.detach`), so an entry keeps no buffer of the
    caller alive.

    A miss need not prepare the call again: the cache also remembers, per call
    *shape* (the key without the buffers' addresses, :func:`shape_key`), the
    newest plan of that shape, and :meth:`rebased` moves it to the new call's
    memory.  At most ``entries`` shapes are remembered (the oldest go first), only
    plans that own no memory (their scratch is the arena's), so they hold none
    beyond the plans' small objects.
    """

    def __init__(self, entries: int = PLAN_CACHE_ENTRIES, scratch: int = PLAN_CACHE_SCRATCH) -> None:
        self.kept = Bounded(entries, scratch)
        self.data: dict[tuple, Entry] = self.kept.data   # what the compiled hot path reads (CommState.entries)
        self.shapes = Bounded(entries)          # shape key: the newest plan of that shape (see rebased)
        self.shared: np.ndarray | None = None   # the scratch arena of the blocking plans (see arena)

    def __len__(self) -> int:
        return len(self.data)

    @property
    def scratch_held(self) -> int:
        """The bytes of scratch the cached plans own (not the arena's)."""
        return self.kept.held

    def plans(self) -> list[Plan]:
        """The cached plans, oldest first."""
        return [entry.program for entry in self.data.values()]

    def get(self, key: tuple) -> Plan | None:
        """The plan cached under ``key`` (:data:`NOTHING` for a call with nothing to do), or None."""
        hit = self.kept.get(key)
        return None if hit is None else hit.program

    def rebased(self, shape: tuple, spans: list) -> Plan | None:
        """The plan of a call of ``shape`` on the memory ``spans`` (see :func:`shape_key`), or None.

        None when no plan of that shape is remembered, or when two of the call's
        buffers overlap: what a call does with overlapping buffers may depend on
        the overlap, which the shape does not tell.
        """
        plan = self.shapes.get(shape)
        if plan is None or plan is NOTHING:
            return plan
        return plan.rebased(spans) if _disjoint(spans) else None

    def put(self, key: tuple, plan: Plan | None, refs: list, spans: list, comm: Any = None,
            shape: tuple | None = None) -> None:
        """Remember ``plan`` (detached from the caller's memory ``spans``) under ``key``; evict to make room.

        ``comm`` is the private communicator the plan will run on (unused for None).
        A call with nothing to do (``plan`` None: a zero count, one rank) is
        remembered as :data:`NOTHING`, so that repeating it skips its checks too.
        With ``shape`` (the call's :func:`shape_key`), the plan is also remembered
        for the later calls of that shape on other memory (see :meth:`rebased`).
        """
        if plan is None or plan is NOTHING:
            plan = NOTHING
        elif plan.finish is not None and plan.device is None and not plan.finish_by_name:
            return   # its finish holds the caller's objects (unpacking into them, say)
        else:
            plan.detach(spans)
            if plan.owned_bytes > self.kept.nbytes:
                return
        run, what = (_skip, None) if plan is NOTHING else (plan.runner(comm), plan.what())
        self.kept.keep(key, Entry(plan, run, refs, what), plan.owned_bytes)
        if shape is not None and (plan is NOTHING or (plan.relocations is not None and plan.device is None
                                                      and plan.owned_bytes == 0 and _disjoint(spans))):
            self.shapes.keep(shape, plan)

    def discard(self, key: tuple) -> None:
        self.kept.discard(key)

    def clear(self) -> None:
        self.kept.clear()
        self.shapes.clear()

    def arena(self, nbytes: int) -> np.ndarray | None:
        """A byte array of at least ``nbytes`` shared by the scratch buffers of every cached plan.

        The blocking calls of one communicator run one at a time, so their plans can
        all use the same scratch memory: the cache holds the largest scratch any
        plan needs, not the sum.  Growing the arena drops the cached plans (they
        view the old one, which is then freed).  Above the cache's scratch bound a
        plan gets scratch of its own (None here), freed with the plan.
        """
        if nbytes > self.kept.nbytes:
            return None
        held = self.shared
        if held is None or held.nbytes < nbytes:
            self.clear()
            grown = 1 << max(nbytes - 1, 0).bit_length()   # a power of two: few regrowths as calls grow
            self.shared = held = np.empty(grown if grown <= self.kept.nbytes else nbytes, np.uint8)
        return held
