"""Layouts turn symbolic block ranges into element ranges.

A schedule speaks of blocks ``0 .. nblocks-1``; a layout says where each block
lives in a buffer.  :meth:`Layout.even` splits ``count`` elements into blocks whose
sizes differ by at most one (the first ``count % nblocks`` blocks get one more);
:meth:`Layout.v` takes MPI-style counts and displacements.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Layout", "contiguous"]


class Layout:
    """Element ranges of the blocks of one buffer."""

    __slots__ = ("starts", "ends")

    def __init__(self, starts: Sequence[int], ends: Sequence[int]):
        self.starts = tuple(int(s) for s in starts)
        self.ends = tuple(int(e) for e in ends)

    @classmethod
    def even(cls, count: int, nblocks: int, unit: int = 1) -> Layout:
        """``count`` elements in ``nblocks`` nearly equal blocks, in order.

        Block boundaries fall on multiples of ``unit`` elements, so that an
        element of a contiguous MPI datatype (``unit`` NumPy elements) is never
        split between blocks.
        """
        units = count // unit
        base, extra = divmod(units, nblocks) if nblocks else (0, 0)
        starts = [(b * base + min(b, extra)) * unit for b in range(nblocks)]
        ends = starts[1:] + [count]
        return cls(starts, ends)

    @classmethod
    def v(cls, counts: Sequence[int], displs: Sequence[int]) -> Layout:
        """Block ``i`` holds ``counts[i]`` elements from ``displs[i]``."""
        return cls(displs, [d + c for d, c in zip(displs, counts)])

    @classmethod
    def only(cls, block: int, count: int, nblocks: int) -> Layout:
        """A buffer of ``count`` elements that is block ``block`` of ``nblocks``; the others are empty.

        The empty blocks sit at the buffer's ends (before ``block`` at 0, after it at
        ``count``), so any block range that contains ``block`` is contiguous.
        """
        starts = [0 if b <= block else count for b in range(nblocks)]
        ends = [0 if b < block else count for b in range(nblocks)]
        return cls(starts, ends)

    @property
    def nblocks(self) -> int:
        return len(self.starts)

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """Element range ``[start, stop)`` of blocks ``lo .. hi-1`` (contiguous)."""
        if hi <= lo:
            return 0, 0
        return self.starts[lo], self.ends[hi - 1]

    def count(self, lo: int, hi: int) -> int:
        start, stop = self.span(lo, hi)
        return stop - start

    def __repr__(self) -> str:
        return f"Layout(starts={self.starts}, ends={self.ends})"


def contiguous(counts: Sequence[int]) -> Layout:
    """Blocks of ``counts`` elements, one after the other from element 0."""
    displs, end = [], 0
    for c in counts:
        displs.append(end)
        end += int(c)
    return Layout.v([int(c) for c in counts], displs)
