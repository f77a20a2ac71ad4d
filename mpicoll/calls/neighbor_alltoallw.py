"""Neighbor_alltoallw: Neighbor_alltoallv with a datatype per neighbour; blocks move as bytes (packed by MPI
where a datatype is not dense), as :mod:`mpicoll.calls.alltoallw` moves them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mpicoll.calls import _neighbors
from mpicoll.calls.alltoallw import as_bytes, parse_w
from mpicoll.program.plan import Plan

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Neighbor_alltoallw`` call and bind its schedule over byte blocks."""
    topology, indegree, outdegree = _neighbors.opening(comm, sendbuf, "Neighbor_alltoallw")
    send = parse_w(sendbuf, "sendbuf", outdegree)
    recv = parse_w(recvbuf, "recvbuf", indegree, writable=True)
    recv_array, recv_layout = as_bytes(recv, "recvbuf", writable=True)
    send_array, send_layout = as_bytes(send, "sendbuf", writable=False)
    return _neighbors.bind(comm, "Neighbor_alltoallw", topology, algorithm, send_array, send_layout, recv_array,
                           recv_layout, np.dtype(np.uint8))
