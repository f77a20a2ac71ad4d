"""Neighbor_allgatherv: Neighbor_allgather with a count and displacement per source in recvbuf."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import _neighbors
from mpicoll.calls._checks import check_disjoint, check_pair
from mpicoll.data.buffers import parse, parse_v
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Neighbor_allgatherv`` call and bind its schedule."""
    topology, indegree, _ = _neighbors.opening(comm, sendbuf, "Neighbor_allgatherv")
    send = parse(sendbuf, "sendbuf")
    recv = parse_v(recvbuf, "recvbuf", indegree, writable=True)
    check_disjoint(recv, "recvbuf")
    check_pair(recv, send)
    return _neighbors.bind(comm, "Neighbor_allgatherv", topology, algorithm, send.array, Layout.v([send.count], [0]),
                           recv.array, Layout.v(recv.counts, recv.displs), recv.dtype)
