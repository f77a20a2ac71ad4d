"""Alltoall: rank i's block j goes to rank j's block i.

"auto" picks (a rule table; the cost model calibrates it later):

==================================  ==================
condition (b = bytes of one block)  algorithm
==================================  ==================
p >= 8 and b <= 256 bytes           bruck
p <= 4                              linear (one round)
otherwise                           pairwise
==================================  ==================

``sendbuf`` ``IN_PLACE`` (or None): ``recvbuf`` holds the data to send and is
replaced by the data received.  The algorithm then receives into scratch and
the result is copied into ``recvbuf`` once all messages are done, so no block
is overwritten before it was sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_pair
from mpicoll.calls._nonrooted import copy_result_to
from mpicoll.data.buffers import is_in_place, parse_blocks
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def bind_alltoall(comm: Preparation, collective: str, name: str, params: dict, send_array: Any, send_layout: Layout,
                  recv_array: Any, recv_layout: Layout, dtype: np.dtype, xp: Any, in_place: bool) -> Plan:
    """The plan of an all-to-all; in place, the result goes to scratch and is copied block by block at the end."""
    size = max(recv_layout.ends, default=0)
    result = xp.empty(size, dtype) if in_place else recv_array
    layouts = {"send": send_layout, "recv": recv_layout}
    plan = make_plan(comm, collective, name, params, {"send": send_array, "recv": result}, lambda nb: layouts,
                     dtype=dtype)
    if in_place:
        copy_result_to(plan, result, recv_array, [recv_layout.span(b, b + 1) for b in range(comm.size)])
    return plan


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Alltoall`` call and bind its schedule; None when the count is 0."""
    p = comm.size
    recv = parse_blocks(recvbuf, "recvbuf", p, writable=True)
    count = recv.count // p
    in_place = is_in_place(sendbuf)
    send_array = recv.array
    if not in_place:
        send = parse_blocks(sendbuf, "sendbuf", p)
        check_pair(recv, send)
        if send.count != recv.count:
            raise errors.CountError(f"recvbuf: Alltoall needs blocks of sendbuf's {send.count // p} elements, "
                             f"got {count}")
        send_array = send.array
    name, params = selection.choose("alltoall", algorithm, size=p, nbytes=recv.nbytes, count=recv.count,
                                    agreed=comm.agreed)
    debug_check(comm, "Alltoall", count=count, dtype=recv.dtype, algorithm=name)
    if count == 0:
        return None
    layout = Layout.v([count] * p, [b * count for b in range(p)])
    return bind_alltoall(comm, "alltoall", name, params, send_array, layout, recv.array, layout, recv.dtype,
                         recv.xp, in_place)
