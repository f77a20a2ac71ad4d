"""The argument checks every collective shares, in one place, raising MPI-style errors.

Each check runs before any message and raises an exception that names the
argument, and is both the Python type mpicoll always raised (``ValueError`` or
``TypeError``) and an ``MPI.Exception`` with the matching error class (see
:mod:`mpicoll.errors`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicoll import errors
from mpicoll.data.buffers import Buffer, VBuffer, as_count, is_in_place, parse

__all__ = ["check_root", "check_pair", "check_count", "check_disjoint", "send_or_in_place", "recv_or_in_place",
           "counts_of"]


def check_root(root: Any, size: int, method: str) -> int:
    """``root`` as an int in 0 .. size-1 (``MPI.ERR_ROOT`` otherwise)."""
    if type(root) is int and 0 <= root < size:   # the common case, accepted at once
        return root
    try:
        value = as_count(root, "root")
    except (TypeError, ValueError):
        value = -1
    if not isinstance(root, (int, np.integer)) or isinstance(root, bool) or not 0 <= value < size:
        raise errors.RootError(f"root: {method} needs a root rank in 0 .. {size - 1} (the communicator has "
                               f"{size} rank{'s' if size > 1 else ''}), got {root!r}")
    return value


def check_pair(a: Buffer | VBuffer, b: Buffer | VBuffer, what: str = "recvbuf", other: str = "sendbuf") -> None:
    """``a`` and ``b`` hold the same element type in the same kind of memory (``MPI.ERR_TYPE``)."""
    if a.dtype != b.dtype or a.unit != b.unit:
        raise errors.TypeMismatchError(f"{what}: dtype {a.dtype} differs from {other}'s {b.dtype}")
    if a.xp is not b.xp:
        raise errors.TypeMismatchError(f"{what} and {other} must both be host arrays or both device arrays")


def check_count(have: int, need: int, message: str) -> None:
    """A receive side of ``have`` elements where ``need`` arrive: too few is ``MPI.ERR_TRUNCATE``, too many
    ``MPI.ERR_COUNT`` (mpicoll asks for exact counts: the extra elements would silently stay unwritten)."""
    if have < need:
        raise errors.TruncateError(message)
    if have != need:
        raise errors.CountError(message)


def check_disjoint(buf: VBuffer, what: str) -> None:
    """Receive blocks must not overlap (MPI: erroneous; the result would depend on the algorithm)."""
    spans = sorted((d, d + c, i) for i, (c, d) in enumerate(zip(buf.counts, buf.displs)) if c)
    for (_, end, i), (start, _, j) in zip(spans, spans[1:]):
        if start < end:
            raise errors.BufferValueError(f"{what}: blocks {i} and {j} overlap; every rank's block needs its "
                                          "own elements")


def send_or_in_place(sendbuf: Any, rank: int, root: int, method: str) -> Buffer | None:
    """The send buffer, or None for ``MPI.IN_PLACE``/None, which only the root may pass (``MPI.ERR_BUFFER``)."""
    if not is_in_place(sendbuf):
        return parse(sendbuf, "sendbuf")
    if rank != root:
        raise errors.BufferValueError(f"sendbuf: only the root ({root}) may pass MPI.IN_PLACE or None to "
                                      f"{method}; rank {rank} must pass its data")
    return None


def recv_or_in_place(recvbuf: Any, rank: int, root: int, method: str) -> Buffer | None:
    """The receive buffer, or None for ``MPI.IN_PLACE``/None, which only the root may pass."""
    if not is_in_place(recvbuf):
        return parse(recvbuf, "recvbuf", writable=True)
    if rank != root:
        raise errors.BufferValueError(f"recvbuf: only the root ({root}) may pass MPI.IN_PLACE or None to "
                                      f"{method}; rank {rank} must pass a buffer")
    return None


def counts_of(recvcounts: Any, size: int, what: str = "recvcounts") -> list[int]:
    """A sequence of ``size`` non-negative integer counts."""
    if recvcounts is None or np.ndim(recvcounts) != 1:
        raise errors.CountTypeError(f"{what} must be a sequence of {size} integers (one per rank), "
                                    f"got {recvcounts!r}")
    counts = [as_count(c, f"{what}[{i}]") for i, c in enumerate(recvcounts)]
    if len(counts) != size:
        raise errors.CountError(f"{what}: expected {size} counts (one per rank), got {len(counts)}")
    return counts
