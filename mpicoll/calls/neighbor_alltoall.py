"""Neighbor_alltoall: block k of sendbuf goes to destinations[k], block k of recvbuf comes from sources[k]
(:mod:`mpicoll.families.neighbor`, one round).  Blocks from ``MPI.PROC_NULL`` neighbours stay untouched."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import _neighbors
from mpicoll.calls._checks import check_count, check_pair
from mpicoll.data.buffers import parse_blocks
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Neighbor_alltoall`` call and bind its schedule."""
    topology, indegree, outdegree = _neighbors.opening(comm, sendbuf, "Neighbor_alltoall")
    send = parse_blocks(sendbuf, "sendbuf", outdegree)
    recv = parse_blocks(recvbuf, "recvbuf", indegree, writable=True)
    check_pair(recv, send)
    count = send.count // outdegree if outdegree else 0
    if not outdegree:   # no block to learn the size from: recvbuf's own
        count = recv.count // indegree if indegree else 0
    check_count(recv.count, count * indegree, f"recvbuf: Neighbor_alltoall needs {indegree} blocks of sendbuf's "
                                              f"{count} elements, got {recv.count} elements")
    return _neighbors.bind(comm, "Neighbor_alltoall", topology, algorithm,
                           send.array, Layout.v([count] * outdegree, [k * count for k in range(outdegree)]),
                           recv.array, Layout.v([count] * indegree, [k * count for k in range(indegree)]),
                           recv.dtype)
