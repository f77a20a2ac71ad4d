"""Scatterv: rank i receives ``counts[i]`` elements from ``displs[i]`` of the root's send buffer.

Only the linear algorithm exists: the root sends every block straight to its
rank, all at once ("auto" = linear).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_pair, check_root, recv_or_in_place
from mpicoll.calls.scatter import scatter_plan
from mpicoll.data.buffers import parse_v
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, root: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Scatterv`` call and bind its schedule.

    At the root ``sendbuf`` is any mpi4py v-variant form and ``recvbuf`` may be
    ``MPI.IN_PLACE`` or None; elsewhere ``sendbuf`` is ignored.
    """
    root = check_root(root, comm.size, "Scatterv")
    p, rank = comm.size, comm.rank
    recv = recv_or_in_place(recvbuf, rank, root, "Scatterv")
    send = layout = None
    if rank == root:
        send = parse_v(sendbuf, "sendbuf", p)
        if recv is not None:
            if recv.count != send.counts[root]:
                raise errors.CountError(f"recvbuf: the root's recvbuf has {recv.count} elements, but sendbuf's "
                                 f"counts[{root}] is {send.counts[root]}")
            check_pair(recv, send, "recvbuf", "sendbuf")
        layout = Layout.v(send.counts, send.displs)
    name, params = selection.choose("scatterv", algorithm, size=p, nbytes=0, count=0, agreed=comm.agreed)
    params["root"] = root
    dtype = (send if send is not None else recv).dtype
    debug_check(comm, "Scatterv", dtype=dtype, root=root, algorithm=name)
    # never skipped: a rank receiving 0 elements cannot know whether others get some
    return scatter_plan(comm, "scatterv", name, params, root, send, layout, recv)
