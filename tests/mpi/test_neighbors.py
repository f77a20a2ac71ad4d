"""Neighbourhood collectives of mpicoll.Comm (buffers and objects) against MPI's built-in, on every kind of
virtual topology: Cartesian (periodic, not, dimensions of one rank), graph, distributed graph (duplicate edges,
self-loops, weights, empty neighbourhoods)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
SENTINEL = -7


def topologies():
    """(name, MPI topology communicator) made on WORLD; every rank makes every one, in the same order."""
    ring = [x for i in range(P) for x in ((i - 1) % P, (i + 1) % P)]
    dims = MPI.Compute_dims(P, 2)
    return [
        ("cart 1-D periodic", WORLD.Create_cart([P], periods=[True])),
        ("cart 1-D", WORLD.Create_cart([P], periods=[False])),
        ("cart 2-D mixed", WORLD.Create_cart(dims, periods=[True, False])),
        ("cart with a dimension of 1", WORLD.Create_cart([P, 1], periods=[False, True])),
        ("graph ring", WORLD.Create_graph(list(range(2, 2 * P + 1, 2)), ring)),
        ("dist graph, duplicates and a self-loop",
         WORLD.Create_dist_graph_adjacent([(R + 1) % P] * 2 + [R], [(R - 1) % P] * 2 + [R])),
        ("dist graph, weighted", WORLD.Create_dist_graph([R], [1], [(R + 2) % P], [5])),
        ("dist graph, empty", WORLD.Create_dist_graph_adjacent([], [])),
    ]


@pytest.fixture(scope="module")
def topos():
    made = [(name, t, mpicoll.Comm(t)) for name, t in topologies()]
    yield made
    for _, _, c in made:
        c.Free()   # the wrapper shares the topology's handle: this frees both


def ends(topo):
    return topo.indegree, topo.outdegree


@pytest.mark.parametrize("form", ["blocking", "nonblocking", "persistent"])
@pytest.mark.parametrize("kind", ["allgather", "alltoall"])
def test_fixed_size_match_builtin(topos, kind, form):
    for name, topo, comm in topos:
        ind, outd = ends(topo)
        for n in (0, 1, 5):
            send = np.arange((outd if kind == "alltoall" else 1) * n, dtype="i") + 1000 * R
            want = np.full(ind * n, SENTINEL, "i")
            got = want.copy()
            getattr(topo, f"Neighbor_{kind}")(send, want)
            method = f"Neighbor_{kind}"
            if form == "blocking":
                getattr(comm, method)(send, got)
            elif form == "nonblocking":
                getattr(comm, "I" + method[0].lower() + method[1:])(send, got).Wait()
            else:
                req = getattr(comm, method + "_init")(send, got)
                for _ in range(2):
                    got[:] = SENTINEL
                    req.Start()
                    req.Wait()
                req.Free()
            check(np.array_equal(got, want), f"{name} {method} ({form}) n={n}: {got} != {want}")


def test_v_variants_match_builtin(topos):
    for name, topo, comm in topos:
        ind, outd = ends(topo)
        # allgatherv: R + 1 elements from each rank; the receiver knows its sources'
        src = MPI.Topocomm.fromhandle(topo.handle).inedges
        rcounts = [s + 1 if s != MPI.PROC_NULL else 0 for s in src]
        rdispls = [sum(rcounts[:k]) + 2 * k for k in range(ind)]   # gaps stay untouched
        size = sum(rcounts) + 2 * ind
        send = np.full(R + 1, R, "d")
        want, got = np.full(size, SENTINEL, "d"), np.full(size, SENTINEL, "d")
        topo.Neighbor_allgatherv(send, [want, (rcounts, rdispls)])
        comm.Neighbor_allgatherv(send, [got, (rcounts, rdispls)])
        check(np.array_equal(got, want), f"{name} Neighbor_allgatherv: {got} != {want}")
        # alltoallv: block k of rank R to its k-th destination has 2 elements; receives likewise
        scounts, rcounts = [2] * outd, [2] * ind
        send = np.arange(2 * outd, dtype="d") + 10 * R
        want, got = np.full(2 * ind, SENTINEL, "d"), np.full(2 * ind, SENTINEL, "d")
        topo.Neighbor_alltoallv([send, scounts], [want, rcounts])
        comm.Neighbor_alltoallv([send, scounts], [got, rcounts])
        check(np.array_equal(got, want), f"{name} Neighbor_alltoallv: {got} != {want}")
        # alltoallw: one int32 per edge, byte displacements, and a derived (vector) type on the receive side
        send = np.arange(outd, dtype="i") + 100 * R
        sspec = [send, [1] * outd, [4 * k for k in range(outd)], [MPI.INT] * outd]
        want, got = np.full(3 * ind, SENTINEL, "i"), np.full(3 * ind, SENTINEL, "i")
        vec = MPI.INT.Create_vector(1, 1, 3).Commit()
        topo.Neighbor_alltoallw(sspec, [want, [1] * ind, [12 * k for k in range(ind)], [vec] * ind])
        comm.Neighbor_alltoallw(sspec, [got, [1] * ind, [12 * k for k in range(ind)], [vec] * ind])
        vec.Free()
        check(np.array_equal(got, want), f"{name} Neighbor_alltoallw: {got} != {want}")


def test_objects_match_mpi4py(topos):
    for name, topo, comm in topos:
        _, outd = ends(topo)
        check(comm.neighbor_allgather({"r": R}) == topo.neighbor_allgather({"r": R}), f"{name} neighbor_allgather")
        items = [(R, k) for k in range(outd)]
        check(comm.neighbor_alltoall(items) == topo.neighbor_alltoall(items), f"{name} neighbor_alltoall")


def test_one_way_graph():
    """Rank 0 hears every other rank, which hear nobody (Open MPI 5.0.11's built-in never completes this one on
    rank 0, so the expected values are written out)."""
    topo = WORLD.Create_dist_graph_adjacent(list(range(1, P)) if R == 0 else [], [0] if R else [])
    comm = mpicoll.Comm(topo)
    for n in (0, 1, 3):
        got = np.full((P - 1) * n if R == 0 else 0, SENTINEL, "i")
        comm.Neighbor_allgather(np.full(n, R, "i"), got)
        want = np.repeat(np.arange(1, P, dtype="i"), n) if R == 0 else got
        check(np.array_equal(got, want), f"n={n}: {got}")
        got[:] = SENTINEL
        comm.Neighbor_alltoall(np.full(n if R else 0, R, "i"), got)
        check(np.array_equal(got, want), f"alltoall n={n}: {got}")
    check(comm.neighbor_allgather(R) == (list(range(1, P)) if R == 0 else []), "neighbor_allgather")
    comm.Free()


def test_proc_null_blocks_untouched():
    topo = WORLD.Create_cart([P], periods=[False])
    comm = mpicoll.Comm(topo)
    got = np.full(2, SENTINEL, "i")
    comm.Neighbor_allgather(np.array([R], "i"), got)
    check(got[0] == (R - 1 if R > 0 else SENTINEL) and got[1] == (R + 1 if R < P - 1 else SENTINEL), f"{got}")
    comm.Free()


def test_errors(comm):
    with pytest.raises(MPI.Exception) as info:
        comm.Neighbor_allgather(np.zeros(1), np.zeros(1))
    check(info.value.Get_error_class() == MPI.ERR_TOPOLOGY, f"{info.value}")
    topo = WORLD.Create_cart([P], periods=[True])
    cart = mpicoll.Comm(topo)
    with pytest.raises(ValueError):
        cart.Neighbor_alltoall(MPI.IN_PLACE, np.zeros(2))
    with pytest.raises(ValueError):
        cart.Neighbor_allgather(np.zeros(2), np.zeros(3))   # 2 blocks of 2 expected
    with pytest.raises(ValueError):
        cart.Neighbor_alltoall(np.zeros(2), np.zeros(2), algorithm="ring")
    cart.Free()
