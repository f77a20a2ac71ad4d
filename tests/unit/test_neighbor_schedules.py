"""Neighbourhood schedules on every kind of topology: the symbolic checker proves each rank ends with what MPI's
neighbour order says (mpicoll.ir.topology.matching_send, written independently of the schedules' listing)."""

from __future__ import annotations

import itertools

import pytest

import mpicoll
from mpicoll.analysis.symbolic import verify
from mpicoll.ir.topology import Cart, DistGraph, Graph


def carts():
    for dims in [(1,), (2,), (3,), (5,), (1, 1), (2, 2), (3, 2), (1, 4), (2, 1, 3)]:
        for periods in itertools.product((False, True), repeat=len(dims)):
            yield Cart(dims, periods)


def dist_graphs(p):
    ring = tuple((((r + 1) % p,) * 2 + (r,), ((r - 1) % p,) * 2 + (r,)) for r in range(p))
    star = tuple((tuple(range(1, p)), ()) if r == 0 else ((), (0,)) for r in range(p))
    empty = tuple(((), ()) for _ in range(p))
    skip = tuple(((((r - 2) % p),), (((r + 2) % p),)) for r in range(p))
    return [DistGraph(ring), DistGraph(star), DistGraph(empty), DistGraph(skip)]


def graphs(p):
    ring = [x for i in range(p) for x in ((i - 1) % p, (i + 1) % p)]
    return [Graph(tuple(range(2, 2 * p + 1, 2)), tuple(ring))]


@pytest.mark.parametrize("collective", ["neighbor_allgather", "neighbor_alltoall"])
def test_every_topology(collective):
    topologies = [(t.size, t) for t in carts()]
    topologies += [(p, t) for p in (1, 2, 3, 5, 8) for t in dist_graphs(p) + graphs(p)]
    for p, t in topologies:
        verify(collective, "direct", p, topology=t)


def test_cartesian_pairs_the_two_directions():
    """Two ranks along a periodic dimension: rank 0's +d message (block 1) is rank 1's -d block (block 0)."""
    s = mpicoll.schedules("neighbor_alltoall", "direct", 2, topology=Cart((2,), (True,)))
    assert [str(x) for x in s[0].rounds[0].sends] == ["send[1]->1", "send[0]->1"]
    assert [str(x) for x in s[0].rounds[0].recvs] == ["recv[0]<-1", "recv[1]<-1"]


def test_self_neighbour_is_a_copy():
    s = mpicoll.schedules("neighbor_alltoall", "direct", 1, topology=Cart((1,), (True,)))
    assert [str(x) for x in s[0].rounds[0].steps] == ["recv[0]=send[1]", "recv[1]=send[0]"]


def test_proc_null_gets_no_message():
    s = mpicoll.schedules("neighbor_allgather", "direct", 3, topology=Cart((3,), (False,)))
    assert [x.peer for x in s[0].rounds[0].recvs] == [1] and [x.block.lo for x in s[0].rounds[0].recvs] == [1]
