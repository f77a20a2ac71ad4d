"""The "auto" object collectives: pickles moved by mpicoll's own buffer collectives, as mpi4py moves them.

mpi4py's ``comm.allgather(obj)`` pickles the object, gathers every rank's byte
count (``MPI_Allgather``), then the bytes (``MPI_Allgatherv``), and unpickles
(its ``src/mpi4py/MPI.src/msgpickle.pxi``).  mpicoll does the same with its own
buffer collectives, those of the same ``mpicoll.Comm`` (their algorithms,
their cached plans), with one difference: the collective moves a fixed-size
*slot* per object, its length and, when the pickle fits, the pickle itself.
So a small object travels in one collective, and the slots' buffers, made once
per communicator (:class:`Scratch`), keep their addresses: the buffer
collectives' plan cache hits from the second call on.

A slot is :func:`slot_size` bytes: an int64 ``length`` (the pickle's, or
``FAILED - rank``: the object of ``rank``, or its root's argument, failed),
then the pickle if it fits (``inline`` bytes at most).  The pickles that did
not fit travel after the slots:

=========  ======================  ================================================================
call       slots                   the pickles longer than ``inline``
=========  ======================  ================================================================
bcast      ``Bcast``, one slot     ``Bcast``, where the root's did not fit (every rank reads its length)
allgather  ``Allgather``           ``Allgatherv``, where one did not fit (every rank reads every length)
scatter    ``Scatter``, p slots    from the root to each rank whose slot says so
gather     ``Gather``              to the root from each rank whose pickle did not fit
alltoall   ``Alltoall``, p slots   from each rank to each peer whose slot says so
=========  ======================  ================================================================

Where only the two ranks a pickle travels between can tell that it did not
fit (scatter, gather, alltoall), it travels point to point, on the object
engine's transport (:func:`mpicoll.calls.objects.engine.exchange`: a matched
probe gives its length) with a tag no call draws (:data:`OVERFLOW`); so those
calls, too, run one collective when every object fits.  The pickling into
slots and out of them is :mod:`~mpicoll.calls.objects.codec` (compiled where
built).

The reductions gather the pickles so (to the root for ``reduce``, to every
rank for ``allreduce``, ``scan`` and ``exscan``) and apply the op in rank
order, ``op(op(o0, o1), o2)``..., as mpi4py's own reductions do without its
``fast_reduce`` option: p - 1 calls of the op and p objects on a rank, which
:func:`folds` allows up to :data:`FOLD_MAX` ranks (the schedules run above).

Failures do not leave a peer waiting: a rank whose object does not pickle (or
a root whose sequence is wrong) writes ``FAILED - rank`` in its slots, plays
its part, and raises its error; a rank whose result holds that slot raises
:class:`~mpicoll.errors.PeerFailure`.  Every decision after the slots'
collective is taken from lengths that the ranks it concerns have read alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from itertools import accumulate
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls.objects import engine
from mpicoll.calls.objects.codec import HEADER, LENGTH, load, put, put_many
from mpicoll.calls.objects.slots import FAILED
from mpicoll.engine.watchdog import CollectiveTimeout
from mpicoll.program.state import CommState

__all__ = ["Scratch", "slot_size", "folds", "FOLD_MAX", "SLOT_MAX", "bcast", "gather", "scatter", "allgather",
           "alltoall", "reduce", "allreduce", "scan", "exscan"]

#: the most ranks whose objects a reduction gathers and folds in rank order ("auto"; the schedules above)
FOLD_MAX = 8
#: the longest slot: at 2 processes on one node (Open MPI 5.0, shared memory) a 264-byte ``Bcast`` took twice as
#: long as a 256-byte one (measured; we take it for the transport's limit on messages sent inline)
SLOT_MAX = 256

#: the tag of the pickles that did not fit: number 0 of the blocking form, which no call draws
#: (:meth:`~mpicoll.program.state.CommState.next_tag`).  Both ends of each such message read the same lengths,
#: so each call's messages match one to one, and two ranks' messages on one tag arrive in the order sent: a
#: call never takes another's
OVERFLOW = 0


def slot_size(size: int) -> int:
    """The bytes of one object's slot at ``size`` ranks: :data:`SLOT_MAX`, less above 128 ranks (p slots stay
    within 32 KiB), 64 at least."""
    return max(64, min(SLOT_MAX, 32768 // size // 8 * 8))


def folds(size: int) -> bool:
    """Whether "auto" reduces objects by gathering them and applying the op in rank order (``size`` ranks)."""
    return size <= FOLD_MAX


class Scratch:
    """One communicator's slot buffers: made at its first object collective and kept, so that the buffer
    collectives that move them find their cached plans (the same memory every call)."""

    __slots__ = ("slot", "inline", "one", "many", "received", "one_view", "many_view", "received_view",
                 "received_lengths")

    def __init__(self, size: int) -> None:
        self.slot = slot_size(size)
        self.inline = self.slot - HEADER                   # the longest pickle a slot holds
        self.one = np.zeros(self.slot, np.uint8)           # this rank's slot (sent or received)
        self.many = np.zeros(self.slot * size, np.uint8)   # p slots sent (scatter's root, alltoall)
        self.received = np.zeros(self.slot * size, np.uint8)   # p slots received
        self.one_view, self.many_view, self.received_view = (memoryview(a) for a in (self.one, self.many,
                                                                                     self.received))
        #: the lengths in the received slots' headers (a view: read it after each call)
        self.received_lengths = self.received.view(np.int64)[::self.slot // 8]


def _made(state: CommState) -> Scratch:
    """The communicator's scratch, made at its first object collective (``state.object_slots or _made(state)``)."""
    scratch = state.object_slots = Scratch(state.size)
    return scratch


def items(obj: Any, size: int, what: str) -> tuple[list, BaseException | None]:
    """A root's (or an alltoall's) ``size`` objects, as mpi4py reads them (None: ``size`` Nones), and None; or
    ``size`` Nones and the error."""
    if obj is None:
        return [None] * size, None
    try:
        objects = list(obj)
    except TypeError as exc:
        return [None] * size, exc
    if len(objects) != size:
        return [None] * size, errors.CountError(f"{what}: expecting {size} items, got {len(objects)}")
    return objects, None


def _put_read(scratch: Scratch, obj: Any, count: int, rank: int) -> tuple[list, int, BaseException | None]:
    """A sequence of ``count`` objects that is not a list of that length (read as :func:`items` reads it),
    pickled into the p slots to send (``scratch.many``), as ``put_many`` does a list: their pickles and the
    longest one's length; if the sequence or one of its objects fails, every slot's length says so
    (``FAILED - rank``, also returned), and the error."""
    obj, error = items(obj, count, "sendobj")
    if error is None:
        return put_many(scratch.many_view, obj, rank, scratch.slot, scratch.inline)
    for at in range(0, count * scratch.slot, scratch.slot):
        LENGTH.pack_into(scratch.many_view, at, FAILED - rank)
    return obj, FAILED - rank, error


def _exchange(state: CommState, collective: str, sends: Sequence[tuple[Any, int]],
              sources: Sequence[int]) -> dict[int, bytearray]:
    """The pickles that did not fit, point to point with the tag :data:`OVERFLOW`: each ``(pickle, peer)`` of
    ``sends`` sent, one received from each of ``sources`` (by source).  A timeout puts the communicator out of
    step, as a buffer collective's does."""
    received: dict[int, bytearray] = {}
    recvs = [(partial(received.__setitem__, peer), peer) for peer in sources]
    try:
        engine.exchange(state.private, OVERFLOW, sends, recvs, collective, state.rank, state.timeout)
    except CollectiveTimeout as exc:
        state.went_out_of_step(exc)
        raise
    return received


def _loaded(collective: str, scratch: Scratch, lengths: list[int], rest: dict) -> list:
    """The objects of the received slots (one per length of ``lengths``), unpickled from the slots, or from
    ``rest[k]`` where they did not fit; a failed slot raises ``PeerFailure``.  (Where every slot fits,
    :func:`~mpicoll.calls.objects.codec.load` does this.)"""
    loads, view, slot, inline = MPI.pickle.loads, scratch.received_view, scratch.slot, scratch.inline
    out = []
    for k, length in enumerate(lengths):
        if 0 <= length <= inline:
            out.append(loads(view[k * slot + HEADER:k * slot + HEADER + length]))
        elif length <= FAILED:
            raise errors.PeerFailure(collective, FAILED - length)
        else:
            out.append(loads(rest[k]))
    return out


def _single(collective: str, scratch: Scratch, peer: int) -> int:
    """The length in this rank's received slot (``scratch.one``), which did not fit (its pickle follows from
    ``peer``); a failed one raises ``PeerFailure``."""
    length = LENGTH.unpack_from(scratch.one_view)[0]
    if length < 0:
        raise errors.PeerFailure(collective, peer)
    return length


def bcast(comm: Any, state: CommState, obj: Any, root: int) -> Any:
    """``comm.bcast(obj, root)`` (``root`` checked): the root's slot, then its pickle if it did not fit."""
    scratch = state.object_slots or _made(state)
    if state.rank != root:
        comm.Bcast(scratch.one, root)
        objects = load(scratch.one_view, 1, scratch.slot, scratch.inline)
        if objects is not None:
            return objects[0]
        length = _single("bcast", scratch, root)
        data = bytearray(length)
        comm.Bcast([data, length, MPI.BYTE], root)
        return MPI.pickle.loads(data)
    data, length, error = put(scratch.one_view, obj, root, scratch.inline)
    comm.Bcast(scratch.one, root)
    if length > scratch.inline:
        comm.Bcast([data, length, MPI.BYTE], root)
    if error is not None:
        raise error
    return MPI.pickle.loads(data)   # (a copy of its own object, as from mpi4py's)


def gather(comm: Any, state: CommState, obj: Any, root: int, collective: str = "gather") -> list | None:
    """``comm.gather(obj, root)`` (``root`` checked): every rank's object at the root, in rank order (None
    elsewhere): ``Gather`` of the slots, then each pickle that did not fit, sent to the root."""
    scratch = state.object_slots or _made(state)
    rank, inline = state.rank, scratch.inline
    data, length, error = put(scratch.one_view, obj, rank, inline)
    comm.Gather(scratch.one, scratch.received, root)
    if rank != root:
        if length > inline:
            _exchange(state, collective, [(data, root)], ())
        if error is not None:
            raise error
        return None
    objects = load(scratch.received_view, state.size, scratch.slot, inline)   # (None: one did not fit, or failed)
    if objects is not None:
        return objects
    lengths = scratch.received_lengths.tolist()
    rest = _exchange(state, collective, (), [k for k, n in enumerate(lengths) if n > inline and k != root])
    rest[root] = data
    if error is not None:
        raise error
    return _loaded(collective, scratch, lengths, rest)


def scatter(comm: Any, state: CommState, obj: Any, root: int) -> Any:
    """``comm.scatter(obj, root)`` (``root`` checked): one slot to each rank, then each pickle that did not fit,
    sent by the root."""
    scratch = state.object_slots or _made(state)
    rank, inline = state.rank, scratch.inline
    if rank == root:
        pickles, longest, error = (put_many(scratch.many_view, obj, root, scratch.slot, inline)
                                   if type(obj) is list and len(obj) == state.size
                                   else _put_read(scratch, obj, state.size, root))
        comm.Scatter(scratch.many, scratch.one, root)
        if longest > inline:
            _exchange(state, "scatter", [(p, k) for k, p in enumerate(pickles) if len(p) > inline and k != root], ())
        if error is not None:
            raise error
        return MPI.pickle.loads(pickles[root])   # (a copy of its own object, as from mpi4py's)
    comm.Scatter(scratch.many, scratch.one, root)
    objects = load(scratch.one_view, 1, scratch.slot, inline)
    if objects is not None:
        return objects[0]
    _single("scatter", scratch, root)
    return MPI.pickle.loads(_exchange(state, "scatter", (), (root,))[root])


def allgather(comm: Any, state: CommState, obj: Any, collective: str = "allgather", count: int | None = None) -> list:
    """``comm.allgather(obj)``: every rank's object (of ranks ``0 .. count - 1``), in rank order, on every rank:
    ``Allgather`` of every rank's slot, then, if one did not fit, ``Allgatherv`` of the pickles that did not
    (every rank takes part in both)."""
    scratch = state.object_slots or _made(state)
    inline = scratch.inline
    data, length, error = put(scratch.one_view, obj, state.rank, inline)
    comm.Allgather(scratch.one, scratch.received)
    if count is None:
        objects = load(scratch.received_view, state.size, scratch.slot, inline)  # (None: one did not fit, or failed)
        if objects is not None:
            return objects
    lengths = scratch.received_lengths.tolist()
    rest: dict = {}
    if max(lengths) > inline:
        counts = [n if n > inline else 0 for n in lengths]
        displs = [0, *accumulate(counts[:-1])]
        joined = bytearray(sum(counts))
        mine = [data, length, MPI.BYTE] if length > inline else [scratch.one, 0, MPI.BYTE]
        comm.Allgatherv(mine, [joined, counts, displs, MPI.BYTE])
        view = memoryview(joined)
        rest = {k: view[at:at + n] for k, (at, n) in enumerate(zip(displs, counts)) if n}
    if error is not None:
        raise error
    return _loaded(collective, scratch, lengths if count is None else lengths[:count], rest)


def alltoall(comm: Any, state: CommState, obj: Any) -> list:
    """``comm.alltoall(obj)``: p slots each way, then each pickle that did not fit, sent to its peer."""
    scratch = state.object_slots or _made(state)
    rank, size, inline = state.rank, state.size, scratch.inline
    pickles, longest, error = (put_many(scratch.many_view, obj, rank, scratch.slot, inline)
                               if type(obj) is list and len(obj) == size else _put_read(scratch, obj, size, rank))
    comm.Alltoall(scratch.many, scratch.received)
    objects = load(scratch.received_view, size, scratch.slot, inline)   # (None: one did not fit, or failed)
    if objects is not None and longest <= inline:
        return objects
    received = scratch.received_lengths.tolist()
    rest = _exchange(state, "alltoall", [(p, k) for k, p in enumerate(pickles)
                                         if p is not None and len(p) > inline and k != rank],
                     [k for k, n in enumerate(received) if n > inline and k != rank])
    rest[rank] = pickles[rank]
    if error is not None:
        raise error
    return _loaded("alltoall", scratch, received, rest)


def _fold(objects: list, op: Callable) -> Any:
    """``op`` over ``objects`` in rank order: ``op(op(o0, o1), o2)``..."""
    result = objects[0]
    for obj in objects[1:]:
        result = op(result, obj)
    return result


def reduce(comm: Any, state: CommState, obj: Any, op: Callable, root: int) -> Any:
    """``comm.reduce(obj, op, root)`` (checked): every object gathered at the root, ``op`` applied there."""
    objects = gather(comm, state, obj, root, "reduce")
    return None if objects is None else _fold(objects, op)


def allreduce(comm: Any, state: CommState, obj: Any, op: Callable) -> Any:
    """``comm.allreduce(obj, op)`` (checked): every object on every rank, ``op`` applied on each."""
    return _fold(allgather(comm, state, obj, "allreduce"), op)


def scan(comm: Any, state: CommState, obj: Any, op: Callable) -> Any:
    """``comm.scan(obj, op)`` (checked): on rank r, ``op`` over the objects of ranks 0 .. r."""
    return _fold(allgather(comm, state, obj, "scan", state.rank + 1), op)


def exscan(comm: Any, state: CommState, obj: Any, op: Callable) -> Any:
    """``comm.exscan(obj, op)`` (checked): on rank r > 0, ``op`` over the objects of ranks 0 .. r - 1."""
    objects = allgather(comm, state, obj, "exscan", state.rank)
    return _fold(objects, op) if objects else None
