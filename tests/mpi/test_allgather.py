"""Allgather and Allgatherv against MPI's built-in, at whatever size mpirun gave us."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
COUNTS = sorted({0, 1, max(P - 1, 0), P, P + 1, 1001})
GUARD = -99


def data(count: int, dtype=np.float64, rank: int = R) -> np.ndarray:
    return (np.arange(count) % 7 + 10 * rank).astype(dtype)


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allgather"))
@pytest.mark.parametrize("count", COUNTS)
def test_allgather_matches_builtin(comm, algorithm, count):
    x = data(count)
    x0 = x.copy()
    out = np.full(count * P, np.nan)
    ref = np.empty(count * P)
    comm.Allgather(x, out, algorithm=algorithm)
    WORLD.Allgather(x, ref)
    check(np.array_equal(out, ref), f"{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allgather"))
def test_allgather_in_place_and_none(comm, algorithm):
    count = P + 2
    ref = np.empty(count * P)
    WORLD.Allgather(data(count), ref)
    for send in (MPI.IN_PLACE, None):
        y = np.full(count * P, np.nan)
        y[R * count:(R + 1) * count] = data(count)
        comm.Allgather(send, y, algorithm=algorithm)
        check(np.array_equal(y, ref), f"{algorithm}: in place ({send})")


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "float32", "complex128", "bool"])
def test_allgather_dtypes(comm, dtype):
    x = data(5, dtype)
    for algorithm in mpicoll.algorithms("allgather"):
        out = np.zeros(5 * P, dtype)
        comm.Allgather(x, out, algorithm=algorithm)
        ref = np.concatenate(WORLD.allgather(x))
        check(np.array_equal(out, ref), f"{dtype} {algorithm}")


def test_allgather_buffer_forms(comm):
    x = data(2)
    ref = np.concatenate(WORLD.allgather(x))
    out = np.full(3 * P + 1, GUARD, dtype=np.float64)
    comm.Allgather([x, MPI.DOUBLE], [out, (2, 1), MPI.DOUBLE])   # 2 per rank, from element 1
    check(np.array_equal(out[1:2 * P + 1], ref) and out[0] == GUARD and np.all(out[2 * P + 1:] == GUARD),
          "[buf, (count, displ), datatype]")
    raw = bytearray(8 * 2 * P)
    comm.Allgather(x, [raw, MPI.DOUBLE])
    check(np.array_equal(np.frombuffer(raw), ref), "bytearray")


def vcounts(size: int) -> list[int]:
    """Uneven counts with zeros: rank j sends (j * 3) % 4 elements."""
    return [(j * 3) % 4 for j in range(size)]


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allgatherv"))
@pytest.mark.parametrize("scale", [0, 1, 257])
def test_allgatherv_guard_cells_untouched(comm, algorithm, scale):
    counts = [c * scale for c in vcounts(P)]
    displs = [sum(counts[:j]) + 2 * j + 1 for j in range(P)]   # gaps of guard cells between blocks
    total = displs[-1] + counts[-1] + 2
    x = data(counts[R])
    out = np.full(total, GUARD, dtype=np.float64)
    comm.Allgatherv(x, [out, counts, displs, MPI.DOUBLE], algorithm=algorithm)
    ref = np.full(total, GUARD, dtype=np.float64)
    WORLD.Allgatherv(x, [ref, counts, displs, MPI.DOUBLE])
    check(np.array_equal(out, ref), f"{algorithm}: differs (guard cells or data)")
    # in place: own block already there
    y = np.full(total, GUARD, dtype=np.float64)
    y[displs[R]:displs[R] + counts[R]] = x
    comm.Allgatherv(MPI.IN_PLACE, [y, (counts, displs)], algorithm=algorithm)
    check(np.array_equal(y, ref), f"{algorithm}: in place")


def test_allgatherv_forms(comm):
    counts = vcounts(P)
    x = data(counts[R], np.int32)
    ref = np.concatenate(WORLD.allgather(x)).astype(np.int32)
    out = np.zeros(sum(counts), np.int32)
    comm.Allgatherv(x, [out, counts])
    check(np.array_equal(out, ref), "[buf, counts]")
    out = np.zeros(2 * P, np.int32)
    comm.Allgatherv(data(2, np.int32), out)                 # plain buffer, split evenly
    check(np.array_equal(out, np.concatenate(WORLD.allgather(data(2, np.int32)))), "plain buffer")


def test_split_subcommunicator(comm):
    sub = comm.Split(R % 2, -R)   # reversed order inside each half
    try:
        x = data(3)
        for algorithm in mpicoll.algorithms("allgather"):
            out = np.empty(3 * sub.size)
            ref = np.empty(3 * sub.size)
            sub.Allgather(x, out, algorithm=algorithm)
            MPI.Intracomm.Allgather(sub, x, ref)
            check(np.array_equal(out, ref), algorithm)
        counts = [1 + j % 2 for j in range(sub.size)]
        xv = data(counts[sub.rank])
        for algorithm in mpicoll.algorithms("allgatherv"):
            out, ref = np.empty(sum(counts)), np.empty(sum(counts))
            sub.Allgatherv(xv, [out, counts], algorithm=algorithm)
            MPI.Intracomm.Allgatherv(sub, xv, [ref, counts])
            check(np.array_equal(out, ref), algorithm)
    finally:
        sub.Free()


class TestErrors:
    def test_not_divisible(self, comm):
        with pytest.raises(ValueError, match="recvbuf"):
            comm.Allgather(np.zeros(2), np.zeros(2 * P + 1))

    def test_count_mismatch(self, comm):
        with pytest.raises(ValueError, match="recvbuf"):
            comm.Allgather(np.zeros(2), np.zeros(3 * P))

    def test_dtype_mismatch(self, comm):
        with pytest.raises(TypeError, match="dtype"):
            comm.Allgather(np.zeros(2), np.zeros(2 * P, np.float32))

    def test_unknown_algorithm(self, comm):
        with pytest.raises(ValueError, match="no algorithm 'nope'"):
            comm.Allgather(np.zeros(2), np.zeros(2 * P), algorithm="nope")

    def test_v_wrong_number_of_counts(self, comm):
        with pytest.raises(ValueError, match="counts"):
            comm.Allgatherv(np.zeros(1), [np.zeros(P + 1), [1] * (P + 1)])

    def test_v_block_past_end(self, comm):
        with pytest.raises(ValueError, match="ends past|the buffer has"):
            comm.Allgatherv(np.zeros(1), [np.zeros(P), [1] * P, [j + 1 for j in range(P)]])

    def test_v_overlapping_blocks(self, comm):
        if P < 2:
            pytest.skip("needs two ranks")
        with pytest.raises(ValueError, match="overlap"):
            comm.Allgatherv(np.zeros(2), [np.zeros(2 * P), [2] * P, [0] * P])

    def test_v_own_count(self, comm):
        with pytest.raises(ValueError, match="counts"):
            comm.Allgatherv(np.zeros(3), [np.zeros(2 * P), [2] * P])
