"""Reduce_scatter: reduce the input over all ranks; rank i gets ``recvcounts[i]`` elements.

The input (``sum(recvcounts)`` elements) is cut into blocks of ``recvcounts``
in rank order; zeros are allowed.  ``recvcounts=None`` takes each rank's count
from its ``recvbuf`` (the counts are then exchanged, as mpi4py does).

"auto" picks:

====================================  =========
condition                             algorithm
====================================  =========
the op is not commutative, or p <= 2  pairwise
otherwise                             ring
====================================  =========

``sendbuf`` ``IN_PLACE`` (or None): ``recvbuf`` holds the whole input; the
result goes to its start (copied there from scratch once all messages are done).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import MismatchError, debug_check
from mpicoll.calls import reduce_scatter_block as _rsb
from mpicoll.calls._checks import check_pair, counts_of
from mpicoll.data.buffers import is_in_place, parse
from mpicoll.data.ops import check_op, is_commutative, op_name
from mpicoll.program.plan import Plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def exchange(private: Any, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any) -> tuple:
    """The call's arguments with ``recvcounts=None`` replaced by every rank's ``recvbuf`` count.

    Part of the collective's own traffic (mpi4py does the same): one allgather on
    ``private``, made by every rank before any argument check, so a rank whose
    ``recvbuf`` is bad still takes part, and every rank then raises.
    """
    if recvcounts is not None:
        return sendbuf, recvbuf, recvcounts, op
    mine: int | None = None
    error: Exception | None = None
    try:
        if is_in_place(sendbuf):
            raise errors.CountTypeError("recvcounts: Reduce_scatter with sendbuf IN_PLACE needs explicit recvcounts")
        recv = parse(recvbuf, "recvbuf", writable=True)
        mine = recv.count // recv.unit
    except Exception as exc:  # tell the others before raising, so nobody waits forever
        error = exc
    everyone = private.allgather(mine)
    if error is not None:
        raise error
    bad = [r for r, c in enumerate(everyone) if c is None]
    if bad:
        raise MismatchError(f"Reduce_scatter: ranks {bad} passed bad arguments (recvcounts=None)")
    return sendbuf, recvbuf, everyone, op


#: recvcounts (argument 2) are counts: part of the plan cache's key by value
VALUE_ARGS = (2,)


def cacheable(sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any) -> bool:
    """A call may reuse a cached plan only if its counts are given (recvcounts=None needs :func:`exchange`)."""
    return recvcounts is not None


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any, *,
            algorithm: str | None) -> Plan | None:
    """Check a ``Reduce_scatter`` call and bind its schedule; None when every count is 0."""
    p, r = comm.size, comm.rank
    in_place = is_in_place(sendbuf)
    recv = parse(recvbuf, "recvbuf", writable=True)
    counts = [c * recv.unit for c in counts_of(recvcounts, p)]   # recvcounts=None: see exchange()
    total = sum(counts)
    if in_place:
        if recv.count < total:
            raise errors.CountError(f"recvbuf: with sendbuf IN_PLACE it holds the input, sum(recvcounts) = "
                             f"{total // recv.unit} elements; it has {recv.count // recv.unit}")
        send_array = recv.array[:total]
    else:
        send = parse(sendbuf, "sendbuf")
        check_pair(recv, send)
        if send.count != total:
            raise errors.CountError(f"sendbuf: Reduce_scatter needs sum(recvcounts) = {total // recv.unit} elements, "
                             f"got {send.count // send.unit}")
        if recv.count != counts[r]:
            raise errors.CountError(f"recvbuf: recvcounts[{r}] is {counts[r] // recv.unit}, but recvbuf holds "
                             f"{recv.count // recv.unit} elements")
        send_array = send.array
    check_op(op, recv.dtype)
    name, params = selection.choose("reduce_scatter", algorithm, size=p, nbytes=total * recv.dtype.itemsize,
                                    count=total, commutative=is_commutative(op), agreed=comm.agreed)
    debug_check(comm, "Reduce_scatter", counts=tuple(counts), dtype=recv.dtype, op=op_name(op), algorithm=name)
    if total == 0:
        return None
    return _rsb.bind_reduce_scatter(comm, "reduce_scatter", name, params, send_array, counts, recv.array, op,
                                    recv.dtype, recv.datatype, recv.xp, in_place)
