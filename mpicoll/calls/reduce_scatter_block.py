"""Reduce_scatter_block: reduce p equal blocks over all ranks; rank i gets block i.

"auto" picks (a rule table; the cost model calibrates it later):

=========================================  =================
condition (n = bytes of one rank's input)  algorithm
=========================================  =================
the op is not commutative                  pairwise
p a power of two, or n < 64 KiB            recursive_halving
otherwise                                  ring
=========================================  =================

``sendbuf`` ``IN_PLACE`` (or None): ``recvbuf`` holds the whole input (p
blocks); the result goes to its first block.  The algorithm then reduces into
scratch and the result is copied to the start of ``recvbuf`` once all messages
are done, so no input is overwritten before it was sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_pair
from mpicoll.calls._nonrooted import contiguous, copy_result_to
from mpicoll.data.buffers import is_in_place, parse, parse_blocks
from mpicoll.data.ops import check_op, is_commutative, op_name
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def bind_reduce_scatter(comm: Preparation, collective: str, name: str, params: dict, send_array: Any,
                        counts: list[int], recv_array: Any, op: Any, dtype: np.dtype, datatype: Any,
                        xp: Any, in_place: bool) -> Plan:
    """The plan of a reduce-scatter: ``send_array`` in blocks of ``counts``; rank r's block into ``recv_array``.

    In place, the result is computed into a scratch block and copied to
    ``recv_array`` (the start of the input) at the end.
    """
    r = comm.rank
    send_layout = contiguous(counts)
    result = xp.empty(counts[r], dtype) if in_place else recv_array
    layouts = {"send": send_layout, "recv": Layout.only(r, counts[r], comm.size)}
    plan = make_plan(comm, collective, name, params, {"send": send_array, "recv": result}, lambda nb: layouts,
                     op=op, dtype=dtype, datatype=datatype)
    if in_place:
        copy_result_to(plan, result, recv_array, [(0, counts[r])])
    return plan


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, op: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Reduce_scatter_block`` call and bind its schedule; None when the count is 0."""
    p = comm.size
    in_place = is_in_place(sendbuf)
    if in_place:
        recv = parse_blocks(recvbuf, "recvbuf", p, writable=True)
        count = recv.count // p
        send_array = recv.array
    else:
        recv = parse(recvbuf, "recvbuf", writable=True)
        send = parse_blocks(sendbuf, "sendbuf", p)
        check_pair(recv, send)
        count = recv.count
        if send.count != count * p:
            raise errors.CountError(f"sendbuf: Reduce_scatter_block needs {p} blocks of recvbuf's count {count}, "
                             f"that is {count * p} elements; got {send.count}")
        send_array = send.array
    check_op(op, recv.dtype)
    name, params = selection.choose("reduce_scatter_block", algorithm, size=p, nbytes=count * p * recv.dtype.itemsize,
                                    count=count * p, commutative=is_commutative(op), agreed=comm.agreed)
    debug_check(comm, "Reduce_scatter_block", count=count, dtype=recv.dtype, op=op_name(op), algorithm=name)
    if count == 0:
        return None
    return bind_reduce_scatter(comm, "reduce_scatter_block", name, params, send_array, [count] * p,
                               recv.array, op, recv.dtype, recv.datatype, recv.xp, in_place)
