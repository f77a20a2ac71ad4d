"""Neighbourhood collectives: one round of messages along the edges of a virtual topology.

``Neighbor_alltoall``: rank r sends its block k to ``destinations[k]`` and
receives its block k from ``sources[k]`` (:mod:`mpicoll.ir.topology` gives both
lists in MPI's order).  ``Neighbor_allgather``: the same with send block 0 to
every destination.  Every edge carries one message and no message depends on
another, so the whole collective is one round: its cost is
``alpha + beta * (largest block)`` times the degree on a rank that sends its
messages one after the other, the lower bound for a rank that must hear from
each neighbour.

Listing order decides which message is which between the same two ranks
(MPI's non-overtaking rule; see :class:`~mpicoll.ir.schedule.Schedule`):

- on a distributed graph or a graph, sends in destination order and receives
  in source order, so that a duplicated edge's k-th message is the k-th
  received;
- on a Cartesian topology, per dimension the +d message (block 2d + 1) is
  listed before the -d one (block 2d), while receives are listed -d first: where
  both neighbours of a dimension are one rank q (periodic, 2 ranks along it),
  r's +d message then lands in q's -d block, as the geometry says (and as
  Open MPI does).

A rank that is its own neighbour (a periodic dimension of one rank, a graph
self-loop) copies instead of messaging: its i-th self-send (in the order
above) fills its i-th self-receive.  A ``None`` neighbour (``MPI_PROC_NULL``)
gets no message and its receive block is left untouched.  Without a
topology (``topology=None``, e.g. ``mpicoll.schedules("neighbor_alltoall",
"direct", 4)``) the schedules are drawn for a periodic ring of the p ranks.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Timeline
from mpicoll.ir.topology import Cart, Topology

__all__ = ["send_order", "ring"]


def send_order(topology: Topology, ndest: int) -> list[int]:
    """The order in which a rank lists its sends: Cartesian ``[1, 0, 3, 2, ...]``, else ``0 .. ndest-1``."""
    if topology.paired:
        return [k ^ 1 for k in range(ndest)]
    return list(range(ndest))


def ring(topology: Topology | None, size: int) -> Topology:
    """``topology``, or a periodic ring of ``size`` ranks where none is given."""
    return Cart((size,), (True,)) if topology is None else topology


def _edges(tl: Timeline, rank: int, size: int, topology: Topology | None, send_block) -> int:
    """Post every edge's message in round 0; returns the rank's nblocks (the degree, at least 1)."""
    topology = ring(topology, size)
    sources, destinations = topology.neighbors(rank)
    own_sends = []
    for k in send_order(topology, len(destinations)):
        dest = destinations[k]
        if dest == rank:
            own_sends.append(send_block(k))
        elif dest is not None:
            tl.send(0, dest, send_block(k))
    own_recvs = []
    for k, src in enumerate(sources):
        if src == rank:
            own_recvs.append(Block("recv", k, k + 1))
        elif src is not None:
            tl.recv(0, src, Block("recv", k, k + 1))
    for out, src in zip(own_recvs, own_sends):
        tl.copy(0, out, src)
    return max(len(sources), len(destinations), topology.degree(), 1)


@register("neighbor_alltoall", "direct", params=("topology",), any_size=True)
def alltoall(rank: int, size: int, topology: Topology | None = None):
    """One round: send block k to destinations[k], receive block k from sources[k].

    Cost: alpha + beta * (bytes sent), one message per edge.

    When it wins: Always (the only algorithm): every edge's message is independent.
    """
    tl = Timeline()
    nblocks = _edges(tl, rank, size, topology, lambda k: Block("send", k, k + 1))
    return nblocks, tl.rounds()


@register("neighbor_allgather", "direct", params=("topology",), any_size=True)
def allgather(rank: int, size: int, topology: Topology | None = None):
    """One round: send block 0 to every destination, receive block k from sources[k].

    Cost: alpha + beta * (bytes sent), one message per edge.

    When it wins: Always (the only algorithm): every edge's message is independent.
    """
    tl = Timeline()
    nblocks = _edges(tl, rank, size, topology, lambda k: Block("send", 0, 1))
    return nblocks, tl.rounds()
