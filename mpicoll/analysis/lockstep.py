"""Run the schedules of all ranks together, one round at a time, in one process.

The interpreter matches every send of round t to the receive its peer posts in
round t (in order, per pair of ranks), checks the rules of the IR, and hands the
data movement and local steps to a *domain*: NumPy arrays for the simulator,
symbolic contributions for the checker.  Any violation raises
:class:`~mpicoll.ir.schedule.ScheduleError` naming the algorithm, p, rank, round and
block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from mpicoll.families.registry import gc_paused
from mpicoll.ir.schedule import EMPTY_ROUND, Block, Copy, Reduce, Schedule, ScheduleError

__all__ = ["Domain", "run_lockstep"]


class Domain(Protocol):
    """Where the data live.  ``read`` returns a snapshot (a copy), not a view: a rank's local
    steps may run before a message it sent in the same round is written at its peer."""

    def read(self, rank: int, block: Block) -> Any: ...
    def write(self, rank: int, block: Block, payload: Any) -> None: ...
    def reduce(self, rank: int, step: Reduce) -> None: ...
    def copy(self, rank: int, step: Copy) -> None: ...


def _where(s: Schedule, t: int) -> str:
    return f"{s.collective}/{s.algorithm} p={s.size} rank {s.rank} round {t}"


def run_lockstep(schedules: Sequence[Schedule], domain: Domain, alias: dict[str, str] | None = None) -> None:
    """Execute every rank's schedule on ``domain``, round by round.

    ``alias`` maps buffer names to the buffer they share memory with (in-place
    calls: ``{"send": "recv"}``), so that hazards between them are caught.  The
    cyclic garbage collector is paused meanwhile: the run makes millions of small
    acyclic tuples at p = 1024, and the collector's repeated scans of the (large,
    cached) schedules would make it about ten times slower.
    """
    with gc_paused():
        _run(schedules, domain, alias or {})


def _run(schedules: Sequence[Schedule], domain: Domain, alias: dict[str, str]) -> None:
    size = len(schedules)
    nrounds = max((len(s.rounds) for s in schedules), default=0)
    read, write, reduce, copy = domain.read, domain.write, domain.reduce, domain.copy
    by_round: list[list] = [[] for _ in range(nrounds)]  # the ranks that do something, per round
    for s in schedules:
        for t, rnd in enumerate(s.rounds):
            if rnd is not EMPTY_ROUND:  # (an empty Round made by hand would just do nothing)
                by_round[t].append((s, rnd))
    for t, active in enumerate(by_round):
        # Sends first: every payload is read before any rank of the round writes.  A pair's
        # messages of one round queue in a list, in listed order (usually one message).
        in_flight: dict[int, list] = {}
        nsent = 0
        for s, rnd in active:
            sends, recvs = rnd.sends, rnd.recvs
            if recvs:
                if len(recvs) == 1 and len(sends) <= 1:  # the common case, inlined
                    rb = recvs[0].block
                    if rb.buf == "send":
                        _check_hazards(s, t, rnd, alias)
                    elif sends:
                        sb = sends[0].block
                        if sb.lo < rb.hi and rb.lo < sb.hi and alias.get(sb.buf, sb.buf) == alias.get(rb.buf, rb.buf):
                            _check_hazards(s, t, rnd, alias)
                else:
                    _check_hazards(s, t, rnd, alias)
            if not sends:
                continue
            rank = s.rank
            for peer, block in sends:
                if not 0 <= peer < size or peer == rank:
                    raise ScheduleError(f"{_where(s, t)}: send of {block} to invalid peer {peer}")
                key = rank * size + peer
                queue = in_flight.get(key)
                if queue is None:
                    in_flight[key] = [(block, read(rank, block))]
                else:
                    queue.append((block, read(rank, block)))
                nsent += 1
        # Then each rank receives and runs its local steps: its steps come after all its receives,
        # and they touch only its own buffers, which no other rank reads in this round any more.
        nreceived = 0
        for s, rnd in active:
            rank = s.rank
            for peer, block in rnd.recvs:
                queue = in_flight.get(peer * size + rank)
                if not queue:
                    raise ScheduleError(f"{_where(s, t)}: receive into {block} from {peer} has no matching send")
                sent, payload = queue.pop(0)
                if sent.hi - sent.lo != block.hi - block.lo:
                    raise ScheduleError(f"{_where(s, t)}: receives {block.nblocks} block(s) into {block} "
                                        f"but rank {peer} sends {sent.nblocks} ({sent})")
                write(rank, block, payload)
                nreceived += 1
            for st in rnd.steps:
                if st.out.buf == "send":
                    raise ScheduleError(f"{_where(s, t)}: step {st} writes the send buffer")
                try:
                    if type(st) is Reduce:
                        reduce(rank, st)
                    else:
                        copy(rank, st)
                except ScheduleError as exc:
                    raise ScheduleError(f"{_where(s, t)}: step {st}: {exc}") from None
        if nreceived != nsent:
            for key, queue in in_flight.items():
                if queue:
                    src, dst = divmod(key, size)
                    raise ScheduleError(f"{_where(schedules[src], t)}: send of {queue[0][0]} to {dst} "
                                        "is never received")


def _overlap(a: Block, b: Block, alias: dict[str, str]) -> bool:
    return a.lo < b.hi and b.lo < a.hi and alias.get(a.buf, a.buf) == alias.get(b.buf, b.buf)


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
    recvs = rnd.recvs
    if len(recvs) + len(rnd.sends) > 8 and not any(r.block.buf == "send" for r in recvs) \
            and not _may_overlap(rnd, alias):
        recvs = ()  # rounds with many messages (linear algorithms): skip the quadratic search
    for i, r in enumerate(recvs):
        rb = r.block
        if rb.buf == "send":
            raise ScheduleError(f"{_where(s, t)}: receives into the send buffer ({rb})")
        mine = alias.get(rb.buf, rb.buf)
        for other in (*rnd.sends, *recvs[i + 1:]):
            ob = other.block
            if ob.lo < rb.hi and rb.lo < ob.hi and alias.get(ob.buf, ob.buf) == mine:
                raise ScheduleError(f"{_where(s, t)}: {rb} is received while {ob} is in flight")
    for st in rnd.steps:
        if st.out.buf == "send":
            raise ScheduleError(f"{_where(s, t)}: step {st} writes the send buffer")
