"""Gatherv: the root receives rank i's block into ``counts[i]`` elements at ``displs[i]``.

Only the linear algorithm exists: every rank sends its block straight to the
root, which receives all of them at once ("auto" = linear).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_disjoint, check_pair, check_root, send_or_in_place
from mpicoll.calls.gather import gather_plan
from mpicoll.data.buffers import parse_v
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, root: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Gatherv`` call and bind its schedule.

    At the root ``recvbuf`` is any mpi4py v-variant form (``buf``,
    ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, counts, displs,
    datatype]``) and ``sendbuf`` may be ``MPI.IN_PLACE`` or None; elsewhere
    ``recvbuf`` is ignored.
    """
    root = check_root(root, comm.size, "Gatherv")
    p, rank = comm.size, comm.rank
    send = send_or_in_place(sendbuf, rank, root, "Gatherv")
    recv = layout = None
    if rank == root:
        recv = parse_v(recvbuf, "recvbuf", p, writable=True)
        check_disjoint(recv, "recvbuf")
        if send is not None:
            if send.count != recv.counts[root]:
                raise errors.CountError(f"sendbuf: the root's sendbuf has {send.count} elements, but recvbuf's "
                                 f"counts[{root}] is {recv.counts[root]}")
            check_pair(send, recv, "sendbuf", "recvbuf")
        layout = Layout.v(recv.counts, recv.displs)
    name, params = selection.choose("gatherv", algorithm, size=p, nbytes=0, count=0, agreed=comm.agreed)
    params["root"] = root
    dtype = (recv if recv is not None else send).dtype
    debug_check(comm, "Gatherv", dtype=dtype, root=root, algorithm=name)
    # never skipped: a non-root with 0 elements cannot know whether others have some
    return gather_plan(comm, "gatherv", name, params, root, send, recv, layout)
