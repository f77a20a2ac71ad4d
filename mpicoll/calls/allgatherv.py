"""Allgatherv: every rank gets every rank's block; blocks may differ in size.

``recvbuf`` is a v-variant spec (``[buf, counts]``, ``[buf, (counts, displs)]``,
``[buf, counts, displs, datatype]`` or a plain buffer split evenly); block j
receives rank j's ``recvcounts[j]`` elements at ``displs[j]``, and nothing
outside the blocks is written.

"auto" picks:

=========  ==================
condition  algorithm
=========  ==================
p <= 4     linear (one round)
otherwise  ring
=========  ==================

``sendbuf`` ``IN_PLACE`` (or None): the rank's block is already in ``recvbuf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_disjoint, check_pair
from mpicoll.data.buffers import is_in_place, parse, parse_v
from mpicoll.families import registry
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import OUT, Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Allgatherv`` call and bind its schedule; None when every count is 0."""
    p, r = comm.size, comm.rank
    recv = parse_v(recvbuf, "recvbuf", p, writable=True)
    check_disjoint(recv, "recvbuf")
    layout = Layout.v(recv.counts, recv.displs)
    if is_in_place(sendbuf):
        send_array, send_layout = recv.array, layout
    else:
        send = parse(sendbuf, "sendbuf")
        check_pair(recv, send)
        if send.count != recv.counts[r]:
            raise errors.CountError(f"recvbuf: counts[{r}] is {recv.counts[r] // recv.unit}, but this rank "
                             f"sends {send.count // send.unit} elements")
        send_array, send_layout = send.array, Layout.only(r, send.count, p)
    name, params = selection.choose("allgatherv", algorithm, size=p, nbytes=recv.nbytes, count=sum(recv.counts),
                                    nodes=comm.nodes, agreed=comm.agreed)
    debug_check(comm, "Allgatherv", counts=recv.counts, dtype=recv.dtype, algorithm=name)
    if sum(recv.counts) == 0:
        return None
    packed = Layout.v(list(recv.counts), [sum(recv.counts[:i]) for i in range(p)])
    if registry.moves_ranges("allgatherv", name, r, p, **params) and (layout.starts, layout.ends) != \
            (packed.starts, packed.ends):
        return _gathered_in_scratch(comm, name, params, recv, send_array, send_layout, packed)
    return make_plan(comm, "allgatherv", name, params, {"send": send_array, "recv": recv.array},
                     lambda nb: {"recv": layout, "send": send_layout}, dtype=recv.dtype)


def _gathered_in_scratch(comm: Preparation, name: str, params: dict, recv: Any, send_array: Any, send_layout: Layout,
                         packed: Layout) -> Plan:
    """An algorithm that moves runs of consecutive blocks in one message needs them one after the other in
    rank order: it gathers into a packed scratch buffer, then each block is copied to its displacement."""
    gathered = recv.xp.empty(sum(recv.counts), recv.dtype)
    plan = make_plan(comm, "allgatherv", name, params, {"send": send_array, "recv": gathered},
                     lambda nb: {"recv": packed, "send": send_layout}, dtype=recv.dtype)
    pieces, arrays = list(zip(recv.displs, packed.starts, recv.counts)), plan.arrays
    arrays[OUT] = recv.array   # named, so that a cached plan views it by address (Plan.detach)

    def finish() -> None:
        out = arrays[OUT]
        for displ, start, count in pieces:
            out[displ:displ + count] = gathered[start:start + count]

    plan.finish, plan.finish_by_name = finish, plan.device is None
    return plan
