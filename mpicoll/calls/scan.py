"""Scan: inclusive prefix reduction; rank i gets ranks 0..i reduced, in rank order.

"auto" picks:

=========  ==================
condition  algorithm
=========  ==================
p <= 2     linear (a chain)
otherwise  recursive_doubling
=========  ==================

Both algorithms keep rank order, so any op, commutative or not, may be used.
``sendbuf`` ``IN_PLACE`` (or None): the input is in ``recvbuf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_pair
from mpicoll.data.buffers import Buffer, is_in_place, parse
from mpicoll.data.ops import check_op, is_commutative, op_name
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare_prefix(comm: Preparation, collective: str, method: str, sendbuf: Any, recvbuf: Any, op: Any,
                   algorithm: str | None) -> Plan | None:
    """Scan and Exscan: check the call and bind the schedule; None when the count is 0."""
    recv = parse(recvbuf, "recvbuf", writable=True)
    send: Buffer | None = None
    if not is_in_place(sendbuf):
        send = parse(sendbuf, "sendbuf")
        if send.count != recv.count:
            raise errors.CountError(f"recvbuf: {method} needs as many elements as sendbuf ({send.count}), "
                                    f"got {recv.count}")
        check_pair(recv, send)
    check_op(op, recv.dtype)
    name, params = selection.choose(collective, algorithm, size=comm.size, nbytes=recv.nbytes,
                                    count=recv.count, commutative=is_commutative(op), agreed=comm.agreed)
    debug_check(comm, method, count=recv.count, dtype=recv.dtype, op=op_name(op), algorithm=name)
    if recv.count == 0:
        return None
    arrays = {"send": recv.array if send is None else send.array, "recv": recv.array}
    return make_plan(comm, collective, name, params, arrays, lambda nb: {"recv": Layout.v([recv.count], [0])},
                     op=op, dtype=recv.dtype, datatype=recv.datatype)


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, op: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Scan`` call and bind its schedule; None when the count is 0."""
    return prepare_prefix(comm, "scan", "Scan", sendbuf, recvbuf, op, algorithm)
