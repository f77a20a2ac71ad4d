"""Neighbor_alltoallv: Neighbor_alltoall with a count and displacement per neighbour on both sides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import _neighbors
from mpicoll.calls._checks import check_disjoint, check_pair
from mpicoll.data.buffers import parse_v
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Neighbor_alltoallv`` call and bind its schedule."""
    topology, indegree, outdegree = _neighbors.opening(comm, sendbuf, "Neighbor_alltoallv")
    send = parse_v(sendbuf, "sendbuf", outdegree)
    recv = parse_v(recvbuf, "recvbuf", indegree, writable=True)
    check_disjoint(recv, "recvbuf")
    check_pair(recv, send)
    return _neighbors.bind(comm, "Neighbor_alltoallv", topology, algorithm,
                           send.array, Layout.v(send.counts, send.displs), recv.array,
                           Layout.v(recv.counts, recv.displs), recv.dtype)
