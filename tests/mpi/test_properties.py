"""Property tests: random mpicoll collectives against MPI's built-ins, drawn by hypothesis.

A case is a collective, an algorithm (``"auto"`` included), counts from 0 to 5000
(small ones favoured), v-counts, a root, a dtype (float16 and bfloat16 included),
an op (a non-commutative 2x2 matrix product included), in place or not, and the
world or a sub-communicator (``Split`` by parity).

Every rank must draw the identical sequence of cases, or the ranks would enter
different collectives: hypothesis runs derandomized (its seed is a digest of the
test, the same on every rank), with no example database, no health checks and no
phase that depends on time.  A rank's data comes from NumPy seeded by the case
and the rank, never from hypothesis.  Each example computes its outcome on every
rank and agrees on it across ranks (:func:`conftest.check`) before anything
fails, so all ranks shrink a failure in step.  (A schedule that strands a rank
is ended by the suite's per-test time limit.)

References: data movement compares bits with the built-in on the same bytes
(float16/bfloat16 as uint16, which MPI has); reductions on float16/bfloat16
compare with the built-in on float32-converted data within a tolerance;
integers compare exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mpi4py import MPI
from mpi4py.util import dtlib

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
if P < 2:
    pytest.skip("property tests compare across ranks: run at 2 or more processes", allow_module_level=True)

EXAMPLES = 24 if P <= 5 else 6   # per collective (15 tests); cheap at 8 ranks
SENTINEL = 77 + R   # fills receive buffers; differs per rank, so a stray write shows; exact in every dtype

PROPERTY_SETTINGS = settings(
    derandomize=True, database=None, max_examples=EXAMPLES, deadline=None,
    suppress_health_check=list(HealthCheck),          # health checks time things: ranks would differ
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    print_blob=False,
)

REDUCTIONS = ["Allreduce", "Reduce", "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"]
MOVEMENTS = ["Bcast", "Allgather", "Allgatherv", "Gather", "Gatherv", "Scatter", "Scatterv", "Alltoall", "Alltoallv"]
DTYPES = ["float64", "float32", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "uint64"]
OPS = ["SUM", "PROD", "MAX", "MIN", "matmul", "matmul_mpi"]   # matmul: mpicoll.Op; matmul_mpi: MPI.Op.Create
MATMUL_DTYPES = ["float64", "float32", "int64"]
HALF = ("float16", "bfloat16")

# counts: small ones favoured (hypothesis picks a branch, then shrinks towards the first)
COUNT = st.one_of(st.integers(0, 8), st.integers(0, 100), st.integers(0, 5000))
VCOUNT = st.one_of(st.integers(0, 4), st.integers(0, 50), st.integers(0, 1500))


@dataclass(frozen=True)
class Case:
    collective: str
    algorithm: str
    dtype: str
    op: str | None
    count: int
    vcounts: tuple[int, ...]   # P entries (P * P for Alltoallv); a communicator of size n uses the first ones
    root: int                  # taken modulo the communicator's size
    in_place: bool
    split: bool
    seed: int


@st.composite
def cases(draw: Any, collective: str) -> Case:
    algorithm = draw(st.sampled_from(["auto", *mpicoll.algorithms(collective.lower())]))
    op = draw(st.sampled_from(OPS)) if collective in REDUCTIONS else None
    dtype = draw(st.sampled_from(MATMUL_DTYPES if op in ("matmul", "matmul_mpi") else DTYPES))
    nv = P * P if collective == "Alltoallv" else P
    return Case(collective, algorithm, dtype, op, draw(COUNT),
                tuple(draw(st.lists(VCOUNT, min_size=nv, max_size=nv))),
                draw(st.integers(0, P - 1)), draw(st.booleans()), draw(st.booleans()),
                draw(st.integers(0, 2**32 - 1)))


# -- the non-commutative op: 2x2 matrix products, one element = one flattened matrix -----------


def matmul2(invec: np.ndarray, inoutvec: np.ndarray) -> None:
    """``inoutvec = invec @ inoutvec`` on flattened 2x2 matrices (associative, not commutative)."""
    inoutvec[...] = (invec.reshape(-1, 2, 2) @ inoutvec.reshape(-1, 2, 2)).reshape(inoutvec.shape)


_MPI_MATMUL: dict[str, MPI.Op] = {}     # one MPI op per dtype of MATMUL_DTYPES: bounded
_MATRIX: dict[str, MPI.Datatype] = {}   # one contiguous 4-element type per dtype of MATMUL_DTYPES: bounded


def mpi_matmul(dtype: str) -> MPI.Op:
    """``MPI.Op.Create`` of :func:`matmul2` on raw buffers of ``dtype``, commute=False."""
    if dtype not in _MPI_MATMUL:
        def function(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
            matmul2(np.frombuffer(inbuf, dtype=dtype), np.frombuffer(inoutbuf, dtype=dtype))
        _MPI_MATMUL[dtype] = MPI.Op.Create(function, commute=False)
    return _MPI_MATMUL[dtype]


def matrix_type(dtype: str) -> MPI.Datatype:
    if dtype not in _MATRIX:
        _MATRIX[dtype] = dtlib.from_numpy_dtype(dtype).Create_contiguous(4).Commit()
    return _MATRIX[dtype]


# -- one example ---------------------------------------------------------------------------


class Example:
    """One case on one rank: its data, its buffers in both forms, and the problems found."""

    def __init__(self, case: Case, comm: mpicoll.Comm, ref: MPI.Intracomm):
        self.case, self.comm, self.ref = case, comm, ref
        self.n, self.r = comm.size, comm.rank
        self.root = case.root % self.n
        self.dtype = np.dtype(ml_dtypes.bfloat16 if case.dtype == "bfloat16" else case.dtype)
        self.reduction = case.collective in REDUCTIONS
        self.matmul = case.op in ("matmul", "matmul_mpi")
        self.unit = 4 if self.matmul else 1                     # array elements per MPI element
        half = case.dtype in HALF
        self.ref_dtype = np.dtype(np.float32 if half and self.reduction else np.uint16 if half else self.dtype)
        self.mdt = matrix_type(case.dtype) if self.matmul else None
        self.op, self.ref_op = self.ops()
        self.problems: list[str] = []
        self.refuses = False
        if self.reduction and not mpicoll.data.ops.is_commutative(self.op) and case.algorithm != "auto":
            algorithm = mpicoll.families.registry.get(case.collective.lower(), case.algorithm)
            self.refuses = not algorithm.keeps_order(self.n)
        self.rng = np.random.default_rng([case.seed, WORLD.rank])

    def ops(self) -> tuple[Any, Any]:
        name = self.case.op
        if name is None:
            return None, None
        if name == "matmul":
            return mpicoll.Op(matmul2, commute=False), mpi_matmul(self.case.dtype)
        if name == "matmul_mpi":
            return mpi_matmul(self.case.dtype), mpi_matmul(self.case.dtype)
        return getattr(MPI, name), getattr(MPI, name)

    # data and buffers

    def values(self, items: int) -> np.ndarray:
        """``items`` MPI elements of this rank's data: exact sums and products for integers."""
        size = items * self.unit
        if self.dtype.kind in "iu":
            low, high = (-1, 2) if self.matmul else (-2, 3) if self.case.op == "PROD" else (-20, 21)
            if self.dtype.kind == "u":
                low, high = 0, high - low
            return self.rng.integers(low, high, size=size).astype(self.dtype)
        return self.rng.uniform(-1, 1, size=size).astype(self.dtype)

    def full(self, items: int) -> np.ndarray:
        return np.full(items * self.unit, SENTINEL, dtype=self.dtype)

    def to_ref(self, a: np.ndarray) -> np.ndarray:
        """A copy of ``a`` in the reference's dtype: same bits, or float32 values for half types."""
        return a.view(self.ref_dtype).copy() if self.ref_dtype.itemsize == self.dtype.itemsize else \
            a.astype(self.ref_dtype)

    def m(self, a: np.ndarray, *layout: Any) -> Any:
        """mpicoll's buffer spec: the array, its layout, and the matrix type for matmul."""
        parts = [a, *layout] + ([self.mdt] if self.mdt is not None else [])
        return parts[0] if len(parts) == 1 else parts

    def b(self, a: np.ndarray, *layout: Any) -> Any:
        """The built-in's buffer spec on an array already in the reference dtype."""
        parts = [a, *layout] + ([self.mdt] if self.mdt is not None else [])
        return parts[0] if len(parts) == 1 else parts

    def layout(self, counts: list[int]) -> tuple[list[int], int]:
        """Disjoint displacements for ``counts`` in a random order with random gaps; and the total length."""
        displs = [0] * len(counts)
        at = 0
        for i in self.rng.permutation(len(counts)):
            at += int(self.rng.integers(0, 3))
            displs[i] = at
            at += counts[i]
        return displs, at

    # running and judging

    def call(self, method: str, *args: Any, **kwargs: Any) -> bool:
        """Run mpicoll's ``method``; False when it raised (expected or not: recorded if not)."""
        try:
            getattr(self.comm, method)(*args, algorithm=self.case.algorithm, **kwargs)
        except ValueError as exc:
            if not (self.refuses and "not commutative" in str(exc)):
                self.problems.append(f"raised {exc!r}")
            return False
        except Exception as exc:  # noqa: BLE001  (recorded, agreed across ranks, then failed)
            self.problems.append(f"raised {exc!r}")
            return False
        if self.refuses:
            self.problems.append("accepted a non-commutative op with an algorithm that cannot keep rank order")
        return not self.refuses

    def expect(self, what: str, got: np.ndarray, ref: np.ndarray) -> None:
        """``got`` (mpicoll's dtype) against ``ref`` (the reference's): bits, or values within tolerance."""
        if self.reduction and self.dtype.kind not in "iu":
            eps = float(ml_dtypes.finfo(self.dtype).eps)
            tol = eps * self.n * self.n * (4.0 ** self.n if self.matmul else 4.0)
            ok = got.shape == ref.shape and np.allclose(got.astype(np.float64), ref.astype(np.float64),
                                                        rtol=tol, atol=tol)
        else:
            ok = got.shape == ref.shape and np.array_equal(self.to_ref(got), ref)
        if not ok:
            diff = np.flatnonzero(self.to_ref(got) != ref)[:5] if got.shape == ref.shape else "shape"
            self.problems.append(f"{what} differs from the built-in (first positions {diff})")

    def unchanged(self, x: np.ndarray, x0: np.ndarray) -> None:
        if not np.array_equal(x.view(np.uint8), x0.view(np.uint8)):
            self.problems.append("sendbuf was modified")


# -- reductions ----------------------------------------------------------------------------


def run_allreduce_or_scan(e: Example) -> None:
    c, method = e.case, e.case.collective
    x = e.values(c.count)
    x0 = x.copy()
    ref = e.to_ref(e.full(c.count))
    getattr(e.ref, method)(e.b(e.to_ref(x)), e.b(ref), op=e.ref_op)
    out = x.copy() if c.in_place else e.full(c.count)
    if not e.call(method, MPI.IN_PLACE if c.in_place else e.m(x), e.m(out), op=e.op):
        return
    if method == "Exscan" and e.r == 0:   # undefined at rank 0; mpicoll leaves it untouched
        if not np.array_equal(out.view(np.uint8), (x if c.in_place else e.full(c.count)).view(np.uint8)):
            e.problems.append("rank 0's Exscan recvbuf was written")
        return
    e.expect("result", out, ref)
    if not c.in_place:
        e.unchanged(x, x0)


def run_reduce(e: Example) -> None:
    c, root = e.case, e.r == e.root
    x = e.values(c.count)
    x0 = x.copy()
    ref = e.to_ref(e.full(c.count))
    e.ref.Reduce(e.b(e.to_ref(x)), e.b(ref) if root else None, op=e.ref_op, root=e.root)
    in_place = c.in_place and root
    out = x.copy() if in_place else e.full(c.count)
    if not e.call("Reduce", MPI.IN_PLACE if in_place else e.m(x), e.m(out) if root else None,
                  op=e.op, root=e.root):
        return
    if root:
        e.expect("result at the root", out, ref)
    if not in_place:
        e.unchanged(x, x0)


def run_reduce_scatter_block(e: Example) -> None:
    c, k = e.case, e.case.count
    x = e.values(e.n * k)
    x0 = x.copy()
    ref = e.to_ref(e.full(k))
    e.ref.Reduce_scatter_block(e.b(e.to_ref(x)), e.b(ref), op=e.ref_op)
    out = x.copy() if c.in_place else e.full(k)
    if not e.call("Reduce_scatter_block", MPI.IN_PLACE if c.in_place else e.m(x), e.m(out), op=e.op):
        return
    e.expect("result", out[:k * e.unit], ref)
    if c.in_place:
        e.unchanged(out[k * e.unit:], x0[k * e.unit:])   # past the result: untouched
    else:
        e.unchanged(x, x0)


def run_reduce_scatter(e: Example) -> None:
    c = e.case
    counts = list(c.vcounts[:e.n])
    mine = counts[e.r]
    x = e.values(sum(counts))
    x0 = x.copy()
    ref = e.to_ref(e.full(mine))
    e.ref.Reduce_scatter(e.b(e.to_ref(x)), e.b(ref), counts, op=e.ref_op)
    out = x.copy() if c.in_place else e.full(mine)
    if not e.call("Reduce_scatter", MPI.IN_PLACE if c.in_place else e.m(x), e.m(out), counts, op=e.op):
        return
    e.expect("result", out[:mine * e.unit], ref)
    if not c.in_place:
        e.unchanged(x, x0)


# -- data movement -------------------------------------------------------------------------


def run_bcast(e: Example) -> None:
    c, root = e.case, e.r == e.root
    x = e.values(c.count) if root else e.full(c.count)
    ref = e.to_ref(x)
    e.ref.Bcast(e.b(ref), root=e.root)
    if root:
        x.flags.writeable = False     # the root's buffer is only read
    if e.call("Bcast", e.m(x), root=e.root):
        e.expect("buffer", x, ref)


def run_allgather(e: Example) -> None:
    c, k = e.case, e.case.count
    x = e.values(k)
    ref = e.to_ref(e.full(e.n * k))
    e.ref.Allgather(e.b(e.to_ref(x)), e.b(ref))
    out = e.full(e.n * k)
    if c.in_place:
        out[e.r * k:(e.r + 1) * k] = x
    if e.call("Allgather", MPI.IN_PLACE if c.in_place else e.m(x), e.m(out)):
        e.expect("result", out, ref)


def run_allgatherv(e: Example) -> None:
    c = e.case
    counts = list(c.vcounts[:e.n])
    displs, total = e.layout(counts)
    x = e.values(counts[e.r])
    ref = e.to_ref(e.full(total))
    e.ref.Allgatherv(e.b(e.to_ref(x)), e.b(ref, (counts, displs)))
    out = e.full(total)
    if c.in_place:
        out[displs[e.r]:displs[e.r] + counts[e.r]] = x
    if e.call("Allgatherv", MPI.IN_PLACE if c.in_place else e.m(x), e.m(out, (counts, displs))):
        e.expect("result (gaps included)", out, ref)


def run_gather(e: Example) -> None:
    c, k, root = e.case, e.case.count, e.r == e.root
    x = e.values(k)
    ref = e.to_ref(e.full(e.n * k))
    e.ref.Gather(e.b(e.to_ref(x)), e.b(ref) if root else None, root=e.root)
    out = e.full(e.n * k)
    in_place = c.in_place and root
    if in_place:
        out[e.r * k:(e.r + 1) * k] = x
    if e.call("Gather", MPI.IN_PLACE if in_place else e.m(x), e.m(out) if root else None, root=e.root) and root:
        e.expect("result at the root", out, ref)


def run_gatherv(e: Example) -> None:
    c, root = e.case, e.r == e.root
    counts = list(c.vcounts[:e.n])
    displs, total = e.layout(counts)
    x = e.values(counts[e.r])
    ref = e.to_ref(e.full(total))
    e.ref.Gatherv(e.b(e.to_ref(x)), e.b(ref, (counts, displs)) if root else None, root=e.root)
    out = e.full(total)
    in_place = c.in_place and root
    if in_place:
        out[displs[e.r]:displs[e.r] + counts[e.r]] = x
    if e.call("Gatherv", MPI.IN_PLACE if in_place else e.m(x), e.m(out, (counts, displs)) if root else None,
              root=e.root) and root:
        e.expect("result at the root (gaps included)", out, ref)


def run_scatter(e: Example) -> None:
    c, k, root = e.case, e.case.count, e.r == e.root
    full = e.values(e.n * k)
    full0 = full.copy()
    ref = e.to_ref(e.full(k))
    e.ref.Scatter(e.b(e.to_ref(full)) if root else None, e.b(ref), root=e.root)
    in_place = c.in_place and root
    out = e.full(k)
    if not e.call("Scatter", e.m(full) if root else None, MPI.IN_PLACE if in_place else e.m(out), root=e.root):
        return
    if not in_place:
        e.expect("result", out, ref)
    e.unchanged(full, full0)


def run_scatterv(e: Example) -> None:
    c, root = e.case, e.r == e.root
    counts = list(c.vcounts[:e.n])
    displs, total = e.layout(counts)   # used at the root only
    full = e.values(total)
    full0 = full.copy()
    ref = e.to_ref(e.full(counts[e.r]))
    e.ref.Scatterv(e.b(e.to_ref(full), (counts, displs)) if root else None, e.b(ref), root=e.root)
    in_place = c.in_place and root
    out = e.full(counts[e.r])
    if not e.call("Scatterv", e.m(full, (counts, displs)) if root else None,
                  MPI.IN_PLACE if in_place else e.m(out), root=e.root):
        return
    if not in_place:
        e.expect("result", out, ref)
    e.unchanged(full, full0)


def run_alltoall(e: Example) -> None:
    c, k = e.case, e.case.count
    x = e.values(e.n * k)
    x0 = x.copy()
    ref = e.to_ref(e.full(e.n * k))
    e.ref.Alltoall(e.b(e.to_ref(x)), e.b(ref))
    out = x.copy() if c.in_place else e.full(e.n * k)
    if not e.call("Alltoall", MPI.IN_PLACE if c.in_place else e.m(x), e.m(out)):
        return
    e.expect("result", out, ref)
    if not c.in_place:
        e.unchanged(x, x0)


def run_alltoallv(e: Example) -> None:
    c = e.case
    matrix = np.array(c.vcounts, dtype=np.int64).reshape(P, P)[:e.n, :e.n]   # matrix[i, j]: i sends to j
    if c.in_place:      # in place, MPI needs the same counts both ways: a symmetric matrix
        matrix = np.triu(matrix) + np.triu(matrix, 1).T
    sendcounts, recvcounts = matrix[e.r].tolist(), matrix[:, e.r].tolist()
    rdispls, rtotal = e.layout(recvcounts)
    if c.in_place:
        out = e.full(rtotal)
        for j in range(e.n):
            out[rdispls[j]:rdispls[j] + recvcounts[j]] = e.values(recvcounts[j])
        ref = e.to_ref(out)
        e.ref.Alltoallv(MPI.IN_PLACE, e.b(ref, (recvcounts, rdispls)))
        if e.call("Alltoallv", MPI.IN_PLACE, e.m(out, (recvcounts, rdispls))):
            e.expect("result (gaps included)", out, ref)
        return
    sdispls, stotal = e.layout(sendcounts)
    x = e.values(stotal)
    x0 = x.copy()
    ref = e.to_ref(e.full(rtotal))
    e.ref.Alltoallv(e.b(e.to_ref(x), (sendcounts, sdispls)), e.b(ref, (recvcounts, rdispls)))
    out = e.full(rtotal)
    if e.call("Alltoallv", e.m(x, (sendcounts, sdispls)), e.m(out, (recvcounts, rdispls))):
        e.expect("result (gaps included)", out, ref)
    e.unchanged(x, x0)


RUNNERS = {
    "Allreduce": run_allreduce_or_scan, "Scan": run_allreduce_or_scan, "Exscan": run_allreduce_or_scan,
    "Reduce": run_reduce, "Reduce_scatter_block": run_reduce_scatter_block, "Reduce_scatter": run_reduce_scatter,
    "Bcast": run_bcast, "Allgather": run_allgather, "Allgatherv": run_allgatherv, "Gather": run_gather,
    "Gatherv": run_gatherv, "Scatter": run_scatter, "Scatterv": run_scatterv, "Alltoall": run_alltoall,
    "Alltoallv": run_alltoallv,
}


# -- the tests -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def comms():
    """(mpicoll world, built-in world, mpicoll parity half, built-in parity half)."""
    world = mpicoll.Comm(WORLD)
    ref = WORLD.Dup()
    half = world.Split(R % 2, R)
    ref_half = WORLD.Split(R % 2, R)
    yield world, ref, half, ref_half
    for c in (half, ref_half, ref):
        c.Free()


def run_case(case: Case, comms: tuple) -> None:
    """Run ``case`` on every rank, then agree on the outcome across the world."""
    same = WORLD.allgather(case)
    check(all(other == case for other in same), f"ranks drew different cases: {same}")
    world, ref, half, ref_half = comms
    example = Example(case, half, ref_half) if case.split else Example(case, world, ref)
    try:
        RUNNERS[case.collective](example)
    except Exception as exc:  # noqa: BLE001  (an error in the reference or the test itself: agreed, then failed)
        example.problems.append(f"raised {exc!r}")
    check(not example.problems, f"{case}: " + "; ".join(example.problems))


def make_test(collective: str):
    @PROPERTY_SETTINGS
    @given(case=cases(collective))
    def test(comms, case):
        run_case(case, comms)
    test.__name__ = f"test_{collective.lower()}_matches_builtin"
    return test


for _collective in RUNNERS:
    globals()[f"test_{_collective.lower()}_matches_builtin"] = make_test(_collective)


def test_allgatherv_hierarchical_displacements_out_of_order():
    """Minimal reproducer: one element per rank, blocks in reverse rank order; 'ring' gets it right."""
    counts, displs = [1] * P, [P - 1 - j for j in range(P)]
    x = np.full(1, 100.0 + R)
    ref = np.full(P, -1.0)
    WORLD.Allgatherv(x, [ref, (counts, displs)])
    out = np.full(P, -1.0)
    mpicoll.Comm(WORLD).Allgatherv(x, [out, (counts, displs)], algorithm="hierarchical")
    check(np.array_equal(out, ref), f"got {out}, the built-in gives {ref}")


def test_watchdog_executor_bcast_double_binary_tree():
    """Two receives from one peer in one round (bcast/double_binary_tree) under the watchdog's executor.

    It once probed every awaited receive of a round, so a message arriving between two
    probes was taken by the later receive (MessageSizeError); later it removed a finished
    receive from its list with ``list.remove``, which compares the buffers (NumPy arrays)
    of the receives before it: ValueError on one rank, a timeout on the others.

    The receiver must be polling when the messages arrive (the root starts late), and a
    race decides each call, so the calls repeat until the first failure anywhere.
    """
    import time

    comm = mpicoll.Comm(WORLD, timeout=5.0)   # short: a failed call strands a peer until then
    problems: list[str] = []
    for trial in range(50):
        count, root = (7, 100)[trial % 2], (trial // 2) % P
        x = np.arange(count, dtype=np.int32) if R == root else np.zeros(count, np.int32)
        if R == root:
            time.sleep(0.002)
        try:
            comm.Bcast(x, root=root, algorithm="double_binary_tree")
            if not np.array_equal(x, np.arange(count)):
                problems.append(f"count {count} root {root}: wrong data")
        except Exception as exc:  # noqa: BLE001  (recorded, then agreed across ranks)
            problems.append(f"count {count} root {root}: {exc!r}")
        if WORLD.allreduce(bool(problems), op=MPI.LOR):   # stop everywhere at the first failure anywhere
            break
    check(not problems, "; ".join(problems))


@pytest.mark.skipif(P < 3, reason="needs 3 processes")
def test_watchdog_executor_receives_out_of_order():
    """Rank 0 awaits rank 1 and rank 2 in one round, and rank 2's message arrives first.

    The watchdog's executor must finish the later receive without comparing the
    buffers of the earlier one (it once raised "truth value of an array is ambiguous").
    """
    import time

    from mpicoll.engine import watchdog

    comm = WORLD.Dup()
    try:
        n = 16
        if R == 0:
            first, second = np.zeros(n), np.zeros(n)
            rounds = [([], [(first.view("u1"), 1), (second.view("u1"), 2)], [])]
            watchdog.execute(rounds, comm, 7, "test", timeout=10.0)
            ok = np.array_equal(first, np.full(n, 1.0)) and np.array_equal(second, np.full(n, 2.0))
        elif R in (1, 2):
            if R == 1:
                time.sleep(0.05)
            watchdog.execute([([(np.full(n, float(R)).view("u1"), 0)], [], [])], comm, 7, "test", timeout=10.0)
            ok = True
        else:
            ok = True
        check(ok, "rank 0 received wrong data")
    finally:
        comm.Free()
