"""Alltoallw (a count, byte displacement and datatype per peer) against MPI's built-in."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
GAP = 3   # guard bytes before and between blocks: displacements are unaligned on purpose
VECTOR = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()    # 2 doubles with a gap: packed by MPI
TYPES = [MPI.INT32_T, MPI.DOUBLE, VECTOR]


def pair_type(i: int, j: int) -> MPI.Datatype:
    """The datatype both ends use for the message between ranks i and j (symmetric in i, j)."""
    return TYPES[(i + j) % len(TYPES)]


def layout(counts: list[int], types: list[MPI.Datatype]) -> tuple[list[int], int]:
    """Byte displacements in reverse block order with GAP guard bytes around blocks; the total size."""
    displs, at = [0] * len(counts), GAP
    for j in reversed(range(len(counts))):
        displs[j] = at
        at += counts[j] * types[j].extent + GAP
    return displs, at


def spec(scale: int) -> tuple[list, list, int]:
    """(send spec without its buffer, recv spec without its buffer, total send bytes, total recv bytes) for
    rank i sending ((i + 2j) % 3) * scale elements to rank j (zeros included)."""
    scounts = [((R + 2 * j) % 3) * scale for j in range(P)]
    rcounts = [((i + 2 * R) % 3) * scale for i in range(P)]
    types = [pair_type(R, j) for j in range(P)]
    sdispls, stotal = layout(scounts, types)
    rdispls, rtotal = layout(rcounts, types)
    return [scounts, sdispls, types], [rcounts, rdispls, types], stotal, rtotal


def random_bytes(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallw") + ["auto"])
@pytest.mark.parametrize("scale", [0, 1, 5])
def test_alltoallw_matches_builtin(comm, algorithm, scale):
    s, r, stotal, rtotal = spec(scale)
    x = random_bytes(stotal, R)
    x0 = x.copy()
    out, ref = random_bytes(rtotal, 99), random_bytes(rtotal, 99)   # same guard bytes in both
    comm.Alltoallw([x, *s], [out, *r], algorithm=algorithm)
    WORLD.Alltoallw([x, *s], [ref, *r])
    check(np.array_equal(out, ref), f"{algorithm} scale {scale}: differs (data or guard bytes)")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallw"))
def test_alltoallw_different_types_same_signature(comm, algorithm):
    # send 2 doubles per element through the vector type, receive them as plain contiguous doubles
    count = 3
    x = np.arange(3 * count * P, dtype=np.float64) + 1000 * R
    out = np.full(2 * count * P, -1.0)
    comm.Alltoallw([x, [count] * P, [3 * count * 8 * j for j in range(P)], [VECTOR] * P],
                   [out, ([2 * count] * P, [2 * count * 8 * j for j in range(P)]), [MPI.DOUBLE] * P],
                   algorithm=algorithm)
    expect = np.concatenate([(np.arange(3 * count) + 1000 * j + 3 * count * R)[[0, 2, 3, 5, 6, 8]]
                             for j in range(P)])
    check(np.array_equal(out, expect), f"{algorithm}: vector -> contiguous")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallw"))
@pytest.mark.parametrize("types", ["dense", "mixed"])
def test_alltoallw_in_place(comm, algorithm, types):
    counts = [2] * P   # in place, both directions use the receive arguments
    dts = [MPI.INT32_T] * P if types == "dense" else [pair_type(R, j) for j in range(P)]
    displs, total = layout(counts, dts)
    y = random_bytes(total, R)
    ref = y.copy()
    WORLD.Alltoallw(MPI.IN_PLACE, [ref, counts, displs, dts])
    comm.Alltoallw(MPI.IN_PLACE, [y, counts, displs, dts], algorithm=algorithm)
    check(np.array_equal(y, ref), f"{algorithm} {types}: in place")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallw"))
def test_ialltoallw(comm, algorithm):
    s, r, stotal, rtotal = spec(4)
    x = random_bytes(stotal, R + 7)
    out, ref = random_bytes(rtotal, 5), random_bytes(rtotal, 5)
    req = comm.Ialltoallw([x, *s], [out, *r], algorithm=algorithm)
    WORLD.Alltoallw([x, *s], [ref, *r])
    req.Wait()
    check(np.array_equal(out, ref), f"{algorithm}: nonblocking differs")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallw"))
def test_alltoallw_persistent(comm, algorithm):
    s, r, stotal, rtotal = spec(2)
    x = np.zeros(stotal, np.uint8)
    out = np.zeros(rtotal, np.uint8)
    req = comm.Alltoallw_init([x, *s], [out, *r], algorithm=algorithm)
    try:
        for start in range(3):   # new data each time: packed again at every Start
            x[:] = random_bytes(stotal, 10 * start + R)
            ref = out.copy()
            WORLD.Alltoallw([x, *s], [ref, *r])
            req.Start()
            req.Wait()
            check(np.array_equal(out, ref), f"{algorithm}: start {start} differs")
    finally:
        req.Free()


class TestErrors:
    def test_one_datatype_not_a_list(self, comm):
        x = np.zeros(8 * P)
        with pytest.raises(MPI.Exception) as info:
            comm.Alltoallw([x, [1] * P, [8 * j for j in range(P)], MPI.DOUBLE],
                           [x.copy(), [1] * P, [8 * j for j in range(P)], [MPI.DOUBLE] * P])
        assert info.value.Get_error_class() == MPI.ERR_TYPE

    def test_block_past_buffer(self, comm):
        x = np.zeros(P, np.float64)
        with pytest.raises(ValueError, match="sendbuf: block") as info:
            comm.Alltoallw([x, [2] * P, [8 * j for j in range(P)], [MPI.DOUBLE] * P],
                           [np.zeros(2 * P), [2] * P, [16 * j for j in range(P)], [MPI.DOUBLE] * P])
        assert info.value.Get_error_class() == MPI.ERR_COUNT

    def test_own_block_too_small(self, comm):
        # every rank's own block: 2 doubles sent, room for 1 received
        x = np.zeros(2 * P)
        with pytest.raises(MPI.Exception) as info:
            comm.Alltoallw([x, [2] * P, [16 * j for j in range(P)], [MPI.DOUBLE] * P],
                           [np.zeros(2 * P), [1] * P, [16 * j for j in range(P)], [MPI.DOUBLE] * P])
        assert info.value.Get_error_class() == MPI.ERR_TRUNCATE

    def test_overlapping_receive_blocks(self, comm):
        if P < 2:
            pytest.skip("needs two blocks")
        with pytest.raises(ValueError, match="overlap"):
            comm.Alltoallw([np.zeros(P), [1] * P, [8 * j for j in range(P)], [MPI.DOUBLE] * P],
                           [np.zeros(P), [1] * P, [0] * P, [MPI.DOUBLE] * P])
