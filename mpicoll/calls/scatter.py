"""Scatter: rank i receives block i of the root's send buffer.

"auto" picks (a rule table, not yet calibrated): binomial when p > 2 and the
scattered total is under 256 KiB, linear otherwise.

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
from mpicoll.calls._checks import check_pair, check_root, recv_or_in_place
from mpicoll.calls._rooted import subtree_layout
from mpicoll.data.buffers import Buffer, parse_blocks
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def scatter_plan(comm: Preparation, collective: str, name: str, params: dict, root: int, send: Any,
                 send_layout: Layout | None, recv: Buffer | None) -> Plan:
    """Bind a scatter-like schedule: ``send``/``send_layout`` at the root only; ``recv`` None in place."""
    p, rank = comm.size, comm.rank
    data = send if recv is None else recv
    if rank == root:
        arrays = {"send": send.array, "recv": send.array if recv is None else recv.array}
        layouts = {"send": send_layout, "recv": send_layout if recv is None else Layout.only(rank, recv.count, p)}
    else:   # the binomial algorithm's scratch "subtree" (declared like="own") holds only this rank's subtree
        arrays = {"recv": recv.array}
        layouts = {"recv": Layout.only(rank, recv.count, p), "subtree": subtree_layout(rank, p, root, recv.count)}
    return make_plan(comm, collective, name, params, arrays, lambda nb: layouts, dtype=data.dtype)


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, root: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Scatter`` call and bind its schedule; None when the count is 0.

    At the root ``sendbuf`` holds p blocks (an explicit count is per block, as
    in mpi4py) and ``recvbuf`` may be ``MPI.IN_PLACE`` or None; elsewhere
    ``sendbuf`` is ignored (None is fine).
    """
    root = check_root(root, comm.size, "Scatter")
    p, rank = comm.size, comm.rank
    recv = recv_or_in_place(recvbuf, rank, root, "Scatter")
    send = None
    if rank == root:
        send = parse_blocks(sendbuf, "sendbuf", p)
        per = send.count // p
        if recv is not None:
            if recv.count != per:
                raise errors.CountError(f"recvbuf: Scatter's root sends {per} elements to each rank (sendbuf), "
                                 f"but its recvbuf has {recv.count}")
            check_pair(recv, send, "recvbuf", "sendbuf")
    else:
        per = recv.count
    data = send if send is not None else recv
    name, params = selection.choose("scatter", algorithm, size=p, nbytes=p * per * data.dtype.itemsize,
                                    count=p * per, agreed=comm.agreed)
    params["root"] = root
    debug_check(comm, "Scatter", count=per, dtype=data.dtype, root=root, algorithm=name)
    if per == 0:
        return None
    return scatter_plan(comm, "scatter", name, params, root, send,
                        Layout.even(send.count, p, send.unit) if send is not None else None, recv)
