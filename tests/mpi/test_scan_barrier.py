"""Scan, Exscan and Barrier against MPI's built-in."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
COUNTS = sorted({0, 1, max(P - 1, 0), P, P + 1, 1001})
SENTINEL = -5.0


def data(count: int, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(R + 17)
    return rng.integers(0, 4, size=count).astype(dtype)


@pytest.mark.parametrize("method", ["Scan", "Exscan"])
@pytest.mark.parametrize("algorithm", ["auto", "linear", "recursive_doubling"])
@pytest.mark.parametrize("count", COUNTS)
def test_matches_builtin(comm, method, algorithm, count):
    x = data(count)
    x0 = x.copy()
    out = np.full(count, SENTINEL)
    ref = np.full(count, SENTINEL)
    getattr(comm, method)(x, out, algorithm=algorithm)
    getattr(WORLD, method)(x, ref)
    if method == "Exscan" and R == 0:
        check(np.all(out == SENTINEL), "rank 0's Exscan recvbuf must stay untouched")
    else:
        check(np.array_equal(out, ref), f"{method}/{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("method", ["Scan", "Exscan"])
@pytest.mark.parametrize("algorithm", ["linear", "recursive_doubling"])
def test_in_place(comm, method, algorithm):
    x = data(P + 3, np.int64)
    ref = np.empty_like(x)
    getattr(WORLD, method)(x, ref)
    for send in (MPI.IN_PLACE, None):
        y = x.copy()
        getattr(comm, method)(send, y, algorithm=algorithm)
        expected = x if (method == "Exscan" and R == 0) else ref
        check(np.array_equal(y, expected), f"{method}/{algorithm}: in place ({send})")


@pytest.mark.parametrize("dtype", ["int8", "uint32", "float16", "float32", "complex64"])
@pytest.mark.parametrize("opname", ["SUM", "PROD", "MAX", "BXOR"])
def test_dtypes_and_ops(comm, dtype, opname):
    op = getattr(MPI, opname)
    kind = np.dtype(dtype).kind
    if (opname == "MAX" and kind == "c") or (opname == "BXOR" and kind in "fc"):
        pytest.skip("op not defined for this type")
    x = data(7, dtype) + (1 if opname == "PROD" else 0)
    wide = x.astype(np.complex128 if kind == "c" else np.float64 if kind == "f" else np.int64)
    ref = np.empty_like(wide)
    WORLD.Scan(wide, ref, op=op)
    for algorithm in mpicoll.algorithms("scan"):
        out = np.zeros_like(x)
        comm.Scan(x, out, op=op, algorithm=algorithm)
        check(np.array_equal(out, ref.astype(dtype)), f"{algorithm} {dtype} {opname}")


def matmul2(invec, inoutvec):
    """2x2 matrix products on flattened matrices: inoutvec = invec @ inoutvec (not commutative)."""
    inoutvec[...] = (invec.reshape(-1, 2, 2) @ inoutvec.reshape(-1, 2, 2)).reshape(inoutvec.shape)


@pytest.mark.parametrize("method", ["Scan", "Exscan"])
def test_non_commutative_in_rank_order(comm, method):
    rng = np.random.default_rng(R + 3)
    x = rng.integers(-2, 3, size=4 * 5).astype(np.float64)
    everyone = WORLD.allgather(x)
    upto = R + 1 if method == "Scan" else R
    expected = None
    for other in everyone[:upto]:     # sequential fold in rank order
        if expected is None:
            expected = other.copy()
        else:
            nxt = other.copy()
            matmul2(expected, nxt)
            expected = nxt
    op = mpicoll.Op(matmul2, commute=False)
    matrix = MPI.DOUBLE.Create_contiguous(4).Commit()
    try:
        for algorithm in mpicoll.algorithms(method.lower()):
            out = np.full_like(x, SENTINEL)
            getattr(comm, method)([x, matrix], [out, matrix], op=op, algorithm=algorithm)
            ok = np.all(out == SENTINEL) if expected is None else np.array_equal(out, expected)
            check(ok, f"{method}/{algorithm}: not in rank order")
    finally:
        matrix.Free()


def test_split_subcommunicator(comm):
    sub = comm.Split(R % 2, -R)
    try:
        x = data(9, np.int64)
        for method in ("Scan", "Exscan"):
            for algorithm in mpicoll.algorithms(method.lower()):
                out, ref = np.zeros_like(x), np.zeros_like(x)
                getattr(sub, method)(x, out, algorithm=algorithm)
                getattr(MPI.Intracomm, method)(sub, x, ref)
                check(sub.rank == 0 and method == "Exscan" or np.array_equal(out, ref), f"{method}/{algorithm}")
        for algorithm in mpicoll.algorithms("barrier"):
            sub.Barrier(algorithm=algorithm)
    finally:
        sub.Free()


class TestScanErrors:
    def test_count_mismatch(self, comm):
        with pytest.raises(ValueError, match="recvbuf"):
            comm.Scan(np.zeros(4), np.zeros(3))

    def test_dtype_mismatch(self, comm):
        with pytest.raises(TypeError, match="dtype"):
            comm.Exscan(np.zeros(4), np.zeros(4, np.float32))

    def test_bad_op(self, comm):
        with pytest.raises(TypeError, match="op"):
            comm.Scan(np.zeros(4), np.zeros(4), op="sum")

    def test_unknown_algorithm(self, comm):
        with pytest.raises(ValueError, match="no algorithm"):
            comm.Barrier(algorithm="nope")


@pytest.mark.parametrize("algorithm", ["auto", *mpicoll.algorithms("barrier")])
def test_barrier_synchronizes(comm, algorithm):
    """The last rank sleeps 0.2 s before the barrier: nobody may leave it before that rank arrived.

    Times are read from the system's monotonic clock, one clock for every process of this machine (the
    emulated hosts of the test bed too), so the check does not depend on when each rank left the barrier
    before (the built-in's exits may be tens of ms apart over the test bed's shaped links).
    """
    if P < 2:
        comm.Barrier(algorithm=algorithm)
        pytest.skip("needs two ranks to observe")
    WORLD.Barrier()
    if R == P - 1:
        time.sleep(0.2)
    arrived = time.monotonic()
    comm.Barrier(algorithm=algorithm)
    left = time.monotonic()
    last_arrived = WORLD.bcast(arrived, root=P - 1)
    check(left >= last_arrived, f"{algorithm}: left the barrier {last_arrived - left:.3f} s before the last rank "
          "arrived")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("barrier"))
def test_barrier_repeated_and_mixed_with_user_traffic(comm, algorithm):
    for _ in range(20):
        comm.Barrier(algorithm=algorithm)
    if P > 1:   # a pending user receive must not catch the barrier's empty messages
        msg = np.zeros(1)
        req = comm.Irecv(msg, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) if R == 0 else None
        comm.Barrier(algorithm=algorithm)
        if R == 1:
            comm.Send(np.ones(1), dest=0, tag=3)
        if R == 0:
            req.Wait()
        check(R != 0 or msg[0] == 1.0, "user message")
