"""Allreduce: every rank gets the reduction of every rank's send buffer.

"auto" picks (a rule table; the cost model calibrates it later):

==========================================================================  ==================
condition                                                                   algorithm
==========================================================================  ==================
p = 1, or fewer than 16 KiB (p = 2: 512 KiB), or fewer elements than ranks  recursive_doubling
p a power of two, or the op is not commutative                              rabenseifner
p >= 64 and less than 4 MiB                                                 double_binary_tree
otherwise                                                                   ring
==========================================================================  ==================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_count, check_pair
from mpicoll.data.buffers import Buffer, is_in_place, parse
from mpicoll.data.ops import check_op, is_commutative, op_name
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, op: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Allreduce`` call and bind its schedule; None when the count is 0."""
    recv = parse(recvbuf, "recvbuf", writable=True)
    send: Buffer | None = None
    if not is_in_place(sendbuf):
        send = parse(sendbuf, "sendbuf")
        check_count(recv.count, send.count, f"recvbuf: Allreduce needs as many elements as sendbuf "
                    f"({send.count}), got {recv.count}")
        check_pair(recv, send)
    check_op(op, recv.dtype)
    name, params = selection.choose("allreduce", algorithm, size=comm.size, nbytes=recv.nbytes,
                                    count=recv.count, commutative=is_commutative(op), nodes=comm.nodes,
                                    agreed=comm.agreed)
    debug_check(comm, "Allreduce", count=recv.count, dtype=recv.dtype, op=op_name(op), algorithm=name)
    if recv.count == 0:
        return None
    arrays = {"send": recv.array if send is None else send.array, "recv": recv.array}
    return make_plan(comm, "allreduce", name, params, arrays,
                     lambda nb: {"recv": Layout.even(recv.count, nb, recv.unit)},
                     op=op, dtype=recv.dtype, datatype=recv.datatype)
