"""Hierarchical collectives against MPI's built-in on the node layout this run has.

Runs plain (one node: the algorithms degenerate to their intra-node parts),
with ``MPICOLL_NODE_SIZE=k`` (blocks of k ranks as nodes) and on the emulated
test bed (``launch --emulate-hosts``), where ``MPICOLL_EXPECT_HOSTS`` says how
many nodes ``Split_type(COMM_TYPE_SHARED)`` must find.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll import config
from mpicoll.ir import nodes

from conftest import WORLD, check

P, R = WORLD.size, WORLD.rank
COUNTS = [1, P, 3 * P + 1, 1000]


def test_every_rank_agrees_on_the_layout(comm):
    layout = comm.node_layout
    check(WORLD.allgather(layout) == [layout] * P, f"layouts differ: {layout}")
    expect = os.environ.get("MPICOLL_EXPECT_HOSTS")
    if expect:
        check(len(nodes.groups(P, layout)) == int(expect), f"expected {expect} nodes, found {layout}")
    size = config.current().node_size
    if size:
        check(layout == size, f"MPICOLL_NODE_SIZE={size} but the layout is {layout}")


@pytest.mark.parametrize("count", COUNTS)
def test_allreduce(comm, count):
    x = np.random.default_rng(R).integers(-50, 50, count).astype(np.float64)
    expected = np.empty_like(x)
    WORLD.Allreduce(x, expected)
    out = np.full_like(x, np.nan)
    comm.Allreduce(x, out, algorithm="hierarchical")
    check(np.array_equal(out, expected), "differs from the built-in")
    inplace = x.copy()
    comm.Allreduce(MPI.IN_PLACE, inplace, algorithm="hierarchical")
    check(np.array_equal(inplace, expected), "in place differs from the built-in")


@pytest.mark.parametrize("root", sorted({0, P // 2, P - 1}))
@pytest.mark.parametrize("count", COUNTS)
def test_bcast_and_reduce(comm, root, count):
    x = np.random.default_rng(R + 7).integers(-50, 50, count).astype(np.int64)
    b = x.copy() if R == root else np.zeros_like(x)
    comm.Bcast(b, root=root, algorithm="hierarchical")
    check(np.array_equal(b, WORLD.bcast(x if R == root else None, root=root)), "bcast")
    expected = np.empty_like(x) if R == root else None
    WORLD.Reduce(x, expected, root=root)
    out = np.zeros_like(x) if R == root else None
    comm.Reduce(x, out, root=root, algorithm="hierarchical")
    check(R != root or np.array_equal(out, expected), "reduce differs from the built-in")


@pytest.mark.parametrize("count", [1, 5, 333])
def test_allgather_and_allgatherv(comm, count):
    x = np.arange(count, dtype=np.int32) + 1000 * R
    out = np.zeros(count * P, np.int32)
    comm.Allgather(x, out, algorithm="hierarchical")
    check(np.array_equal(out, np.concatenate(WORLD.allgather(x))), "allgather")
    mine = x[: count + R - 1] if count + R > 1 else x[:0]
    counts = WORLD.allgather(len(mine))
    outv = np.zeros(sum(counts), np.int32)
    comm.Allgatherv(mine, [outv, counts], algorithm="hierarchical")
    check(np.array_equal(outv, np.concatenate(WORLD.allgather(mine))), "allgatherv")


def test_barrier(comm):
    for _ in range(3):
        comm.Barrier(algorithm="hierarchical")
    check(True)


def test_nonblocking_and_persistent(comm):
    x = np.full(257, R + 1.0)
    out = np.zeros_like(x)
    comm.Iallreduce(x, out, algorithm="hierarchical").Wait()
    check(np.all(out == P * (P + 1) / 2), "Iallreduce")
    req = comm.Allreduce_init(x, out, algorithm="hierarchical")
    for _ in range(2):
        out[:] = 0
        req.Start()
        req.Wait()
        check(np.all(out == P * (P + 1) / 2), "Allreduce_init")
    req.Free()


def test_auto_result_is_right_whatever_it_picks(comm):
    x = np.ones(1 << 16)
    out = np.zeros_like(x)
    comm.Allreduce(x, out)
    check(np.all(out == P), "auto")
