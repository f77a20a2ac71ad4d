"""Gather: the root receives every rank's block, in rank order.

"auto" picks (a rule table, not yet calibrated): binomial when p > 2 and the
gathered total is under 256 KiB (lg p steps instead of p - 1 messages at the
root), linear otherwise (every byte moves once).

========================================  =========
condition                                 algorithm
========================================  =========
p > 2 and p x count x itemsize < 256 KiB  binomial
otherwise                                 linear
========================================  =========
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_pair, check_root, send_or_in_place
from mpicoll.calls._rooted import subtree_layout
from mpicoll.data.buffers import Buffer, parse_blocks
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def gather_plan(comm: Preparation, collective: str, name: str, params: dict, root: int, send: Buffer | None,
                recv: Any, recv_layout: Layout | None) -> Plan:
    """Bind a gather-like schedule: ``send`` is None in place; ``recv``/``recv_layout`` at the root only."""
    p, rank = comm.size, comm.rank
    data = recv if send is None else send
    if rank == root:
        arrays = {"recv": recv.array, "send": recv.array if send is None else send.array}
        layouts = {"recv": recv_layout, "send": recv_layout if send is None else Layout.only(rank, send.count, p)}
    else:   # the binomial algorithm's scratch "subtree" (declared like="own") holds only this rank's subtree
        arrays = {"send": send.array}
        layouts = {"recv": Layout.only(rank, send.count, p), "send": Layout.only(rank, send.count, p),
                   "subtree": subtree_layout(rank, p, root, send.count)}
    return make_plan(comm, collective, name, params, arrays, lambda nb: layouts, dtype=data.dtype)


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, root: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Gather`` call and bind its schedule; None when the count is 0.

    At the root ``recvbuf`` holds p blocks (an explicit count is per block, as
    in mpi4py) and ``sendbuf`` may be ``MPI.IN_PLACE`` or None; elsewhere
    ``recvbuf`` is ignored (None is fine).
    """
    root = check_root(root, comm.size, "Gather")
    p, rank = comm.size, comm.rank
    send = send_or_in_place(sendbuf, rank, root, "Gather")
    recv = None
    if rank == root:
        recv = parse_blocks(recvbuf, "recvbuf", p, writable=True)
        per = recv.count // p
        if send is not None:
            if send.count != per:
                raise errors.CountError(f"sendbuf: Gather's root receives {per} elements from each rank "
                                 f"(recvbuf), but its sendbuf has {send.count}")
            check_pair(send, recv, "sendbuf", "recvbuf")
    else:
        per = send.count
    data = recv if recv is not None else send
    name, params = selection.choose("gather", algorithm, size=p, nbytes=p * per * data.dtype.itemsize, count=p * per,
                                    agreed=comm.agreed)
    params["root"] = root
    debug_check(comm, "Gather", count=per, dtype=data.dtype, root=root, algorithm=name)
    if per == 0:
        return None
    return gather_plan(comm, "gather", name, params, root, send, recv,
                       Layout.even(recv.count, p, recv.unit) if recv is not None else None)
