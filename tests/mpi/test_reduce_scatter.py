"""Reduce_scatter_block and Reduce_scatter against MPI's built-in."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
COUNTS = sorted({0, 1, max(P - 1, 0), P, P + 1, 1001})


def data(count: int, dtype=np.float64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(1000 * R + seed)
    return rng.integers(0, 4, size=count).astype(dtype)


def uneven(scale: int) -> list[int]:
    """Uneven counts with zeros: rank j gets ((j * 5) % 3) * scale elements."""
    return [((j * 5) % 3) * scale for j in range(P)]


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce_scatter_block"))
@pytest.mark.parametrize("count", COUNTS)
def test_block_matches_builtin(comm, algorithm, count):
    x = data(count * P)
    x0 = x.copy()
    out, ref = np.full(count, np.nan), np.empty(count)
    comm.Reduce_scatter_block(x, out, algorithm=algorithm)
    WORLD.Reduce_scatter_block(x, ref)
    check(np.array_equal(out, ref), f"{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce_scatter_block"))
def test_block_in_place(comm, algorithm):
    count = P + 2
    x = data(count * P, np.int64)
    ref = np.empty(count, np.int64)
    WORLD.Reduce_scatter_block(x, ref)
    for send in (MPI.IN_PLACE, None):
        y = x.copy()
        comm.Reduce_scatter_block(send, y, algorithm=algorithm)
        check(np.array_equal(y[:count], ref), f"{algorithm}: in place result")
        check(np.array_equal(y[count:], x[count:]), f"{algorithm}: in place wrote past the result")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce_scatter"))
@pytest.mark.parametrize("scale", [0, 1, 2, 333])
def test_uneven_matches_builtin(comm, algorithm, scale):
    counts = uneven(scale)
    x = data(sum(counts))
    x0 = x.copy()
    out = np.full(counts[R] + 2, -99.0)            # guard cells after the result
    ref = np.empty(counts[R])
    comm.Reduce_scatter(x, [out, counts[R], MPI.DOUBLE], counts, algorithm=algorithm)
    WORLD.Reduce_scatter(x, ref, counts)
    check(np.array_equal(out[:counts[R]], ref), f"{algorithm}: differs from built-in")
    check(np.all(out[counts[R]:] == -99.0), f"{algorithm}: wrote past recvcounts[{R}]")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce_scatter"))
def test_uneven_in_place_and_counts_none(comm, algorithm):
    counts = uneven(3)
    x = data(sum(counts), np.int32)
    ref = np.empty(counts[R], np.int32)
    WORLD.Reduce_scatter(x, ref, counts)
    y = x.copy()
    comm.Reduce_scatter(MPI.IN_PLACE, y, counts, algorithm=algorithm)
    check(np.array_equal(y[:counts[R]], ref) and np.array_equal(y[counts[R]:], x[counts[R]:]), "in place")
    out = np.empty(counts[R], np.int32)
    comm.Reduce_scatter(x, out, None, algorithm=algorithm)      # counts from every rank's recvbuf
    check(np.array_equal(out, ref), "recvcounts=None")


@pytest.mark.parametrize("dtype", ["int8", "uint32", "float16", "float32", "complex64"])
@pytest.mark.parametrize("opname", ["SUM", "MAX", "PROD"])
def test_dtypes_and_ops(comm, dtype, opname):
    op = getattr(MPI, opname)
    if opname == "MAX" and dtype == "complex64":
        pytest.skip("MAX is not defined for complex")
    x = data(3 * P, dtype) + 1
    wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    total = np.empty_like(wide)
    WORLD.Allreduce(wide, total, op=op)
    expected = total[3 * R:3 * R + 3].astype(dtype)
    for algorithm in mpicoll.algorithms("reduce_scatter_block"):
        out = np.zeros(3, dtype)
        comm.Reduce_scatter_block(x, out, op=op, algorithm=algorithm)
        check(np.array_equal(out, expected), f"{algorithm} {dtype} {opname}")


def concat(a, b):
    """Digits: b = a o b, associative, not commutative: the order is visible in the result."""
    b[...] = a * 10 ** (np.floor(np.log10(np.maximum(b, 1))) + 1) + b


def sequential_fold(everyone: list[np.ndarray]) -> np.ndarray:
    acc = everyone[0].copy()
    for other in everyone[1:]:
        nxt = other.copy()
        concat(acc, nxt)
        acc = nxt
    return acc


def test_non_commutative_in_rank_order(comm):
    if P > 8:
        pytest.skip("digit strings overflow beyond 8 ranks")
    op = mpicoll.Op(concat, commute=False)
    counts = uneven(2)
    x = np.full(sum(counts), R + 1, dtype=np.float64)  # rank r contributes the digit r + 1
    expected = sequential_fold(WORLD.allgather(x))
    lo = sum(counts[:R])
    for algorithm in ["auto", *[a for a in mpicoll.algorithms("reduce_scatter")
                                if mpicoll.families.registry.get("reduce_scatter", a).keeps_order(P)]]:
        out = np.empty(counts[R])
        comm.Reduce_scatter(x, out, counts, op=op, algorithm=algorithm)
        check(np.array_equal(out, expected[lo:lo + counts[R]]), f"{algorithm}: not in rank order")
    xb = np.full(2 * P, R + 1, dtype=np.float64)
    expected = sequential_fold(WORLD.allgather(xb))
    for algorithm in ["auto", *[a for a in mpicoll.algorithms("reduce_scatter_block")
                                if mpicoll.families.registry.get("reduce_scatter_block", a).keeps_order(P)]]:
        out = np.empty(2)
        comm.Reduce_scatter_block(xb, out, op=op, algorithm=algorithm)
        check(np.array_equal(out, expected[2 * R:2 * R + 2]), f"{algorithm}: not in rank order")
    if P > 1:
        with pytest.raises(ValueError, match="not commutative"):
            comm.Reduce_scatter_block(xb, np.empty(2), op=op, algorithm="ring")


def test_split_subcommunicator(comm):
    sub = comm.Split(R % 2, R)
    try:
        counts = [1 + j % 3 for j in range(sub.size)]
        x = data(sum(counts), np.int64)
        for algorithm in mpicoll.algorithms("reduce_scatter"):
            out, ref = np.empty(counts[sub.rank], np.int64), np.empty(counts[sub.rank], np.int64)
            sub.Reduce_scatter(x, out, counts, algorithm=algorithm)
            MPI.Intracomm.Reduce_scatter(sub, x, ref, counts)
            check(np.array_equal(out, ref), algorithm)
    finally:
        sub.Free()


class TestErrors:
    def test_block_send_not_divisible(self, comm):
        with pytest.raises(ValueError, match="sendbuf"):
            comm.Reduce_scatter_block(np.zeros(2 * P + 1), np.zeros(2))

    def test_block_count_mismatch(self, comm):
        with pytest.raises(ValueError, match="sendbuf"):
            comm.Reduce_scatter_block(np.zeros(2 * P), np.zeros(3))

    def test_sum_of_counts(self, comm):
        with pytest.raises(ValueError, match="sum\\(recvcounts\\)"):
            comm.Reduce_scatter(np.zeros(2 * P + 1), np.zeros(2), [2] * P)

    def test_own_count(self, comm):
        with pytest.raises(ValueError, match="recvcounts"):
            comm.Reduce_scatter(np.zeros(2 * P), np.zeros(5), [2] * P)

    def test_number_of_counts(self, comm):
        with pytest.raises(ValueError, match="recvcounts"):
            comm.Reduce_scatter(np.zeros(2 * P), np.zeros(2), [2] * (P + 1))

    def test_counts_not_a_sequence(self, comm):
        with pytest.raises(TypeError, match="recvcounts"):
            comm.Reduce_scatter(np.zeros(2 * P), np.zeros(2), 2)

    def test_in_place_needs_counts(self, comm):
        with pytest.raises(TypeError, match="recvcounts"):
            comm.Reduce_scatter(MPI.IN_PLACE, np.zeros(2 * P), None)

    def test_bad_op(self, comm):
        with pytest.raises(TypeError, match="BAND"):
            comm.Reduce_scatter_block(np.zeros(P), np.zeros(1), op=MPI.BAND)
