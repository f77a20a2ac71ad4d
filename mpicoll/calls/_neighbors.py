"""What the neighbourhood collectives share: the communicator's topology, read from MPI, and the binding.

The topology is read on the private duplicate (``MPI_Comm_dup`` keeps it) with
MPI's local queries (``Cart_get``, ``Graph_get``, ``Dist_graph_neighbors``):
no message.  Any communicator with a topology works, however it was wrapped:
``mpicoll.Comm(comm.Create_cart(...))`` as well as the topology classes.
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls import debug_check
from mpicoll.data.buffers import is_in_place
from mpicoll.ir.layout import Layout
from mpicoll.ir.topology import Cart, DistGraph, Graph, Topology
from mpicoll.program.plan import Plan, make_plan

__all__ = ["topology_of", "degrees", "bind", "no_in_place"]


def topology_of(comm: Any, method: str) -> Topology:
    """The virtual topology of ``comm`` (an MPI communicator), as :mod:`mpicoll.ir.topology` data."""
    kind = MPI.Comm.Get_topology(comm)
    handle = comm.handle
    if kind == MPI.CART:
        dims, periods, _ = MPI.Cartcomm.fromhandle(handle).Get_topo()
        return Cart(tuple(dims), tuple(periods))
    if kind == MPI.GRAPH:
        index, edges = MPI.Graphcomm.fromhandle(handle).Get_topo()
        return Graph(tuple(index), tuple(edges))
    if kind == MPI.DIST_GRAPH:
        sources, destinations, _ = MPI.Distgraphcomm.fromhandle(handle).Get_dist_neighbors()
        nulled = [tuple(None if n == MPI.PROC_NULL else n for n in x) for x in (sources, destinations)]
        return DistGraph.local(comm.Get_rank(), comm.Get_size(), *nulled)
    raise errors.TopologyError(f"{method}: the communicator has no virtual topology (make one with Create_cart, "
                               "Create_graph or Create_dist_graph(_adjacent))")


def degrees(topology: Topology, rank: int) -> tuple[int, int]:
    """(indegree, outdegree): the blocks of recvbuf and of sendbuf (PROC_NULL neighbours included, as MPI)."""
    sources, destinations = topology.neighbors(rank)
    return len(sources), len(destinations)


def no_in_place(sendbuf: Any, method: str) -> None:
    if is_in_place(sendbuf):
        raise errors.BufferValueError(f"sendbuf: {method} takes no MPI.IN_PLACE (MPI defines none)")


def opening(comm: Any, sendbuf: Any, method: str) -> tuple[Topology, int, int]:
    """What every neighbourhood call checks and reads first: no ``MPI.IN_PLACE``, the communicator's topology,
    and this rank's (indegree, outdegree)."""
    no_in_place(sendbuf, method)
    topology = topology_of(comm.private, method)
    return (topology, *degrees(topology, comm.rank))


def bind(comm: Any, method: str, topology: Topology, algorithm: str | None, send_array: Any, send_layout: Layout,
         recv_array: Any, recv_layout: Layout, dtype: Any) -> Plan:
    """The plan of one neighbourhood call: the ``direct`` schedule over the topology's edges."""
    collective = "neighbor_allgather" if method.startswith("Neighbor_allgather") else "neighbor_alltoall"
    if algorithm not in (None, "auto", "direct"):
        raise ValueError(f"algorithm: {method} has one algorithm, 'direct' (or 'auto'), got {algorithm!r}")
    debug_check(comm, method, dtype=dtype, algorithm="direct")
    layouts = {"send": send_layout, "recv": recv_layout}
    return make_plan(comm, collective, "direct", {"topology": topology}, {"send": send_array, "recv": recv_array},
                     lambda nb: layouts, dtype=dtype)
