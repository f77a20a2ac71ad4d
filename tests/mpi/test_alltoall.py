"""Alltoall and Alltoallv against MPI's built-in."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import WORLD, check
from mpi4py import MPI

import mpicoll

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
COUNTS = sorted({0, 1, max(P - 1, 0), P, P + 1, 1001})
GUARD = -99


def data(count: int, dtype=np.float64) -> np.ndarray:
    return (np.arange(count) + 1000 * R).astype(dtype)


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoall"))
@pytest.mark.parametrize("count", COUNTS)
def test_alltoall_matches_builtin(comm, algorithm, count):
    x = data(count * P)
    x0 = x.copy()
    out, ref = np.full(count * P, np.nan), np.empty(count * P)
    comm.Alltoall(x, out, algorithm=algorithm)
    WORLD.Alltoall(x, ref)
    check(np.array_equal(out, ref), f"{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoall"))
def test_alltoall_in_place(comm, algorithm):
    x = data(3 * P, np.int32)
    ref = np.empty_like(x)
    WORLD.Alltoall(x, ref)
    for send in (MPI.IN_PLACE, None):
        y = x.copy()
        comm.Alltoall(send, y, algorithm=algorithm)
        check(np.array_equal(y, ref), f"{algorithm}: in place ({send})")


@pytest.mark.parametrize("dtype", ["int8", "uint64", "float16", "complex128"])
def test_alltoall_dtypes(comm, dtype):
    x = data(2 * P, dtype)
    ref = np.empty_like(x)
    WORLD.Alltoall(x, ref)
    for algorithm in mpicoll.algorithms("alltoall"):
        out = np.zeros(2 * P, dtype)
        comm.Alltoall(x, out, algorithm=algorithm)
        check(np.array_equal(out, ref), f"{dtype} {algorithm}")


def test_alltoall_buffer_forms(comm):
    x = data(2 * P)
    ref = np.empty_like(x)
    WORLD.Alltoall(x, ref)
    out = np.full(2 * P + 2, GUARD, dtype=np.float64)
    comm.Alltoall([x, 2, MPI.DOUBLE], [out, (2, 1), MPI.DOUBLE])   # 2 per block, from element 1
    check(np.array_equal(out[1:-1], ref) and out[0] == GUARD and out[-1] == GUARD, "[buf, (count, displ), type]")
    raw = bytearray(16 * P)
    comm.Alltoall(x, [raw, MPI.DOUBLE])
    check(np.array_equal(np.frombuffer(raw), ref), "bytearray")


def vlayout(counts: list[int], gap: int = 1) -> tuple[list[int], int]:
    """Displacements in reverse block order with ``gap`` guard cells between blocks; the total size."""
    displs, at = [0] * len(counts), gap
    for j in reversed(range(len(counts))):
        displs[j] = at
        at += counts[j] + gap
    return displs, at


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallv"))
@pytest.mark.parametrize("scale", [0, 1, 129])
def test_alltoallv_guard_cells(comm, algorithm, scale):
    # rank i sends ((i + 2j) % 3) * scale elements to rank j: uneven, with zeros
    sendcounts = [((R + 2 * j) % 3) * scale for j in range(P)]
    recvcounts = [((i + 2 * R) % 3) * scale for i in range(P)]
    sdispls, stotal = vlayout(sendcounts, 0)
    rdispls, rtotal = vlayout(recvcounts, 2)
    x = data(stotal)
    x0 = x.copy()
    out = np.full(rtotal, GUARD, dtype=np.float64)
    ref = np.full(rtotal, GUARD, dtype=np.float64)
    comm.Alltoallv([x, sendcounts, sdispls, MPI.DOUBLE], [out, (recvcounts, rdispls)], algorithm=algorithm)
    WORLD.Alltoallv([x, sendcounts, sdispls, MPI.DOUBLE], [ref, recvcounts, rdispls, MPI.DOUBLE])
    check(np.array_equal(out, ref), f"{algorithm}: differs (data or guard cells)")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("alltoallv"))
def test_alltoallv_in_place(comm, algorithm):
    counts = [2] * P      # in place, MPI needs the same counts both ways
    displs, total = vlayout(counts, 1)
    y = np.full(total, GUARD, dtype=np.int64)
    for j in range(P):
        y[displs[j]:displs[j] + 2] = [1000 * R + j, 7]
    ref = y.copy()
    WORLD.Alltoallv(MPI.IN_PLACE, [ref, counts, displs, MPI.INT64_T])
    comm.Alltoallv(MPI.IN_PLACE, [y, counts, displs, MPI.INT64_T], algorithm=algorithm)
    check(np.array_equal(y, ref), f"{algorithm}: in place")


def test_split_subcommunicator(comm):
    sub = comm.Split(R % 2, -R)
    try:
        x = data(3 * sub.size)
        for algorithm in mpicoll.algorithms("alltoall"):
            out, ref = np.empty_like(x), np.empty_like(x)
            sub.Alltoall(x, out, algorithm=algorithm)
            MPI.Intracomm.Alltoall(sub, x, ref)
            check(np.array_equal(out, ref), algorithm)
        for algorithm in mpicoll.algorithms("alltoallv"):
            out, ref = np.empty_like(x), np.empty_like(x)
            sub.Alltoallv(x, out, algorithm=algorithm)
            MPI.Intracomm.Alltoallv(sub, x, ref)
            check(np.array_equal(out, ref), algorithm)
    finally:
        sub.Free()


class TestErrors:
    def test_not_divisible(self, comm):
        with pytest.raises(ValueError, match="recvbuf"):
            comm.Alltoall(np.zeros(2 * P), np.zeros(2 * P + 1))

    def test_size_mismatch(self, comm):
        with pytest.raises(ValueError, match="recvbuf"):
            comm.Alltoall(np.zeros(2 * P), np.zeros(3 * P))

    def test_dtype_mismatch(self, comm):
        with pytest.raises(TypeError, match="dtype"):
            comm.Alltoallv(np.zeros(P), np.zeros(P, np.int32))

    def test_read_only(self, comm):
        out = np.zeros(P)
        out.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            comm.Alltoall(np.zeros(P), out)

    def test_v_counts(self, comm):
        with pytest.raises(ValueError, match="counts"):
            comm.Alltoallv([np.zeros(P), [1] * (P + 1)], np.zeros(P))
