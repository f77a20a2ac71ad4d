"""Alltoallv: rank i's block j goes to rank j's block i; blocks may differ in size.

Both buffers are v-variant specs (``[buf, counts]``, ``[buf, (counts, displs)]``,
``[buf, counts, displs, datatype]``, or a plain buffer split evenly); rank i's
``sendcounts[j]`` must equal rank j's ``recvcounts[i]``.  Nothing outside the
receive blocks is written.

"auto" picks:

=========  ==================
condition  algorithm
=========  ==================
p <= 4     linear (one round)
otherwise  pairwise
=========  ==================

``sendbuf`` ``IN_PLACE`` (or None): ``recvbuf``'s blocks are sent and then
replaced (through scratch, as for Alltoall).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import alltoall as _alltoall
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_disjoint, check_pair
from mpicoll.data.buffers import is_in_place, parse_v
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Alltoallv`` call and bind its schedule (zero-size messages included)."""
    p = comm.size
    recv = parse_v(recvbuf, "recvbuf", p, writable=True)
    check_disjoint(recv, "recvbuf")
    recv_layout = Layout.v(recv.counts, recv.displs)
    in_place = is_in_place(sendbuf)
    send_array, send_layout = recv.array, recv_layout
    if not in_place:
        send = parse_v(sendbuf, "sendbuf", p)
        check_pair(recv, send)
        send_array, send_layout = send.array, Layout.v(send.counts, send.displs)
    name, params = selection.choose("alltoallv", algorithm, size=p, nbytes=recv.nbytes, count=sum(recv.counts),
                                    agreed=comm.agreed)
    debug_check(comm, "Alltoallv", dtype=recv.dtype, algorithm=name)
    # never skip a call: only all ranks together know whether nothing moves at all
    return _alltoall.bind_alltoall(comm, "alltoallv", name, params, send_array, send_layout, recv.array,
                                   recv_layout, recv.dtype, recv.xp, in_place)
