"""Allgather: every rank gets every rank's block, in rank order.

"auto" picks (a rule table; the cost model calibrates it later):

=====================================  ==================
condition (n = bytes received in all)  algorithm
=====================================  ==================
n < 64 KiB                             bruck
p a power of two and n < 1 MiB         recursive_doubling
otherwise                              ring
=====================================  ==================

``sendbuf`` ``IN_PLACE`` (or None): the rank's block is already in ``recvbuf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_pair
from mpicoll.data.buffers import is_in_place, parse, parse_blocks
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Allgather`` call and bind its schedule; None when there is nothing to move."""
    p, r = comm.size, comm.rank
    recv = parse_blocks(recvbuf, "recvbuf", p, writable=True)
    count = recv.count // p
    layout = Layout.v([count] * p, [b * count for b in range(p)])
    if is_in_place(sendbuf):
        send_array, send_layout = recv.array, layout
    else:
        send = parse(sendbuf, "sendbuf")
        check_pair(recv, send)
        if send.count != count:
            raise errors.CountError(f"recvbuf: Allgather needs {send.count} elements per rank (sendbuf's count), "
                             f"got blocks of {count}")
        send_array, send_layout = send.array, Layout.only(r, count, p)
    name, params = selection.choose("allgather", algorithm, size=p, nbytes=recv.nbytes, count=recv.count,
                                    nodes=comm.nodes, agreed=comm.agreed)
    debug_check(comm, "Allgather", count=count, dtype=recv.dtype, algorithm=name)
    if count == 0:
        return None
    return make_plan(comm, "allgather", name, params, {"send": send_array, "recv": recv.array},
                     lambda nb: {"recv": layout, "send": send_layout}, dtype=recv.dtype)
