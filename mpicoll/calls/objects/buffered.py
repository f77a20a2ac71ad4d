"""The "auto" object collectives: pickles moved by mpicoll's own buffer collectives, as mpi4py moves them.

mpi4py's ``comm.allgather(obj)`` pickles the object, gathers every rank's byte
count (``MPI_Allgather``), then the bytes (``MPI_Allgatherv``), and unpickles
(its ``src/mpi4py/MPI.src/msgpickle.pxi``).  mpicoll does the same with its own
buffer collectives, those of the same ``mpicoll.Comm`` (their algorithms,
their cached plans), with one difference: the first collective moves a
fixed-size *slot* per object, its header and, when the pickle fits, the pickle
itself.  So a small object travels in one collective wherever every rank can
tell that no second one is needed, and the slots' buffers, made once per
communicator (:class:`Scratch`), keep their addresses: the buffer
collectives' plan cache hits from the second call on.

A slot is :func:`slot_size` bytes: two int64, ``length`` (the pickle's, or
``FAILED - rank``: the object of ``rank``, or its root's argument, failed) and
``follows`` (scatter's: the root sends a second collective), then the pickle
if it fits (``inline`` bytes at most).  The second collective moves the
pickles that did not fit:

=========  ======================  ================================================================
call       first                   second (the pickles longer than ``inline``)
=========  ======================  ================================================================
bcast      ``Bcast``, one slot     ``Bcast``, where the root's did not fit (every rank reads its length)
scatter    ``Scatter``, p slots    ``Scatterv``, where one did not fit (the root says so: ``follows``)
allgather  ``Allgather``           ``Allgatherv``, where one did not fit (every rank reads every length)
gather     ``Gather``              ``Gatherv``, always (only the root reads every length): zero counts
                                   where all fit
alltoall   ``Alltoall``, p slots   ``Alltoallv``, always (a rank reads only its own lengths)
=========  ======================  ================================================================

The reductions gather the pickles so (to the root for ``reduce``, to every
rank for ``allreduce``, ``scan`` and ``exscan``) and apply the op in rank
order, ``op(op(o0, o1), o2)``..., as mpi4py's own reductions do without its
``fast_reduce`` option: p - 1 calls of the op and p objects on a rank, which
:func:`folds` allows up to :data:`FOLD_MAX` ranks (the schedules run above).

Failures do not leave a peer waiting: a rank whose object does not pickle (or
a root whose sequence is wrong) writes ``FAILED - rank`` in its slots, plays
its part in both collectives, and raises its error; a rank whose result holds
that slot raises :class:`~mpicoll.errors.PeerFailure`.  Every decision after
the first collective is taken from lengths that every rank taking part in the
second one has read alike.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls.objects.slots import FAILED
from mpicoll.program.state import CommState

__all__ = ["Scratch", "slot_size", "folds", "FOLD_MAX", "bcast", "gather", "scatter", "allgather", "alltoall",
           "reduce", "allreduce", "scan", "exscan"]

#: the most ranks whose objects a reduction gathers and folds in rank order ("auto"; the schedules above)
FOLD_MAX = 8
_HEAD = struct.Struct("=qq")   # a slot's header: length, follows
HEADER = _HEAD.size


def slot_size(size: int) -> int:
    """The bytes of one object's slot at ``size`` ranks: 512, less above 64 ranks (p slots stay within 32 KiB),
    64 at least."""
    return max(64, min(512, 32768 // size // 8 * 8))


def folds(size: int) -> bool:
    """Whether "auto" reduces objects by gathering them and applying the op in rank order (``size`` ranks)."""
    return size <= FOLD_MAX


class Scratch:
    """One communicator's slot buffers: made at its first object collective and kept, so that the buffer
    collectives that move them find their cached plans (the same memory every call)."""

    __slots__ = ("slot", "inline", "one", "many", "received", "one_view", "many_view", "received_view",
                 "received_lengths", "zeros")

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
        self.zeros = [0] * size   # the counts and displacements of a second collective that moves nothing


def _made(state: CommState) -> Scratch:
    """The communicator's scratch, made at its first object collective (``state.object_slots or _made(state)``)."""
    scratch = state.object_slots = Scratch(state.size)
    return scratch


def _pickle(obj: Any, rank: int) -> tuple[bytes | None, int, BaseException | None]:
    """``obj`` pickled with ``MPI.pickle``, and its length; or None, ``FAILED - rank`` and the error."""
    try:
        data = MPI.pickle.dumps(obj)
    except Exception as exc:   # an object that does not pickle: this rank raises after playing its part
        return None, FAILED - rank, exc
    return data, len(data), None


def _pickle_sequence(obj: Any, count: int, rank: int, items: Callable) -> tuple[list, list[int], BaseException | None]:
    """A sequence of ``count`` objects (``items`` reads it as mpi4py does), pickled: their pickles and lengths;
    if the sequence or one of its objects fails, every length says so, and the error."""
    objects, error = items(obj, count, "sendobj")
    if error is None:
        try:
            pickles = [MPI.pickle.dumps(item) for item in objects]
            return pickles, [len(data) for data in pickles], None
        except Exception as exc:   # (as _pickle)
            error = exc
    return [None] * count, [FAILED - rank] * count, error


def _write(view: memoryview, at: int, length: int, data: bytes | None, inline: int, follows: int = 0) -> None:
    """The slot at byte ``at`` of ``view``: its header, and the pickle where it fits."""
    _HEAD.pack_into(view, at, length, follows)
    if 0 <= length <= inline:
        view[at + HEADER:at + HEADER + length] = data


def _overflow(lengths: list[int], inline: int) -> tuple[list[int], list[int]]:
    """The second collective's counts (the pickles that did not fit) and displacements."""
    counts = [n if n > inline else 0 for n in lengths]
    return counts, [0, *accumulate(counts[:-1])]


def _load(collective: str, scratch: Scratch, lengths: list[int], count: int, rest: Any = None,
          displs: list[int] | None = None) -> list:
    """The objects of the first ``count`` received slots, unpickled from the slots, or from ``rest`` at
    ``displs`` where they did not fit; a failed slot raises ``PeerFailure``."""
    loads, view, slot, inline = MPI.pickle.loads, scratch.received_view, scratch.slot, scratch.inline
    out = []
    for k in range(count):
        length = lengths[k]
        if 0 <= length <= inline:
            at = k * slot + HEADER
            out.append(loads(view[at:at + length]))
        elif length <= FAILED:
            raise errors.PeerFailure(collective, FAILED - length)
        else:
            out.append(loads(memoryview(rest)[displs[k]:displs[k] + length]))
    return out


def _mine(scratch: Scratch, data: bytes | None, length: int) -> list:
    """What this rank sends in a second collective: its pickle if it did not fit, else nothing."""
    return [data, length, MPI.BYTE] if length > scratch.inline else [scratch.one, 0, MPI.BYTE]


def bcast(comm: Any, state: CommState, obj: Any, root: int) -> Any:
    """``comm.bcast(obj, root)`` (``root`` checked): the root's slot, then its pickle if it did not fit."""
    scratch = state.object_slots or _made(state)
    view, inline = scratch.one_view, scratch.inline
    data, error = None, None
    if state.rank == root:
        data, length, error = _pickle(obj, root)
        _write(view, 0, length, data, inline)
    comm.Bcast(scratch.one, root)
    length = _HEAD.unpack_from(view, 0)[0]
    if length > inline:
        if state.rank != root:
            data = bytearray(length)
        comm.Bcast([data, length, MPI.BYTE], root)
    if error is not None:
        raise error
    if length <= FAILED:
        raise errors.PeerFailure("bcast", root)
    return MPI.pickle.loads(data if length > inline else view[HEADER:HEADER + length])


def _gathered(comm: Any, state: CommState, collective: str, obj: Any, root: int) -> list | None:
    """Every rank's object at the root, in rank order (None elsewhere): ``Gather`` of the slots, ``Gatherv`` of
    the pickles that did not fit (zero counts where all did)."""
    scratch = state.object_slots or _made(state)
    inline = scratch.inline
    data, length, error = _pickle(obj, state.rank)
    _write(scratch.one_view, 0, length, data, inline)
    comm.Gather(scratch.one, scratch.received, root)
    if state.rank != root:
        comm.Gatherv(_mine(scratch, data, length), None, root)
        if error is not None:
            raise error
        return None
    lengths = scratch.received_lengths.tolist()
    if max(lengths) > inline:
        counts, displs = _overflow(lengths, inline)
        rest = bytearray(sum(counts))
        comm.Gatherv(_mine(scratch, data, length), [rest, counts, displs, MPI.BYTE], root)
    else:
        zeros, rest, displs = scratch.zeros, None, None
        comm.Gatherv(_mine(scratch, data, length), [scratch.received, zeros, zeros, MPI.BYTE], root)
    if error is not None:
        raise error
    return _load(collective, scratch, lengths, state.size, rest, displs)


def gather(comm: Any, state: CommState, obj: Any, root: int) -> list | None:
    """``comm.gather(obj, root)`` (``root`` checked): every rank's object at the root, in rank order."""
    return _gathered(comm, state, "gather", obj, root)


def scatter(comm: Any, state: CommState, obj: Any, root: int, items: Callable) -> Any:
    """``comm.scatter(obj, root)`` (``root`` checked; ``items`` reads the root's sequence): one slot to each
    rank, then the pickles that did not fit, if the root says any did not."""
    scratch = state.object_slots or _made(state)
    size, slot, inline = state.size, scratch.slot, scratch.inline
    error, pickles, lengths = None, [], []
    if state.rank == root:
        pickles, lengths, error = _pickle_sequence(obj, size, root, items)
        follows = int(max(lengths) > inline)
        for k in range(size):
            _write(scratch.many_view, k * slot, lengths[k], pickles[k], inline, follows)
    comm.Scatter(scratch.many, scratch.one, root)
    view = scratch.one_view
    length, follows = _HEAD.unpack_from(view, 0)
    data: Any = None
    if follows:
        data = bytearray(length) if length > inline else None
        mine = [data, length, MPI.BYTE] if data is not None else [scratch.one, 0, MPI.BYTE]
        if state.rank == root:
            counts, displs = _overflow(lengths, inline)
            joined = b"".join(p for p, n in zip(pickles, counts) if n)
            comm.Scatterv([joined, counts, displs, MPI.BYTE], mine, root)
        else:
            comm.Scatterv(None, mine, root)
    if error is not None:
        raise error
    if length <= FAILED:
        raise errors.PeerFailure("scatter", root)
    return MPI.pickle.loads(data if data is not None else view[HEADER:HEADER + length])


def _allgathered(comm: Any, state: CommState, collective: str, obj: Any, count: int) -> list:
    """The objects of ranks ``0 .. count - 1``, on every rank: ``Allgather`` of every rank's slot, then, if one
    did not fit, ``Allgatherv`` of the pickles that did not (every rank takes part in both)."""
    scratch = state.object_slots or _made(state)
    inline = scratch.inline
    data, length, error = _pickle(obj, state.rank)
    _write(scratch.one_view, 0, length, data, inline)
    comm.Allgather(scratch.one, scratch.received)
    lengths = scratch.received_lengths.tolist()
    rest = displs = None
    if max(lengths) > inline:
        counts, displs = _overflow(lengths, inline)
        rest = bytearray(sum(counts))
        comm.Allgatherv(_mine(scratch, data, length), [rest, counts, displs, MPI.BYTE])
    if error is not None:
        raise error
    return _load(collective, scratch, lengths, count, rest, displs)


def allgather(comm: Any, state: CommState, obj: Any) -> list:
    """``comm.allgather(obj)``: every rank's object, in rank order, on every rank."""
    return _allgathered(comm, state, "allgather", obj, state.size)


def alltoall(comm: Any, state: CommState, obj: Any, items: Callable) -> list:
    """``comm.alltoall(obj)`` (``items`` reads the sequence): p slots each way, then the pickles that did not
    fit (zero counts where all did)."""
    scratch = state.object_slots or _made(state)
    size, slot, inline = state.size, scratch.slot, scratch.inline
    pickles, lengths, error = _pickle_sequence(obj, size, state.rank, items)
    for k in range(size):
        _write(scratch.many_view, k * slot, lengths[k], pickles[k], inline)
    comm.Alltoall(scratch.many, scratch.received)
    received = scratch.received_lengths.tolist()
    zeros = scratch.zeros
    if max(lengths) > inline:
        counts, displs = _overflow(lengths, inline)
        sent = [b"".join(p for p, n in zip(pickles, counts) if n), counts, displs, MPI.BYTE]
    else:
        sent = [scratch.many, zeros, zeros, MPI.BYTE]
    rest = rest_displs = None
    if max(received) > inline:
        counts, rest_displs = _overflow(received, inline)
        rest = bytearray(sum(counts))
        comm.Alltoallv(sent, [rest, counts, rest_displs, MPI.BYTE])
    else:
        comm.Alltoallv(sent, [scratch.received, zeros, zeros, MPI.BYTE])
    if error is not None:
        raise error
    return _load("alltoall", scratch, received, size, rest, rest_displs)


def _fold(objects: list, op: Callable) -> Any:
    """``op`` over ``objects`` in rank order: ``op(op(o0, o1), o2)``..."""
    result = objects[0]
    for obj in objects[1:]:
        result = op(result, obj)
    return result


def reduce(comm: Any, state: CommState, obj: Any, op: Callable, root: int) -> Any:
    """``comm.reduce(obj, op, root)`` (checked): every object gathered at the root, ``op`` applied there."""
    objects = _gathered(comm, state, "reduce", obj, root)
    return None if objects is None else _fold(objects, op)


def allreduce(comm: Any, state: CommState, obj: Any, op: Callable) -> Any:
    """``comm.allreduce(obj, op)`` (checked): every object on every rank, ``op`` applied on each."""
    return _fold(_allgathered(comm, state, "allreduce", obj, state.size), op)


def scan(comm: Any, state: CommState, obj: Any, op: Callable) -> Any:
    """``comm.scan(obj, op)`` (checked): on rank r, ``op`` over the objects of ranks 0 .. r."""
    return _fold(_allgathered(comm, state, "scan", obj, state.rank + 1), op)


def exscan(comm: Any, state: CommState, obj: Any, op: Callable) -> Any:
    """``comm.exscan(obj, op)`` (checked): on rank r > 0, ``op`` over the objects of ranks 0 .. r - 1."""
    objects = _allgathered(comm, state, "exscan", obj, state.rank)
    return _fold(objects, op) if objects else None
