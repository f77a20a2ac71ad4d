"""Reduce: the root gets the reduction of every rank's send buffer.

Every reduce algorithm keeps rank order, for any root, so non-commutative ops
may use them all.  "auto" picks (a rule table, not yet calibrated):

==========================================================  ============
condition                                                   algorithm
==========================================================  ============
p <= 2, or fewer than 16 KiB, or fewer elements than ranks  binomial
otherwise                                                   rabenseifner
==========================================================  ============
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_count, check_pair, check_root, send_or_in_place
from mpicoll.data.buffers import parse
from mpicoll.data.ops import check_op, is_commutative, op_name
from mpicoll.families import registry
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, op: Any, root: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Reduce`` call and bind its schedule; None when the count is 0.

    ``recvbuf`` matters at the root only (elsewhere it may be None and is never
    touched); ``sendbuf`` may be ``MPI.IN_PLACE`` or None at the root only.
    """
    root = check_root(root, comm.size, "Reduce")
    is_root = comm.rank == root
    send = send_or_in_place(sendbuf, comm.rank, root, "Reduce")
    recv = parse(recvbuf, "recvbuf", writable=True) if is_root else None
    if send is not None and recv is not None:
        check_count(recv.count, send.count, f"recvbuf: Reduce needs as many elements as sendbuf ({send.count}), "
                    f"got {recv.count}")
        check_pair(recv, send, "recvbuf", "sendbuf")
    data = recv if send is None else send
    assert data is not None
    check_op(op, data.dtype)
    name, params = selection.choose("reduce", algorithm, size=comm.size, nbytes=data.nbytes, count=data.count,
                                    commutative=is_commutative(op), nodes=comm.nodes, agreed=comm.agreed)
    params["root"] = root
    debug_check(comm, "Reduce", count=data.count, dtype=data.dtype, op=op_name(op), root=root, algorithm=name)
    if data.count == 0:
        return None
    if recv is not None:
        arrays = {"send": recv.array if send is None else send.array, "recv": recv.array}
    else:
        arrays = {"send": data.array}
        if "recv" in registry.schedule("reduce", name, comm.rank, comm.size, **params).buffers():
            arrays["recv"] = data.xp.empty(data.count, data.dtype)  # scratch: a non-root has no recvbuf
    return make_plan(comm, "reduce", name, params, arrays,
                     lambda nb: {"recv": Layout.even(data.count, nb, data.unit)},
                     op=op, dtype=data.dtype, datatype=data.datatype)
