"""Objects in and out of fixed-size slots: the "auto" object collectives' pickling, compiled where built.

A slot (:mod:`mpicoll.calls.objects.buffered`) is an int64 *length* (the pickle's, or ``FAILED - rank``: the
object of ``rank`` failed) and then, when it fits (``inline`` bytes at most), the pickle made by mpi4py's
``MPI.pickle``.  The three functions here write and read slots: :func:`put` one object, :func:`put_many` a
sequence of them, :func:`load` the objects of received slots.  They are the per-object work of every object
collective, so ``mpicoll.calls.objects._codec`` (``_codec.c``) does the same in C where it is built (and
``MPICOLL_NO_EXTENSIONS`` is not set; chosen at import, as every extension: :mod:`mpicoll.compiled`); the
definitions below are what it does, and what runs without it.  Both call ``MPI.pickle``'s ``dumps`` and
``loads`` (whatever a program set them to with ``MPI.pickle.__init__``).
"""

from __future__ import annotations

import struct
from typing import Any

from mpi4py import MPI

from mpicoll.calls.objects.slots import FAILED
from mpicoll.compiled import extension

__all__ = ["LENGTH", "HEADER", "FAILED", "COMPILED", "put", "put_many", "load"]

LENGTH = struct.Struct("=q")   # a slot's header: the pickle's length (or FAILED - rank)
HEADER = LENGTH.size


def _put(buf: memoryview, obj: Any, rank: int, inline: int) -> tuple[Any, int, BaseException | None]:
    """``obj`` pickled into the slot at the start of ``buf`` (its length; the pickle where it fits): the pickle,
    its length and None; or, where it does not pickle, None, ``FAILED - rank`` and the error."""
    try:
        data = MPI.pickle.dumps(obj)
    except Exception as exc:   # an object that does not pickle: the caller raises after playing its part
        LENGTH.pack_into(buf, 0, FAILED - rank)
        return None, FAILED - rank, exc
    length = len(data)
    LENGTH.pack_into(buf, 0, length)
    if length <= inline:
        buf[HEADER:HEADER + length] = data
    return data, length, None


def _put_many(buf: memoryview, objects: list, rank: int, slot: int,
              inline: int) -> tuple[list, int, BaseException | None]:
    """``objects`` pickled into consecutive slots of ``slot`` bytes from the start of ``buf``: their pickles, the
    longest one's length and None; if one does not pickle, every slot's length is ``FAILED - rank``: Nones,
    that length and the error."""
    pickles, longest, at = [], -1, 0
    try:
        for obj in objects:
            data = MPI.pickle.dumps(obj)
            length = len(data)
            LENGTH.pack_into(buf, at, length)
            if length <= inline:
                buf[at + HEADER:at + HEADER + length] = data
            pickles.append(data)
            longest = max(longest, length)
            at += slot
    except Exception as exc:   # (as _put)
        count = len(objects)
        for at in range(0, count * slot, slot):
            LENGTH.pack_into(buf, at, FAILED - rank)
        return [None] * count, FAILED - rank, exc
    return pickles, longest, None


def _load(buf: memoryview, count: int, slot: int, inline: int) -> list | None:
    """The objects of the first ``count`` slots of ``buf``, unpickled; None (and nothing unpickled) where a
    slot's length is not ``0 .. inline`` (a pickle that did not fit, or a failed one: the caller's slow path)."""
    lengths = [LENGTH.unpack_from(buf, at)[0] for at in range(0, count * slot, slot)]
    if not lengths or max(lengths) > inline or min(lengths) < 0:
        return None if lengths else []
    loads = MPI.pickle.loads
    return [loads(buf[at + HEADER:at + HEADER + n]) for at, n in zip(range(0, count * slot, slot), lengths)]


#: the compiled codec, or None (not built, or ``MPICOLL_NO_EXTENSIONS=1``)
COMPILED = extension("_codec")

#: ``put(buf, obj, rank, inline)``, ``put_many(buf, objects, rank, slot, inline)``, ``load(buf, count, slot,
#: inline)``: the definitions above, or the same functions compiled
put, put_many, load = ((_put, _put_many, _load) if COMPILED is None
                       else (COMPILED.put, COMPILED.put_many, COMPILED.load))
