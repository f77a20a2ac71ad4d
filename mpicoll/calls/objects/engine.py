"""Running a schedule on objects: one rank over MPI (:func:`run`), or all ranks in one process (:func:`simulate`).

Each buffer of the schedule (``send``, ``recv``, the algorithm's scratch) is a
list of ``nblocks`` slots (:mod:`~mpicoll.calls.objects.slots`).  A send of
blocks ``lo..hi-1`` frames those slots into one message; a receive unframes
its message into them.  Local steps work per block: a copy shares the bytes
(an object held only as itself is pickled first, so that no two blocks share a
live object an op could change), a reduction sets ``out = op(left, right)``,
left being the lower ranks' part, as mpi4py's own reductions call the op.

:func:`run` runs the schedule's rounds as every blocking call does
(:func:`mpicoll.engine.rounds.run`), with the :class:`Probed` policy: a round's
sends are posted, then its receives taken (a matched probe gives each message's
length, so no size travels ahead), then the sends waited for and the round's
steps run, on the communicator's private duplicate and the call's own tag.

:func:`exchange` runs one round of whole messages by the same policy: the pickles too long for a slot of
the "auto" calls (:mod:`~mpicoll.calls.objects.buffered`).

It is the object collectives' transport: their messages, and the pickled messages between an
intercommunicator's leaders (:func:`send_object`, :func:`receive_object`, :func:`swap_objects`,
:func:`post_objects`, used by :mod:`mpicoll.comm.inter_objects`), are posted here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from mpi4py import MPI

from mpicoll.analysis.lockstep import run_lockstep
from mpicoll.calls.objects.slots import Failed, Slot, frame, unframe, value
from mpicoll.engine.flags import FLAGGED, check
from mpicoll.engine.inflight import outstanding, poke
from mpicoll.engine.rounds import Exchange, waitall
from mpicoll.engine.rounds import run as run_rounds
from mpicoll.engine.watchdog import CollectiveTimeout, _idle
from mpicoll.ir.schedule import Block, Copy, Reduce, Schedule

__all__ = ["Buffers", "buffers", "run", "simulate", "Steps", "Probed", "exchange", "send_object", "receive_object",
           "swap_objects", "post_objects"]

Buffers = dict[str, list]


def buffers(schedule: Schedule) -> Buffers:
    """Empty slot lists for every buffer ``schedule`` names."""
    return {name: [None] * schedule.nblocks for name in schedule.buffers() | {"send", "recv"}}


class Steps:
    """The local steps of one rank: copies and reductions on its slots, failures remembered."""

    def __init__(self, bufs: Buffers, op: Callable[[Any, Any], Any] | None, rank: int) -> None:
        self.bufs, self.op, self.rank = bufs, op, rank
        self.error: BaseException | None = None   # this rank's own failure (raised after its part)

    def copy(self, step: Copy) -> None:
        out, src = self.bufs[step.out.buf], self.bufs[step.src.buf]
        for i in range(step.out.hi - step.out.lo):
            slot = src[step.src.lo + i]
            if slot is not None and slot.data is None and not isinstance(slot, Failed):
                slot = Slot(slot.pickle())
            out[step.out.lo + i] = slot

    def reduce(self, step: Reduce) -> None:
        out, left, right = (self.bufs[b.buf] for b in (step.out, step.left, step.right))
        for i in range(step.out.hi - step.out.lo):
            out[step.out.lo + i] = self.combine(left[step.left.lo + i], right[step.right.lo + i])

    def combine(self, left: Slot | None, right: Slot | None) -> Slot | None:
        """``op(left, right)`` as a new slot; a failed operand or a raising op gives a failed slot."""
        for slot in (left, right):
            if isinstance(slot, Failed):
                return slot
        if left is None or right is None:   # (a schedule never reduces an empty block)
            return left if right is None else right
        try:
            return Slot(obj=self.op(value(left), value(right)))
        except Exception as exc:   # the op raised: the ranks that need this result raise as well
            if self.error is None:
                self.error = exc
            return Failed(self.rank)


class Probed(Exchange):
    """The policy of :func:`mpicoll.engine.rounds.run` for object messages, whose lengths no rank knows
    ahead: a send is ``(read, peer)`` (``read()`` gives its bytes, framed blocks or a pickle, when the round
    is posted), a receive ``(write, peer)`` (``write(message)`` takes the message, received whole).  Receives
    are taken by matched probe, blocking in ``Mprobe`` in listed order, or, with a timeout or while mpicoll's
    nonblocking requests are outstanding (they must keep moving), polled."""

    def __init__(self, collective: str, rank: int, timeout: float | None) -> None:
        self.collective, self.rank, self.timeout = collective, rank, timeout
        self.status = MPI.Status()

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        status, timeout = self.status, self.timeout
        requests = [comm.Isend(read(), peer, tag) for read, peer in sends]
        if timeout is None and not outstanding():
            # every rank posted its round's sends before blocking here: taking the receives in listed
            # order, each in a blocking matched probe, cannot deadlock (and does not yield the core)
            for write, peer in recvs:
                _take(comm.Mprobe(peer, tag, status), status, comm, write)
            waiting = []
        else:
            waiting = list(recvs)   # from each peer, messages arrive in the order they are listed
        last, spins = time.monotonic(), 0
        while waiting:
            taken = None
            seen: set[int] = set()
            for i, (write, peer) in enumerate(waiting):
                if peer in seen:
                    continue
                seen.add(peer)
                msg = comm.Improbe(peer, tag, status)
                if msg is not None:
                    _take(msg, status, comm, write)
                    taken = i
                    break
            if taken is not None:
                del waiting[taken]
                last, spins = time.monotonic(), 0
                continue
            spins += 1
            poke()   # mpicoll's own outstanding requests keep moving meanwhile (unless a thread drives them)
            if timeout is not None and time.monotonic() - last > timeout:
                raise CollectiveTimeout(self.collective, t, sorted({p for _, p in waiting}), timeout, self.rank)
            _idle(spins)
        waitall(requests)


def _take(message: MPI.Message, status: MPI.Status, comm: MPI.Comm, write: Callable[[bytearray], None]) -> None:
    """Receive a matched message (its size in ``status``) whole and hand it to ``write``, unless the mismatch
    check flagged ``comm`` meanwhile: its wait then ended with an empty message, which is no pickle
    (:mod:`mpicoll.engine.mismatch`), and :func:`~mpicoll.engine.flags.check` raises."""
    data = bytearray(status.Get_count(MPI.BYTE))
    message.Recv([data, MPI.BYTE])
    if FLAGGED:
        check(comm)
    write(data)


def run(schedule: Schedule, bufs: Buffers, steps: Steps, comm: MPI.Comm, tag: int,
        timeout: float | None = None) -> None:
    """Run ``schedule`` on ``bufs`` over ``comm`` (the private duplicate) with ``tag``: its rounds bound to the
    slots, run by :func:`mpicoll.engine.rounds.run` with the :class:`Probed` policy."""
    def read(block: Block) -> Callable[[], bytes]:
        return lambda: frame(bufs[block.buf][block.lo:block.hi])

    def write(block: Block) -> Callable[[list], None]:
        return lambda message: _store(bufs[block.buf], block, unframe(message))

    rounds = [([(read(b), peer) for peer, b in rnd.sends], [(write(b), peer) for peer, b in rnd.recvs],
               [partial(steps.reduce if isinstance(st, Reduce) else steps.copy, st) for st in rnd.steps])
              for rnd in schedule.rounds]
    run_rounds(rounds, comm, tag, Probed(schedule.collective, schedule.rank, timeout))


def exchange(comm: MPI.Comm, tag: int, sends: Sequence[tuple[Any, int]],
             recvs: Sequence[tuple[Callable[[bytearray], None], int]], collective: str, rank: int,
             timeout: float | None = None) -> None:
    """One round of whole messages on ``comm`` with ``tag`` (the pickles too long for a slot,
    :mod:`~mpicoll.calls.objects.buffered`): each ``(data, peer)`` of ``sends`` posted as it is, each
    ``(write, peer)`` of ``recvs`` received whole and handed to ``write``, by the :class:`Probed` policy (a
    matched probe gives each length; polled with a timeout or while requests are outstanding)."""
    reads = [(partial(_given, data), peer) for data, peer in sends]
    run_rounds([(reads, list(recvs), [])], comm, tag, Probed(collective, rank, timeout))


def _given(data: Any) -> Any:
    return data


def _store(buf: list, block: Block, slots: list) -> None:
    if len(slots) != block.hi - block.lo:
        raise RuntimeError(f"object collective: a message of {len(slots)} blocks for {block} "
                           "(do the ranks agree on the call and its algorithm?)")
    buf[block.lo:block.hi] = slots


class _Domain:
    """Every rank's slots, for :func:`mpicoll.analysis.lockstep.run_lockstep`."""

    def __init__(self, ranks: list[tuple[Buffers, Steps]]) -> None:
        self.ranks = ranks

    def read(self, rank: int, block: Block) -> list:
        return unframe(frame(self.ranks[rank][0][block.buf][block.lo:block.hi]))   # as it travels

    def write(self, rank: int, block: Block, payload: list) -> None:
        _store(self.ranks[rank][0][block.buf], block, payload)

    def reduce(self, rank: int, step: Reduce) -> None:
        self.ranks[rank][1].reduce(step)

    def copy(self, rank: int, step: Copy) -> None:
        self.ranks[rank][1].copy(step)


def simulate(schedules: Sequence[Schedule], ranks: list[tuple[Buffers, Steps]]) -> None:
    """Run all ranks' ``schedules`` in this process on their ``(buffers, steps)``: no MPI (messages are
    framed and unframed as they would travel)."""
    run_lockstep(schedules, _Domain(ranks))


# -- pickled objects between two ranks (an intercommunicator's leaders: mpicoll.comm.inter_objects) ---------

def send_object(comm: MPI.Comm, obj: Any, peer: int, tag: int) -> None:
    """``obj`` pickled to ``peer`` (mpi4py's ``send``)."""
    comm.send(obj, dest=peer, tag=tag)


def receive_object(comm: MPI.Comm, peer: int, tag: int) -> Any:
    """The object ``peer`` sends with ``tag``, unpickled (mpi4py's ``recv``)."""
    return comm.recv(source=peer, tag=tag)


def swap_objects(comm: MPI.Comm, obj: Any, peer: int, tag: int) -> Any:
    """``obj`` to ``peer`` and ``peer``'s object back, at once (mpi4py's ``sendrecv``)."""
    return comm.sendrecv(obj, dest=peer, sendtag=tag, source=peer, recvtag=tag)


def post_objects(comm: MPI.Comm, tag: int, sends: Sequence[tuple[Any, int]]) -> list[MPI.Request]:
    """Each ``(obj, peer)`` of ``sends`` pickled and posted (mpi4py's ``isend``); wait with
    ``MPI.Request.waitall``."""
    return [comm.isend(obj, dest=peer, tag=tag) for obj, peer in sends]
