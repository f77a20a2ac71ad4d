"""Run the schedules of all ranks together, one round at a time, in one process.

The interpreter matches every send of round t to the receive its peer posts in
round t (in order, per pair of ranks), checks the rules of the IR, and hands the
data movement and local steps to a *domain*: NumPy arrays for the simulator,
symbolic contributions for the checker.  Any violation raises
:class:`~mpicoll.schedule.ScheduleError` naming the algorithm, p, rank, round and
block.
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from ..schedule import EMPTY_ROUND, Block, Copy, Reduce, Schedule, ScheduleError

__all__ = ["Domain", "run_lockstep"]


class Domain(Protocol):
    def read(self, rank: int, block: Block) -> Any: ...
    def write(self, rank: int, block: Block, payload: Any) -> None: ...
    def reduce(self, rank: int, step: Reduce) -> None: ...
    def copy(self, rank: int, step: Copy) -> None: ...


def _where(s: Schedule, t: int) -> str:
    return f"{s.collective}/{s.algorithm} p={s.size} rank {s.rank} round {t}"


def run_lockstep(schedules: Sequence[Schedule], domain: Domain, alias: dict[str, str] | None = None) -> None:
    """Execute every rank's schedule on ``domain``, round by round (see :func:`_run`).

    The cyclic garbage collector is paused meanwhile: the run makes millions of
    small acyclic tuples at p = 1024, and the collector's repeated scans of the
    (large, cached) schedules would make it about ten times slower.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        _run(schedules, domain, alias)
    finally:
        if enabled:
            gc.enable()


def _run(schedules: Sequence[Schedule], domain: Domain, alias: dict[str, str] | None = None) -> None:
    """Execute every rank's schedule on ``domain``, round by round.

    ``alias`` maps buffer names to the buffer they share memory with (in-place
    calls: ``{"send": "recv"}``), so that hazards between them are caught.
    """
    alias = alias or {}
    size = len(schedules)
    nrounds = max((len(s.rounds) for s in schedules), default=0)
    for t in range(nrounds):
        rounds = [s.rounds[t] if t < len(s.rounds) else EMPTY_ROUND for s in schedules]
        in_flight: dict[tuple[int, int], deque] = {}
        for s, rnd in zip(schedules, rounds):
            _check_hazards(s, t, rnd, alias)
            for x in rnd.sends:
                if not 0 <= x.peer < size or x.peer == s.rank:
                    raise ScheduleError(f"{_where(s, t)}: send of {x.block} to invalid peer {x.peer}")
                in_flight.setdefault((s.rank, x.peer), deque()).append((x.block, domain.read(s.rank, x.block)))
        for s, rnd in zip(schedules, rounds):
            for x in rnd.recvs:
                queue = in_flight.get((x.peer, s.rank))
                if not queue:
                    raise ScheduleError(f"{_where(s, t)}: receive into {x.block} from {x.peer} has no matching send")
                sent, payload = queue.popleft()
                if sent.nblocks != x.block.nblocks:
                    raise ScheduleError(f"{_where(s, t)}: receives {x.block.nblocks} block(s) into {x.block} "
                                        f"but rank {x.peer} sends {sent.nblocks} ({sent})")
                domain.write(s.rank, x.block, payload)
        for (src, dst), queue in in_flight.items():
            if queue:
                raise ScheduleError(f"{_where(schedules[src], t)}: send of {queue[0][0]} to {dst} is never received")
        for s, rnd in zip(schedules, rounds):
            for st in rnd.steps:
                try:
                    if isinstance(st, Reduce):
                        domain.reduce(s.rank, st)
                    else:
                        domain.copy(s.rank, st)
                except ScheduleError as exc:
                    raise ScheduleError(f"{_where(s, t)}: step {st}: {exc}") from None


def _overlap(a: Block, b: Block, alias: dict[str, str]) -> bool:
    same = alias.get(a.buf, a.buf) == alias.get(b.buf, b.buf)
    return same and a.lo < b.hi and b.lo < a.hi


def _may_overlap(rnd, alias: dict[str, str]) -> bool:
    """Cheap (n log n) test: False only when no received block can overlap another block in flight."""
    spans = sorted((alias.get(x.block.buf, x.block.buf), x.block.lo, x.block.hi, i < len(rnd.recvs))
                   for i, x in enumerate((*rnd.recvs, *rnd.sends)))
    buf, top_all, top_recv = None, 0, 0
    for name, lo, hi, is_recv in spans:
        if name != buf:
            buf, top_all, top_recv = name, lo, lo
        if (is_recv and top_all > lo) or top_recv > lo:
            return True
        top_all = max(top_all, hi)
        if is_recv:
            top_recv = max(top_recv, hi)
    return False


def _check_hazards(s: Schedule, t: int, rnd, alias: dict[str, str]) -> None:
    """Blocks in flight in one round must not overlap a block being received."""
    if len(rnd.recvs) + len(rnd.sends) > 8 and not any(r.block.buf == "send" for r in rnd.recvs) \
            and not _may_overlap(rnd, alias):
        recvs = ()  # rounds with many messages (linear algorithms): skip the quadratic search
    else:
        recvs = rnd.recvs
    for i, r in enumerate(recvs):
        if r.block.buf == "send":
            raise ScheduleError(f"{_where(s, t)}: receives into the send buffer ({r.block})")
        for other in [*rnd.sends, *rnd.recvs[i + 1:]]:
            if _overlap(r.block, other.block, alias):
                raise ScheduleError(f"{_where(s, t)}: {r.block} is received while {other.block} is in flight")
    for st in rnd.steps:
        if st.out.buf == "send":
            raise ScheduleError(f"{_where(s, t)}: step {st} writes the send buffer")
