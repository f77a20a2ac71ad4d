"""Allreduce against MPI's built-in, at whatever size mpirun gave us."""

from __future__ import annotations

import array
import warnings

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check, same_bits_everywhere

pytestmark = pytest.mark.mpi

P = WORLD.size
ALGORITHMS = mpicoll.algorithms("allreduce")
COUNTS = sorted({0, 1, max(P - 1, 0), P, P + 1, 1001})


def data(count: int, dtype, seed: int = 0) -> np.ndarray:
    """Small integers in ``dtype``: sums are exact in every type and every order."""
    rng = np.random.default_rng(1000 * WORLD.rank + seed)
    values = rng.integers(0, 4, size=count)
    return values.astype(dtype)


def builtin(x: np.ndarray, op=MPI.SUM) -> np.ndarray:
    out = np.empty_like(x)
    WORLD.Allreduce(x, out, op=op)
    return out


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("count", COUNTS)
def test_matches_builtin_and_is_identical_everywhere(comm, algorithm, count):
    x = data(count, np.float64)
    x0 = x.copy()
    out = np.full(count, np.nan)
    comm.Allreduce(x, out, algorithm=algorithm)
    check(np.array_equal(out, builtin(x)), f"{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")
    check(same_bits_everywhere(out), "ranks hold different bits")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_random_floats_within_tolerance_and_identical(comm, algorithm):
    rng = np.random.default_rng(WORLD.rank)
    x = rng.standard_normal(4097)
    out = np.empty_like(x)
    comm.Allreduce(x, out, algorithm=algorithm)
    check(np.allclose(out, builtin(x), rtol=1e-12, atol=1e-12), "beyond tolerance 1e-12")
    check(same_bits_everywhere(out), "ranks hold different bits")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("count", [1, P + 1, 1001])
def test_in_place(comm, algorithm, count):
    x = data(count, np.int64)
    expected = builtin(x)
    y = x.copy()
    comm.Allreduce(MPI.IN_PLACE, y, algorithm=algorithm)
    z = x.copy()
    comm.Allreduce(None, z, algorithm=algorithm)
    check(np.array_equal(y, expected) and np.array_equal(z, expected), "in-place result differs")


DTYPES = ["int8", "uint8", "int16", "int32", "int64", "uint64", "float16", "float32", "float64",
          "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner", "double_binary_tree"])
def test_dtypes(comm, dtype, algorithm):
    x = data(P + 3, dtype)
    out = np.empty_like(x)
    comm.Allreduce(x, out, algorithm=algorithm)
    expected = WORLD.allreduce(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
    check(np.array_equal(out, expected.astype(dtype)), f"{dtype}")


def test_bfloat16(comm):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = data(257, ml_dtypes.bfloat16)
    for algorithm in ALGORITHMS:
        out = np.empty_like(x)
        comm.Allreduce(x, out, algorithm=algorithm)
        expected = WORLD.allreduce(x.astype(np.float64))
        check(np.array_equal(out.astype(np.float64), expected), algorithm)


@pytest.mark.parametrize("opname", ["SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_predefined_ops_on_integers(comm, opname, algorithm):
    op = getattr(MPI, opname)
    x = data(P + 5, np.int32, seed=7) + (1 if opname == "PROD" else 0)
    out = np.empty_like(x)
    comm.Allreduce(x, out, op=op, algorithm=algorithm)
    check(np.array_equal(out, builtin(x, op)), f"{opname}")


@pytest.mark.parametrize("opname", ["MINLOC", "MAXLOC"])
@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling", "double_binary_tree", "linear"])
def test_minloc_maxloc(comm, opname, algorithm):
    from mpi4py.util import dtlib

    dtype = dtlib.to_numpy_dtype(MPI.DOUBLE_INT)
    x = np.zeros(9, dtype)
    x["f0"] = data(9, np.float64, seed=3)   # ties on purpose: the smaller index must win
    x["f1"] = WORLD.rank
    out = np.zeros_like(x)
    ref = np.zeros_like(x)
    comm.Allreduce([x, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=getattr(MPI, opname), algorithm=algorithm)
    WORLD.Allreduce([x, MPI.DOUBLE_INT], [ref, MPI.DOUBLE_INT], op=getattr(MPI, opname))
    check(np.array_equal(out, ref), opname)


@pytest.mark.parametrize("opname", ["MINLOC", "MAXLOC"])
def test_minloc_maxloc_with_other_field_names(comm, opname):
    """A pair dtype whose fields are not named f0/f1 (value "b", index "a") reduces as MPI.DOUBLE_INT does."""
    from mpi4py.util import dtlib

    mpi4py_pairs = dtlib.to_numpy_dtype(MPI.DOUBLE_INT)
    named = np.dtype({"names": ["b", "a"], "formats": [mpi4py_pairs[0], mpi4py_pairs[1]],
                      "offsets": [mpi4py_pairs.fields[name][1] for name in mpi4py_pairs.names],
                      "itemsize": mpi4py_pairs.itemsize})
    x = np.zeros(P + 4, named)
    x["b"] = data(P + 4, np.float64, seed=4)   # ties on purpose: the smaller index must win
    x["a"] = (3 * WORLD.rank + 1) % (P + 2)
    ref = np.zeros(P + 4, mpi4py_pairs)
    WORLD.Allreduce([x.view(mpi4py_pairs), MPI.DOUBLE_INT], [ref, MPI.DOUBLE_INT], op=getattr(MPI, opname))
    for algorithm in ["auto", *ALGORITHMS]:
        out = np.zeros_like(x)
        comm.Allreduce(x, out, op=getattr(MPI, opname), algorithm=algorithm)
        check(out.view(mpi4py_pairs).tolist() == ref.tolist(), f"{algorithm} {opname}")


def _max_min_every_way(comm, op, x) -> list[np.ndarray]:
    """``op`` on ``x``: each algorithm's first call (a miss) and second (a hit), Iallreduce, and a persistent one."""
    results = []
    for algorithm in ALGORITHMS:
        for _ in range(2):
            results.append(np.empty_like(x))
            comm.Allreduce(x, results[-1], op=op, algorithm=algorithm)
    results.append(np.empty_like(x))
    comm.Iallreduce(x, results[-1], op=op).Wait()
    results.append(np.empty_like(x))
    persistent = comm.Allreduce_init(x, results[-1], op=op)
    persistent.Start()
    persistent.Wait()
    persistent.Free()
    return results


@pytest.mark.parametrize("opname", ["MAX", "MIN"])
def test_max_and_min_under_deprecation_warnings_as_errors(opname):
    """As under ``python -W error::DeprecationWarning``: NumPy 2.4 deprecates ``np.maximum(a, b, out)``.

    The filter is installed here, around the calls, because a warning raised
    inside the compiled call path is attributed to the caller's module (this
    test), which the suite's ``error::DeprecationWarning:mpicoll`` filter would not
    match.  A fresh communicator, so that the first calls prepare their plans.
    """
    op = getattr(MPI, opname)
    x = data(P + 5, np.float64, seed=5) - 1.5
    want = builtin(x, op)
    comm = mpicoll.Comm(WORLD.Dup())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            results = _max_min_every_way(comm, op, x)
        error = ""
    except DeprecationWarning as exc:
        results, error = [], f"DeprecationWarning: {exc}"
    finally:
        comm.Free()
    check(not error, error)
    check(all(np.array_equal(out, want) for out in results), f"{opname}: a result differs from the built-in")


def matmul2(invec, inoutvec):
    """2x2 matrix product on flattened matrices: inoutvec = invec @ inoutvec (not commutative)."""
    a = invec.reshape(-1, 2, 2)
    b = inoutvec.reshape(-1, 2, 2)
    inoutvec[...] = (a @ b).reshape(inoutvec.shape)


def ordered_algorithms():
    return [a for a in ALGORITHMS if mpicoll.families.registry.get("allreduce", a).keeps_order(P)]


@pytest.mark.parametrize("nmat", [1, P + 1, 300])
def test_non_commutative_user_op_in_rank_order(comm, nmat):
    rng = np.random.default_rng(WORLD.rank + 11)
    x = rng.integers(-2, 3, size=4 * nmat).astype(np.float64)
    everyone = WORLD.allgather(x)
    expected = everyone[0].copy()
    for other in everyone[1:]:
        nxt = other.copy()
        matmul2(expected, nxt)       # expected = expected @ other
        expected = nxt
    op = mpicoll.Op(matmul2, commute=False)
    matrix = MPI.DOUBLE.Create_contiguous(4).Commit()  # one element = one 2x2 matrix, never split
    for algorithm in ["auto", *ordered_algorithms()]:
        out = np.empty_like(x)
        comm.Allreduce([x, matrix], [out, matrix], op=op, algorithm=algorithm)
        check(np.array_equal(out, expected), f"{algorithm}: not in rank order")
        check(same_bits_everywhere(out), f"{algorithm}: ranks differ")
    matrix.Free()


def test_algorithms_that_cannot_keep_order_refuse_non_commutative_ops(comm):
    op = mpicoll.Op(matmul2, commute=False)
    for algorithm in ALGORITHMS:
        if algorithm in ordered_algorithms():
            continue
        with pytest.raises(ValueError, match="not commutative"):
            comm.Allreduce(np.zeros(4), np.zeros(4), op=op, algorithm=algorithm)


def test_mpi_op_create(comm):
    def absmax(inbuf, inoutbuf, datatype):
        a = np.frombuffer(inbuf, dtype=np.float64)
        b = np.frombuffer(inoutbuf, dtype=np.float64)
        np.copyto(b, np.maximum(np.abs(a), np.abs(b)))

    op = MPI.Op.Create(absmax, commute=True)
    try:
        x = data(P + 2, np.float64) - 2
        for algorithm in ALGORITHMS:
            out = np.empty_like(x)
            comm.Allreduce(x, out, op=op, algorithm=algorithm)
            check(np.array_equal(out, builtin(np.abs(x), MPI.MAX)), algorithm)
    finally:
        op.Free()


def test_buffer_forms(comm):
    x = data(12, np.float64)
    expected = builtin(x)
    out = np.zeros(12)
    comm.Allreduce([x, MPI.DOUBLE], [out, MPI.DOUBLE])
    check(np.array_equal(out, expected), "[buf, datatype]")
    out = np.zeros(12)
    comm.Allreduce([x, 5, MPI.DOUBLE], (out, np.int64(5), "d"))
    check(np.array_equal(out[:5], expected[:5]) and not out[5:].any(), "[buf, count, datatype]")
    out = np.zeros(12)
    comm.Allreduce([x, (4, 3), MPI.DOUBLE], [out, 4, 3, MPI.DOUBLE])
    check(np.array_equal(out[3:7], expected[3:7]) and not out[:3].any() and not out[7:].any(), "displacements")
    a = array.array("i", data(7, np.int32).tolist())
    b = array.array("i", [0] * 7)
    comm.Allreduce(a, b)
    check(list(b) == builtin(np.array(a, dtype=np.int32)).tolist(), "array.array")
    raw = bytearray(np.arange(6, dtype=np.int32).tobytes())
    res = bytearray(24)
    comm.Allreduce([raw, MPI.INT], [res, MPI.INT])
    check(np.array_equal(np.frombuffer(res, np.int32), np.arange(6) * P), "bytes with explicit datatype")
    # an explicit datatype wins: 4 doubles read as 8 floats
    f = np.ones(4)
    g = np.zeros(4)
    comm.Allreduce([f, MPI.FLOAT], [g, MPI.FLOAT])
    check(np.array_equal(g.view(np.float32), np.ones(4).view(np.float32) * P), "explicit datatype")


def test_split_subcommunicator(comm):
    sub = comm.Split(WORLD.rank % 2, WORLD.rank)
    try:
        check(isinstance(sub, mpicoll.Comm), "Split must return a mpicoll.Comm")
        x = data(33, np.int64)
        out = np.empty_like(x)
        ref = np.empty_like(x)
        for algorithm in ALGORITHMS:
            sub.Allreduce(x, out, algorithm=algorithm)
            MPI.Intracomm.Allreduce(sub, x, ref)
            check(np.array_equal(out, ref), algorithm)
        dup = sub.Dup()
        check(isinstance(dup, mpicoll.Comm) and dup.size == sub.size, "Dup must return a mpicoll.Comm")
        dup.Free()
    finally:
        sub.Free()


def test_user_traffic_does_not_mix_with_collective_traffic(comm):
    if P < 2:
        pytest.skip("needs two ranks")
    # a pending user receive on the user's communicator must not catch mpicoll's messages
    msg = np.zeros(4)
    req = comm.Irecv(msg, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) if WORLD.rank == 0 else None
    x = data(100, np.float64)
    out = np.empty_like(x)
    comm.Allreduce(x, out, algorithm="linear")
    check(np.array_equal(out, builtin(x)), "result")
    if WORLD.rank == 1:
        comm.Send(np.full(4, 7.0), dest=0, tag=5)
    if WORLD.rank == 0:
        req.Wait()
    check(WORLD.rank != 0 or np.all(msg == 7.0), "user message")


class TestErrors:
    """Bad arguments raise on every rank before any message is sent."""

    def test_count_mismatch(self, comm):
        with pytest.raises(ValueError, match="recvbuf"):
            comm.Allreduce(np.zeros(4), np.zeros(3))

    def test_dtype_mismatch(self, comm):
        with pytest.raises(TypeError, match="dtype"):
            comm.Allreduce(np.zeros(4), np.zeros(4, np.float32))

    def test_unknown_algorithm(self, comm):
        with pytest.raises(ValueError, match="no algorithm 'nope'"):
            comm.Allreduce(np.zeros(4), np.zeros(4), algorithm="nope")

    def test_op_not_defined_for_dtype(self, comm):
        with pytest.raises(TypeError, match="BAND"):
            comm.Allreduce(np.zeros(4), np.zeros(4), op=MPI.BAND)

    def test_not_an_op(self, comm):
        with pytest.raises(TypeError, match="op"):
            comm.Allreduce(np.zeros(4), np.zeros(4), op="sum")

    def test_read_only_recvbuf(self, comm):
        out = np.zeros(4)
        out.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            comm.Allreduce(np.zeros(4), out)
        with pytest.raises(ValueError, match="read-only"):
            comm.Allreduce(np.zeros(4), b"\0" * 32)

    def test_environment_forces_algorithm(self, comm, monkeypatch):
        monkeypatch.setenv("MPICOLL_ALGO", "allreduce=bogus")
        with pytest.raises(ValueError, match="MPICOLL_ALGO"):
            comm.Allreduce(np.zeros(4), np.zeros(4))
        monkeypatch.setenv("MPICOLL_ALGO", "bcast=binomial,allreduce=linear")
        x = data(10, np.int64)
        out = np.empty_like(x)
        comm.Allreduce(x, out)
        check(np.array_equal(out, builtin(x)), "forced linear")

    def test_debug_mode_names_disagreeing_ranks(self, comm, monkeypatch):
        if P < 2:
            pytest.skip("needs two ranks")
        monkeypatch.setenv("MPICOLL_DEBUG", "1")
        comm = mpicoll.Comm(WORLD.Dup())     # a communicator made in debug mode checks every call
        n = 5 if WORLD.rank == P - 1 else 4
        with pytest.raises(mpicoll.MismatchError, match=f"count \\(elements\\): .*rank {P - 1} 5") as err:
            comm.Allreduce(np.zeros(n), np.zeros(n))
        assert err.value.collective == "Allreduce"
        assert err.value.fields == {"count": {4: list(range(P - 1)), 5: [P - 1]}}
