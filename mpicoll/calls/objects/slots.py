"""What one block of an object collective holds, and how blocks travel in one message.

A block holds nothing (``None``), or a :class:`Slot`: one object, as its pickle
(``data``, bytes made with ``MPI.pickle``) or as the object itself (``obj``, a
reduction's partial result), each made from the other only when needed.  A
block whose contribution failed (an object that would not pickle, an op that
raised, a root's bad argument) holds a :class:`Failed` slot naming the rank
where it failed: it travels along the schedule like data, so every rank whose
result depends on it raises too.

A message carries a run of blocks as one frame: ``n`` and the ``n`` lengths
(int64; -1 for an empty block, ``-2 - rank`` for one failed on ``rank``), then
the blocks' bytes one after the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["Slot", "Failed", "frame", "unframe", "value", "pickled", "EMPTY", "FAILED"]

_UNSET = object()
EMPTY, FAILED = -1, -2   # a length that says: no block; failed on rank ``FAILED - length``


class Slot:
    """One object, as its pickle or as itself (both kept once made)."""

    __slots__ = ("data", "obj")

    def __init__(self, data: Any = None, obj: Any = _UNSET) -> None:
        self.data, self.obj = data, obj

    def pickle(self) -> Any:
        """The object's bytes (pickled now, once, if it was held as an object)."""
        if self.data is None:
            self.data = MPI.pickle.dumps(self.obj)
        return self.data

    def load(self) -> Any:
        """A fresh object unpickled from the bytes (each caller gets its own, as from mpi4py's receives)."""
        if self.data is None:
            return self.obj
        return MPI.pickle.loads(self.data)


class Failed(Slot):
    """A contribution that failed on rank ``rank``."""

    __slots__ = ("rank",)

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank


def pickled(obj: Any, rank: int) -> tuple[Slot, BaseException | None]:
    """``obj`` pickled with mpi4py's pickle: a slot, or a :class:`Failed` one and the exception."""
    try:
        return Slot(MPI.pickle.dumps(obj)), None
    except Exception as exc:   # an unpicklable object: this rank raises after playing its part
        return Failed(rank), exc


def value(slot: Slot) -> Any:
    """The object a reduction step reads: the partial itself, or a fresh unpickled one."""
    return slot.obj if slot.obj is not _UNSET else MPI.pickle.loads(slot.data)


def frame(slots: list[Slot | None]) -> bytes:
    """The message carrying ``slots``: their count and lengths, then their bytes."""
    lengths = np.empty(len(slots) + 1, np.int64)
    lengths[0] = len(slots)
    parts = [b""]
    for i, slot in enumerate(slots, 1):
        if slot is None:
            lengths[i] = EMPTY
        elif isinstance(slot, Failed):
            lengths[i] = FAILED - slot.rank
        else:
            data = slot.pickle()
            lengths[i] = len(data)
            parts.append(data)
    parts[0] = lengths.tobytes()
    return b"".join(parts)


def unframe(message: Any) -> list[Slot | None]:
    """The slots a frame carries (their bytes are views of ``message``, not copies)."""
    view = memoryview(message)
    n = int(np.frombuffer(view[:8], np.int64)[0])
    lengths = np.frombuffer(view[8:8 * (n + 1)], np.int64).tolist()
    out: list[Slot | None] = []
    at = 8 * (n + 1)
    for length in lengths:
        if length == EMPTY:
            out.append(None)
        elif length <= FAILED:
            out.append(Failed(FAILED - length))
        else:
            out.append(Slot(view[at:at + length]))
            at += length
    return out
