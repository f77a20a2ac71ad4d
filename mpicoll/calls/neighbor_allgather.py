"""Neighbor_allgather: each rank's block goes to each of its destinations; block k of recvbuf comes from
sources[k] (:mod:`mpicoll.families.neighbor`, one round).  Blocks from ``MPI.PROC_NULL`` neighbours stay
untouched."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import _neighbors
from mpicoll.calls._checks import check_count, check_pair
from mpicoll.data.buffers import parse, parse_blocks
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Neighbor_allgather`` call and bind its schedule."""
    topology, indegree, _ = _neighbors.opening(comm, sendbuf, "Neighbor_allgather")
    send = parse(sendbuf, "sendbuf")
    recv = parse_blocks(recvbuf, "recvbuf", indegree, writable=True)
    check_pair(recv, send)
    count = send.count
    check_count(recv.count, count * indegree, f"recvbuf: Neighbor_allgather needs {indegree} blocks of sendbuf's "
                                              f"{count} elements, got {recv.count} elements")
    return _neighbors.bind(comm, "Neighbor_allgather", topology, algorithm, send.array, Layout.v([count], [0]),
                           recv.array, Layout.v([count] * indegree, [k * count for k in range(indegree)]),
                           recv.dtype)
