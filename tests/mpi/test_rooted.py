"""Rooted collectives (Bcast, Reduce, Gather, Gatherv, Scatter, Scatterv) against MPI's built-ins."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P = WORLD.size
R = WORLD.rank
ROOTS = sorted({0, P - 1})
COUNTS = sorted({0, 1, max(P - 1, 0), P, P + 1, 1001})
SENTINEL = -99.0


def algs(collective: str) -> list[str]:
    return ["auto", *mpicoll.algorithms(collective)]


def data(count: int, dtype=np.float64, seed: int = 0, rank: int = R) -> np.ndarray:
    """Small integers in ``dtype``: sums are exact in every type and every order."""
    rng = np.random.default_rng(1000 * rank + seed)
    return rng.integers(0, 4, size=count).astype(dtype)


# -- Bcast ----------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", algs("bcast"))
@pytest.mark.parametrize("root", ROOTS)
def test_bcast(comm, algorithm, root):
    for count in COUNTS:
        check_bcast(comm, algorithm, count, root)


def check_bcast(comm, algorithm, count, root):
    x = data(count, seed=root)
    expected = x.copy()
    WORLD.Bcast(expected, root=root)
    if R == root:
        x.flags.writeable = False  # the root's buffer is only read
    comm.Bcast(x, root=root, algorithm=algorithm)
    check(np.array_equal(x, expected), f"{algorithm}: differs from built-in")


# -- Reduce ---------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", algs("reduce"))
@pytest.mark.parametrize("root", ROOTS)
def test_reduce(comm, algorithm, root):
    for count in COUNTS:
        check_reduce(comm, algorithm, count, root)


def check_reduce(comm, algorithm, count, root):
    x = data(count)
    x0 = x.copy()
    expected = np.empty_like(x)
    WORLD.Reduce(x, expected, root=root)
    out = np.full(count, np.nan)
    comm.Reduce(x, out if R == root else None, root=root, algorithm=algorithm)
    check(R != root or np.array_equal(out, expected), f"{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")
    untouched = np.full(count, SENTINEL)  # a non-root's recvbuf is never written
    comm.Reduce(x, untouched if R != root else out, root=root, algorithm=algorithm)
    check(R == root or np.all(untouched == SENTINEL), "a non-root recvbuf was written")


@pytest.mark.parametrize("algorithm", algs("reduce"))
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("count", [1, P + 1, 1001])
def test_reduce_in_place(comm, algorithm, root, count):
    x = data(count, np.int64)
    expected = np.empty_like(x)
    WORLD.Reduce(x, expected, root=root)
    for in_place in (MPI.IN_PLACE, None):
        y = x.copy()
        if R == root:
            comm.Reduce(in_place, y, root=root, algorithm=algorithm)
        else:
            comm.Reduce(y, None, root=root, algorithm=algorithm)
        check(R != root or np.array_equal(y, expected), f"{algorithm}: in-place result differs")
        check(R == root or np.array_equal(y, x), "sendbuf was modified")


def matmul2(invec, inoutvec):
    """2x2 matrix product on flattened matrices: inoutvec = invec @ inoutvec (not commutative)."""
    inoutvec[...] = (invec.reshape(-1, 2, 2) @ inoutvec.reshape(-1, 2, 2)).reshape(inoutvec.shape)


@pytest.mark.parametrize("algorithm", algs("reduce"))
@pytest.mark.parametrize("root", sorted({0, P // 2, P - 1}))
def test_reduce_non_commutative_in_rank_order(comm, algorithm, root):
    nmat = P + 2
    x = np.random.default_rng(R + 11).integers(-2, 3, size=4 * nmat).astype(np.float64)
    everyone = WORLD.allgather(x)
    expected = everyone[0].copy()
    for other in everyone[1:]:  # sequential fold: ((x0 @ x1) @ x2) ...
        nxt = other.copy()
        matmul2(expected, nxt)
        expected = nxt
    op = mpicoll.Op(matmul2, commute=False)
    if algorithm != "auto" and not mpicoll.families.registry.get("reduce", algorithm).keeps_order(P):
        with pytest.raises(ValueError, match="not commutative"):  # refused before any message
            comm.Reduce(x, np.zeros_like(x), op=op, root=root, algorithm=algorithm)
        return
    matrix = MPI.DOUBLE.Create_contiguous(4).Commit()  # one element = one matrix, never split
    try:
        out = np.zeros_like(x)
        comm.Reduce([x, matrix], [out, matrix] if R == root else None, op=op, root=root, algorithm=algorithm)
        check(R != root or np.array_equal(out, expected), f"{algorithm}: not in rank order")
    finally:
        matrix.Free()


@pytest.mark.parametrize("opname", ["PROD", "MAX", "BXOR", "LOR"])
def test_reduce_ops(comm, opname):
    x = data(P + 5, np.int32, seed=3) + (1 if opname == "PROD" else 0)
    expected = np.empty_like(x)
    WORLD.Reduce(x, expected, op=getattr(MPI, opname), root=P - 1)
    for algorithm in mpicoll.algorithms("reduce"):
        out = np.zeros_like(x)
        comm.Reduce(x, out, op=getattr(MPI, opname), root=P - 1, algorithm=algorithm)
        check(R != P - 1 or np.array_equal(out, expected), f"{algorithm} {opname}")


def pair_dtype(names: tuple[str, str]) -> np.dtype:
    """MPI.DOUBLE_INT's layout with its fields named ``names`` (value first, then index)."""
    from mpi4py.util import dtlib

    base = dtlib.to_numpy_dtype(MPI.DOUBLE_INT)
    return np.dtype({"names": list(names), "formats": [base[0], base[1]], "itemsize": base.itemsize,
                     "offsets": [base.fields[name][1] for name in base.names]})


@pytest.mark.parametrize("names", [("value", "index"), ("b", "a")])
@pytest.mark.parametrize("opname", ["MINLOC", "MAXLOC"])
def test_reduce_minloc_maxloc_whatever_the_field_names(comm, opname, names):
    """A pair is read by position: fields not named f0/f1 (here also in reverse alphabetical order) reduce
    as the built-in does on the same bytes as MPI.DOUBLE_INT, at every rank, with every algorithm."""
    dtype, mpi4py_pairs = pair_dtype(names), pair_dtype(("f0", "f1"))
    x = np.zeros(P + 6, dtype)
    x[names[0]] = data(P + 6, seed=5)       # ties on purpose: the smaller index must win
    x[names[1]] = (5 * R + 2) % (P + 3)     # indices not in rank order
    op, root = getattr(MPI, opname), P // 2
    expected = np.zeros(P + 6, mpi4py_pairs)
    WORLD.Reduce([x.view(mpi4py_pairs), MPI.DOUBLE_INT], [expected, MPI.DOUBLE_INT], op=op, root=root)
    for algorithm in algs("reduce"):
        out = np.zeros_like(x)
        comm.Reduce(x, out, op=op, root=root, algorithm=algorithm)
        check(R != root or out.view(mpi4py_pairs).tolist() == expected.tolist(), f"{algorithm} {opname} {names}")


# -- Gather / Scatter -----------------------------------------------------------------


@pytest.mark.parametrize("algorithm", algs("gather"))
@pytest.mark.parametrize("root", ROOTS)
def test_gather(comm, algorithm, root):
    for count in COUNTS:
        check_gather(comm, algorithm, count, root)


def check_gather(comm, algorithm, count, root):
    x = data(count)
    x0 = x.copy()
    expected = np.empty(P * count)
    WORLD.Gather(x, expected, root=root)
    out = np.full(P * count, np.nan)
    comm.Gather(x, out if R == root else None, root=root, algorithm=algorithm)
    check(R != root or np.array_equal(out, expected), f"{algorithm}: differs from built-in")
    check(np.array_equal(x, x0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", algs("gather"))
@pytest.mark.parametrize("root", ROOTS)
def test_gather_in_place_and_explicit_count(comm, algorithm, root):
    count = P + 1
    x = data(count)
    expected = np.empty(P * count)
    WORLD.Gather(x, expected, root=root)
    for in_place in (MPI.IN_PLACE, None):
        out = np.full(P * count, np.nan)
        out[root * count:(root + 1) * count] = x
        comm.Gather(in_place if R == root else x, out if R == root else None, root=root, algorithm=algorithm)
        check(R != root or np.array_equal(out, expected), f"{algorithm}: in place")
    big = np.full(P * count + 3, SENTINEL)  # [buf, count, datatype]: count per rank, the rest untouched
    comm.Gather(x, [big, count, MPI.DOUBLE] if R == root else None, root=root, algorithm=algorithm)
    check(R != root or (np.array_equal(big[:P * count], expected) and np.all(big[P * count:] == SENTINEL)),
          "explicit count")


@pytest.mark.parametrize("algorithm", algs("scatter"))
@pytest.mark.parametrize("root", ROOTS)
def test_scatter(comm, algorithm, root):
    for count in COUNTS:
        check_scatter(comm, algorithm, count, root)


def check_scatter(comm, algorithm, count, root):
    full = data(P * count, seed=5)
    full0 = full.copy()
    expected = np.empty(count)
    WORLD.Scatter(full, expected, root=root)
    out = np.full(count, np.nan)
    comm.Scatter(full if R == root else None, out, root=root, algorithm=algorithm)
    check(np.array_equal(out, expected), f"{algorithm}: differs from built-in")
    check(np.array_equal(full, full0), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", algs("scatter"))
@pytest.mark.parametrize("root", ROOTS)
def test_scatter_in_place(comm, algorithm, root):
    count = P + 1
    full = data(P * count, seed=6)
    expected = np.empty(count)
    WORLD.Scatter(full, expected, root=root)
    for in_place in (MPI.IN_PLACE, None):
        y = full.copy()
        out = np.full(count, np.nan)
        comm.Scatter(y if R == root else None, in_place if R == root else out, root=root, algorithm=algorithm)
        check(np.array_equal(y if R == root else out,
                             full if R == root else expected), f"{algorithm}: in place")


# -- v-variants: guard cells around every block must stay untouched ---------------------


def v_layout(gap: int = 2) -> tuple[list[int], list[int], int]:
    """Counts r % 3 (some zero), blocks in reverse rank order with ``gap`` guard cells between."""
    counts = [r % 3 + (r == P - 1) for r in range(P)]
    displs, pos = [0] * P, gap
    for r in reversed(range(P)):
        displs[r] = pos
        pos += counts[r] + gap
    return counts, displs, pos


@pytest.mark.parametrize("algorithm", algs("gatherv"))
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("form", ["counts_displs", "pair", "datatype", "counts_only", "raw"])
def test_gatherv(comm, algorithm, root, form):
    counts, displs, total = v_layout()
    if form in ("counts_only", "raw"):
        counts = [P - 1 + 2 * (form == "raw")] * P if form == "raw" else counts
        displs, total = list(np.cumsum([0] + counts[:-1])), sum(counts)
    x = data(counts[R], seed=9)
    x0 = x.copy()
    expected = np.full(total, SENTINEL)
    WORLD.Gatherv(x, [expected, counts, displs, MPI.DOUBLE] if R == root else None, root=root)
    out = np.full(total, SENTINEL)
    spec = {"counts_displs": [out, counts, displs], "pair": [out, (counts, displs)],
            "datatype": [out, counts, displs, MPI.DOUBLE], "counts_only": [out, counts], "raw": out}[form]
    comm.Gatherv(x, spec if R == root else None, root=root, algorithm=algorithm)
    check(R != root or np.array_equal(out, expected), f"{form}: differs (guard cells included)")
    check(np.array_equal(x, x0), "sendbuf was modified")
    if R == root:  # in place: the root's block is already there
        inplace = expected.copy()
        inplace[[i for i in range(total) if not displs[root] <= i < displs[root] + counts[root]]] = SENTINEL
        inplace[displs[root]:displs[root] + counts[root]] = x
    comm.Gatherv(MPI.IN_PLACE if R == root else x, [inplace, counts, displs] if R == root else None, root=root,
                 algorithm=algorithm)
    check(R != root or np.array_equal(inplace, expected), f"{form}: in place")


@pytest.mark.parametrize("algorithm", algs("scatterv"))
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("form", ["counts_displs", "pair", "datatype", "counts_only", "raw"])
def test_scatterv(comm, algorithm, root, form):
    counts, displs, total = v_layout()
    if form in ("counts_only", "raw"):
        counts = [P - 1 + 2 * (form == "raw")] * P if form == "raw" else counts
        displs, total = list(np.cumsum([0] + counts[:-1])), sum(counts)
    full = data(total, seed=10)
    full0 = full.copy()
    expected = np.empty(counts[R])
    WORLD.Scatterv([full, counts, displs, MPI.DOUBLE] if R == root else None, expected, root=root)
    guarded = np.full(counts[R] + 4, SENTINEL)  # 2 guard cells each side
    spec = {"counts_displs": [full, counts, displs], "pair": [full, (counts, displs)],
            "datatype": [full, counts, displs, MPI.DOUBLE], "counts_only": [full, counts], "raw": full}[form]
    comm.Scatterv(spec if R == root else None, [guarded, counts[R], 2, MPI.DOUBLE], root=root, algorithm=algorithm)
    check(np.array_equal(guarded[2:-2], expected) and np.all(guarded[:2] == SENTINEL)
          and np.all(guarded[-2:] == SENTINEL), f"{form}: differs or guard cells written")
    check(np.array_equal(full, full0), "sendbuf was modified")
    comm.Scatterv([full, counts, displs] if R == root else None, MPI.IN_PLACE if R == root else guarded[2:-2],
                  root=root, algorithm=algorithm)
    check(np.array_equal(full, full0) and np.array_equal(guarded[2:-2], expected), "in place")


# -- dtypes, sub-communicators ---------------------------------------------------------


DTYPES = ["int8", "uint16", "int64", "float16", "float32", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes(comm, dtype):
    n = P + 3
    root = P - 1
    for algorithm in mpicoll.algorithms("bcast"):
        x = data(n, dtype, seed=1)
        ref = x.copy()
        WORLD.Bcast(ref, root=root)
        comm.Bcast(x, root=root, algorithm=algorithm)
        check(np.array_equal(x, ref), f"bcast/{algorithm} {dtype}")
    x = data(n, dtype)
    expected = WORLD.allreduce(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)).astype(dtype)
    for algorithm in mpicoll.algorithms("reduce"):
        out = np.zeros_like(x)
        comm.Reduce(x, out, root=root, algorithm=algorithm)
        check(R != root or np.array_equal(out, expected), f"reduce/{algorithm} {dtype}")
    ref = np.empty(P * n, dtype)
    WORLD.Gather(x, ref, root=root)
    for algorithm in mpicoll.algorithms("gather"):
        out = np.zeros(P * n, dtype)
        comm.Gather(x, out, root=root, algorithm=algorithm)
        check(R != root or np.array_equal(out, ref), f"gather/{algorithm} {dtype}")
        back = np.zeros_like(x)
        comm.Scatter(ref if R == root else None, back, root=root, algorithm=algorithm)
        check(np.array_equal(back, x), f"scatter/{algorithm} {dtype}")


def test_bfloat16_against_local_reference(comm):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    n = 2 * P + 1
    x = data(n, bf16)
    everyone = [data(n, bf16, rank=r) for r in range(P)]
    root = P // 2
    for algorithm in mpicoll.algorithms("reduce"):
        out = np.zeros(n, bf16)
        comm.Reduce(x, out, root=root, algorithm=algorithm)
        check(R != root or np.array_equal(out.astype(np.float64), np.sum([e.astype(np.float64) for e in everyone], 0)),
              f"reduce/{algorithm}")
    for algorithm in mpicoll.algorithms("bcast"):
        y = x.copy()
        comm.Bcast(y, root=root, algorithm=algorithm)
        check(y.tobytes() == everyone[root].tobytes(), f"bcast/{algorithm}")
    for algorithm in mpicoll.algorithms("gather"):
        out = np.zeros(P * n, bf16)
        comm.Gather(x, out, root=root, algorithm=algorithm)
        check(R != root or out.tobytes() == np.concatenate(everyone).tobytes(), f"gather/{algorithm}")
        back = np.zeros(n, bf16)
        comm.Scatter(np.concatenate(everyone) if R == root else None, back, root=root, algorithm=algorithm)
        check(back.tobytes() == x.tobytes(), f"scatter/{algorithm}")


def test_split_subcommunicator(comm):
    sub = comm.Split(R % 2, -R)  # reversed order inside each half
    try:
        q, me, root = sub.size, sub.rank, sub.size - 1
        n = q + 2
        x = data(n, np.int64)
        for algorithm in mpicoll.algorithms("bcast"):
            y, ref = x.copy(), x.copy()
            sub.Bcast(y, root=root, algorithm=algorithm)
            MPI.Intracomm.Bcast(sub, ref, root=root)
            check(np.array_equal(y, ref), f"bcast/{algorithm}")
        ref = np.empty_like(x)
        MPI.Intracomm.Reduce(sub, x, ref, root=root)
        for algorithm in mpicoll.algorithms("reduce"):
            out = np.zeros_like(x)
            sub.Reduce(x, out, root=root, algorithm=algorithm)
            check(me != root or np.array_equal(out, ref), f"reduce/{algorithm}")
        ref = np.empty(q * n, np.int64)
        MPI.Intracomm.Gather(sub, x, ref, root=root)
        for algorithm in mpicoll.algorithms("gather"):
            out = np.zeros(q * n, np.int64)
            sub.Gather(x, out, root=root, algorithm=algorithm)
            check(me != root or np.array_equal(out, ref), f"gather/{algorithm}")
            back = np.zeros_like(x)
            sub.Scatter(ref, back, root=root, algorithm=algorithm)
            check(np.array_equal(back, x), f"scatter/{algorithm}")
        counts = [1 + r for r in range(q)]
        out = np.zeros(sum(counts), np.int64)
        sub.Gatherv(x[:counts[me]], [out, counts], root=root)
        ref = np.zeros_like(out)
        MPI.Intracomm.Gatherv(sub, x[:counts[me]], [ref, counts], root=root)
        check(me != root or np.array_equal(out, ref), "gatherv")
        back = np.zeros(counts[me], np.int64)
        sub.Scatterv([ref, counts], back, root=root)
        check(np.array_equal(back, x[:counts[me]]), "scatterv")
    finally:
        sub.Free()


# -- errors: raised on the ranks that can see them, before any message ------------------


@contextlib.contextmanager
def _raises_at(rank: int, error: type, match: str):
    """``pytest.raises(error, match=match)`` on ``rank``; elsewhere the call must complete."""
    if R == rank:
        with pytest.raises(error, match=match):
            yield
    else:
        yield


def _mismatch_after_root_error(call, match: str) -> None:
    """``call`` on a fresh communicator: the root raises ``ValueError`` (``match``); every other rank completes
    or raises MismatchError; then every rank's next call raises MismatchError naming both counts."""
    fresh = mpicoll.Comm(WORLD.Dup())
    try:
        if R == 0:
            with pytest.raises(ValueError, match=match):
                call(fresh)
        else:
            try:
                call(fresh)
            except mpicoll.MismatchError:
                pass
        with pytest.raises(mpicoll.MismatchError, match=r"count=3.*count=2|count=2.*count=3"):
            fresh.Barrier()
    finally:
        fresh.Free()


class TestErrors:
    @pytest.mark.parametrize("root", [-1, P, "0", 1.0])
    def test_root_out_of_range(self, comm, root):
        with pytest.raises(ValueError, match=f"root.*0 .. {P - 1}"):
            comm.Bcast(np.zeros(4), root=root)
        with pytest.raises(ValueError, match="root"):
            comm.Reduce(np.zeros(4), np.zeros(4), root=root)
        with pytest.raises(ValueError, match="root"):
            comm.Gather(np.zeros(1), np.zeros(P), root=root)
        with pytest.raises(ValueError, match="root"):
            comm.Scatterv(np.zeros(P), np.zeros(1), root=root)

    # A check only the root can make: the root raises, after playing its part of the schedule on
    # scratch memory, so the other ranks complete the call instead of waiting for it forever.

    def test_read_only_receive_buffers(self, comm):
        ro = np.zeros(P)
        ro.flags.writeable = False
        with _raises_at(0, ValueError, "read-only"):
            comm.Reduce(np.zeros(P), ro, root=0)
        with _raises_at(0, ValueError, "read-only"):
            comm.Gather(np.zeros(1), ro, root=0)
        with pytest.raises(ValueError, match="read-only"):     # every rank's receive buffer is read-only
            comm.Scatter(np.zeros(P), ro[:1], root=0)

    def test_count_mismatch_at_root(self, comm):
        with _raises_at(0, ValueError, "recvbuf"):    # the root's stand-in sends 3 elements: the peers' call
            comm.Reduce(np.zeros(3), np.zeros(4), root=0)
        with _raises_at(0, ValueError, "counts"):
            comm.Gatherv(np.zeros(1), [np.zeros(9 * P), [2] * P], root=0)
        if P < 2:
            return
        # The root plays its part on scratch (see mpicoll.engine.standin) with 3 elements per rank, where the
        # others' buffers hold 2: the calls differ, as MPI forbids, and every rank learns it
        # (mpicoll.engine.mismatch): in the call where it waits, else at its next call on that communicator,
        # which stays unusable
        for algorithm in ("linear", "auto"):
            _mismatch_after_root_error(
                lambda c, a=algorithm: c.Gather(np.zeros(2), np.zeros(3 * P), root=0, algorithm=a), "sendbuf")
            _mismatch_after_root_error(
                lambda c, a=algorithm: c.Scatter(np.zeros(3 * P), np.zeros(2), root=0, algorithm=a), "recvbuf")

    def test_uneven_raw_buffer(self, comm):
        if P < 2:
            pytest.skip("every length splits into one block")
        with _raises_at(0, ValueError, "equal blocks"):
            comm.Gather(np.zeros(1), np.zeros(P + 1), root=0)

    def test_in_place_only_at_root(self, comm):
        if P < 2:
            pytest.skip("needs a non-root")
        # every rank names root 0 (ranks naming different roots make mismatched calls: mpicoll.engine.mismatch);
        # the non-roots play their part on scratch, and the root, whose result would depend on it, raises too
        with pytest.raises(ValueError, match="only the root" if R else "arguments were rejected"):
            comm.Reduce(MPI.IN_PLACE if R else np.zeros(2), np.zeros(2), root=0)
        with pytest.raises(ValueError, match="only the root" if R else "arguments were rejected"):
            comm.Gather(None if R else np.zeros(2), np.zeros(2 * P), root=0)
        if R:
            with pytest.raises(ValueError, match="only the root"):
                comm.Scatter(np.zeros(P), MPI.IN_PLACE, root=0)
        else:     # its result is its own block
            comm.Scatter(np.zeros(P), np.zeros(1), root=0)

    def test_op_and_dtype(self, comm):
        with pytest.raises(TypeError, match="BAND"):
            comm.Reduce(np.zeros(4), np.zeros(4), op=MPI.BAND, root=0)
        with _raises_at(0, TypeError, "dtype"):
            comm.Reduce(np.zeros(4), np.zeros(4, np.float32), root=0)
        with _raises_at(0, TypeError, "dtype"):
            comm.Gather(np.zeros(1), np.zeros(P, np.int64), root=0)

    def test_unknown_algorithm(self, comm):
        with pytest.raises(ValueError, match="no algorithm 'ring'"):
            comm.Gatherv(np.zeros(1), [np.zeros(P), [1] * P], root=0, algorithm="ring")
