"""A test bed of programs written the way HPC codes are, each run on MPI's built-in and on mpicoll.

Each program takes the world communicator (``MPI.COMM_WORLD`` or ``mpicoll.Comm(MPI.COMM_WORLD)``), makes
its own communicators from it (``Create_cart``, ``Sub``, ``Dup``) and calls collectives on them as it
pleases.  Every run counts the program's collective calls and those that went through mpicoll's schedules
(:func:`mpicoll.comm.dispatch.run_blocking`, which every mpicoll collective method calls): with mpicoll
every buffer collective goes through mpicoll (none reaches MPI's own collective), with the built-in none
does; and the two runs give the same results.

The programs (issue 24's real programs, rewritten from their description):

- a pencil-decomposed 3-D array transposed with ``Alltoallw`` on subarray datatypes over the row and column
  sub-communicators of a 2-D Cartesian grid (a distributed FFT's redistribution);
- a halo exchange on a periodic 2-D grid (``Sendrecv`` with a column datatype) with a global residual
  (``Allreduce``) per step;
- a strided tensor passed as ``[MPI.memory.fromaddress(ptr, numel * itemsize), n, vector.Create_resized(0,
  row_stride)]`` (a distributed-tensor library), gathered and broadcast;
- torch tensors of every dtype through DLPack (skipped where torch is missing).
"""

from __future__ import annotations

import collections
import sys

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.comm import collectives as methods_module  # where the methods call run_blocking, run_summing

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P = WORLD.size
R = WORLD.rank


class Counts:
    """The collective calls a program made (by name) and those that ran through mpicoll."""

    def __init__(self) -> None:
        self.made: collections.Counter = collections.Counter()
        self.mpicoll: collections.Counter = collections.Counter()

    def call(self, comm, name: str, *args, **kwargs):
        """``comm.<name>(*args, **kwargs)``, counted: how the programs call collectives."""
        self.made[name] += 1
        return getattr(comm, name)(*args, **kwargs)

    @property
    def builtin(self) -> collections.Counter:
        """Calls that reached MPI's own collectives."""
        return self.made - self.mpicoll


@pytest.fixture(params=["builtin", "mpicoll"])
def world(request, monkeypatch):
    """(the world communicator as a program gets it, its call counts, which run it is)."""
    counts = Counts()
    run, run_summing = methods_module.run_blocking, methods_module.run_summing

    def counted(comm, method, *rest):
        counts.mpicoll[method] += 1
        return run(comm, method, *rest)

    def counted_summing(comm, method, *rest):
        counts.mpicoll[method] += 1
        return run_summing(comm, method, *rest)

    monkeypatch.setattr(methods_module, "run_blocking", counted)
    monkeypatch.setattr(methods_module, "run_summing", counted_summing)
    base = WORLD.Dup()
    comm = mpicoll.Comm(base) if request.param == "mpicoll" else base
    yield comm, counts, request.param
    comm.Free()


def _check_routing(counts: Counts, run: str) -> None:
    if run == "mpicoll":
        check(not counts.builtin, f"rank {R}: calls reached MPI's own collectives: {dict(counts.builtin)}")
        check(sum(counts.mpicoll.values()) == sum(counts.made.values()) > 0, f"rank {R}: {counts.made}")
    else:
        check(not counts.mpicoll, f"rank {R}: the built-in run went through mpicoll: {dict(counts.mpicoll)}")


# -- a pencil decomposition: a 3-D array moved between pencils with Alltoallw on subarray types -----------


def _split(n: int, parts: int, i: int) -> tuple[int, int]:
    """(start, size) of part i of n elements split into ``parts`` near-equal blocks."""
    q, r = divmod(n, parts)
    return i * q + min(i, r), q + (i < r)


def _subarrays(shape: tuple[int, ...], axis: int, parts: int) -> list[MPI.Datatype]:
    """The blocks of a local array cut along ``axis`` into ``parts``, one subarray datatype per block."""
    types = []
    for j in range(parts):
        start, size = _split(shape[axis], parts, j)
        sub = list(shape)
        sub[axis] = size
        starts = [0] * len(shape)
        starts[axis] = start
        types.append(MPI.DOUBLE.Create_subarray(list(shape), sub, starts).Commit())
    return types


def _transpose(counts: Counts, comm, a: np.ndarray, out_shape: tuple[int, ...], axis_from: int,
               axis_to: int) -> np.ndarray:
    """Move ``a`` (distributed along ``axis_to`` over ``comm``, whole along ``axis_from``) to be whole
    along ``axis_to`` and distributed along ``axis_from``: mpi4py-fft's Pencil.transfer, by hand."""
    parts = comm.Get_size()
    b = np.zeros(out_shape)
    send, recv = _subarrays(a.shape, axis_from, parts), _subarrays(b.shape, axis_to, parts)
    ones, zeros = [1] * parts, [0] * parts
    counts.call(comm, "Alltoallw", [a, ones, zeros, send], [b, ones, zeros, recv])
    for t in send + recv:
        t.Free()
    return b


def pencil_program(counts: Counts, world, shape=(8, 6, 5)) -> tuple[np.ndarray, int]:
    """An X-pencil of a global array (value: its global flat index) moved to a Y-, then a Z-pencil, and back."""
    dims = MPI.Compute_dims(world.Get_size(), 2)
    grid = world.Create_cart(dims, periods=[False, False])
    rows, cols = grid.Sub([True, False]), grid.Sub([False, True])   # along grid dims 0 and 1
    (c0, c1), n = grid.Get_coords(grid.Get_rank()), shape
    (s1, m1), (s2, m2) = _split(n[1], dims[0], c0), _split(n[2], dims[1], c1)
    whole = np.arange(np.prod(n), dtype=np.float64).reshape(n)
    x = whole[:, s1:s1 + m1, s2:s2 + m2].copy()                      # X-pencil: axis 0 whole
    s0, m0 = _split(n[0], dims[0], c0)
    y = _transpose(counts, rows, x, (m0, n[1], m2), 0, 1)           # Y-pencil: axis 1 whole
    t1, k1 = _split(n[1], dims[1], c1)
    z = _transpose(counts, cols, y, (m0, k1, n[2]), 1, 2)           # Z-pencil: axis 2 whole
    ok = np.array_equal(y, whole[s0:s0 + m0, :, s2:s2 + m2]) and np.array_equal(z, whole[s0:s0 + m0, t1:t1 + k1, :])
    back = _transpose(counts, rows, _transpose(counts, cols, z, y.shape, 2, 1), x.shape, 1, 0)
    total = np.zeros(1)
    counts.call(grid, "Allreduce", np.array([float(z.sum())]), total, op=MPI.SUM)
    ok = ok and np.array_equal(back, x) and total[0] == whole.sum()
    for c in (rows, cols, grid):
        c.Free()
    return back, int(ok)


def test_pencil_transposes_with_alltoallw_on_subarrays(world):
    comm, counts, run = world
    result, ok = pencil_program(counts, comm)
    check(ok, f"rank {R}: the pencils are wrong ({run})")
    check(counts.made["Alltoallw"] == 4, f"rank {R}: {counts.made}")
    _check_routing(counts, run)


def test_sub_communicators_cost_no_setup_message(monkeypatch):
    """Issue 24: each Sub of a hand-wrapped grid cost two setup Bcasts; now none (state inherited)."""
    from mpicoll.comm import setup

    world = mpicoll.Comm(WORLD)    # wrapping: one setup exchange (the only one)
    exchanges = []
    real = setup._allgather
    monkeypatch.setattr(setup, "_allgather", lambda *a, **k: exchanges.append(1) or real(*a, **k))
    grid = world.Create_cart(MPI.Compute_dims(P, 2))
    subs = [grid.Sub([True, False]) for _ in range(10)] + [grid.Sub([False, True]) for _ in range(10)]
    check(exchanges == [] and all(isinstance(s, mpicoll.comm.Cartcomm) for s in subs),
          f"rank {R}: {len(exchanges)} setup exchanges for 20 sub-communicators")
    for s in subs + [grid]:
        s.Free()


# -- a halo exchange on a periodic 2-D grid, with a global residual each step -----------------------------


def halo_program(counts: Counts, world, n: int = 6, steps: int = 3) -> tuple[np.ndarray, list[float]]:
    """Jacobi sweeps on a periodic grid of n x n blocks: halos by Sendrecv (a column datatype for the
    left and right ones), the residual by Allreduce."""
    grid = world.Create_cart(MPI.Compute_dims(world.Get_size(), 2), periods=[True, True])
    u = np.zeros((n + 2, n + 2))
    u[1:-1, 1:-1] = grid.Get_rank() + np.arange(n * n).reshape(n, n) / (n * n)
    column = MPI.DOUBLE.Create_vector(n, 1, n + 2).Commit()
    residuals = []
    for _ in range(steps):
        for dim, (lo_send, hi_send, lo_halo, hi_halo) in enumerate((
                ((1, slice(1, -1)), (-2, slice(1, -1)), (0, slice(1, -1)), (-1, slice(1, -1))),
                ((slice(1, -1), 1), (slice(1, -1), -2), (slice(1, -1), 0), (slice(1, -1), -1)))):
            src, dst = grid.Shift(dim, 1)
            if dim == 0:   # rows: contiguous
                buf = [np.ascontiguousarray(u[hi_send]), np.empty(n)]
                grid.Sendrecv(buf[0], dst, 1, buf[1], src, 1)
                u[lo_halo] = buf[1]
                buf = [np.ascontiguousarray(u[lo_send]), np.empty(n)]
                grid.Sendrecv(buf[0], src, 2, buf[1], dst, 2)
                u[hi_halo] = buf[1]
            else:          # columns: strided, by a vector datatype over u itself
                flat = u.reshape(-1)
                grid.Sendrecv([flat[n + 2 + n:], 1, column], dst, 3, [flat[n + 2:], 1, column], src, 3)
                grid.Sendrecv([flat[n + 2 + 1:], 1, column], src, 4, [flat[n + 2 + n + 1:], 1, column], dst, 4)
        new = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        local = np.array([float(((new - u[1:-1, 1:-1]) ** 2).sum())])
        u[1:-1, 1:-1] = new
        total = np.empty(1)
        counts.call(grid, "Allreduce", local, total, op=MPI.SUM)
        residuals.append(total[0])
    column.Free()
    grid.Free()
    return u, residuals


def test_halo_exchange(world):
    comm, counts, run = world
    u, residuals = halo_program(counts, comm)
    reference = WORLD.allgather((u.tobytes(), residuals))
    check(reference[R] == (u.tobytes(), residuals) and all(r > 0 for r in residuals), f"rank {R}: {residuals}")
    _check_routing(counts, run)


def test_halo_exchange_same_on_both(world):
    """mpicoll's residuals equal the built-in's bit for bit (two ranks' sums in one order)."""
    comm, counts, run = world
    _, mine = halo_program(counts, comm)
    builtin = WORLD.Dup()
    _, theirs = halo_program(Counts(), builtin)
    builtin.Free()
    check(np.allclose(mine, theirs, rtol=1e-12), f"rank {R}: {mine} != {theirs}")


# -- a strided tensor as MPI.memory + a resized vector datatype -----------------------------------------


def strided_program(counts: Counts, world, rows: int = 5, cols: int = 7, width: int = 3) -> list[np.ndarray]:
    """The first ``width`` columns of a row-major ``rows x cols`` tensor, described as a distributed-tensor
    library does: the tensor's address, ``numel * itemsize`` bytes (its span ends past that), and a
    vector resized to the row stride."""
    size, rank = world.Get_size(), world.Get_rank()
    tensor = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) + 1000 * rank
    row = MPI.DOUBLE.Create_vector(1, width, width).Create_resized(0, cols * 8).Commit()
    memory = MPI.memory.fromaddress(tensor.ctypes.data, rows * width * 8)
    gathered = np.zeros((size, rows, width))
    counts.call(world, "Allgather", [memory, rows, row], [gathered, rows * width, MPI.DOUBLE])
    root_copy = np.zeros((size, rows, width)) if rank == 0 else None
    counts.call(world, "Gather", [memory, rows, row], [root_copy, rows * width, MPI.DOUBLE] if rank == 0 else None)
    target = np.full((rows, cols), -1.0)
    into = MPI.memory.fromaddress(target.ctypes.data, rows * width * 8)
    source = [memory, rows, row] if rank == 0 else [into, rows, row]
    counts.call(world, "Bcast", source, root=0)
    if rank != 0:
        tensor = target
    row.Free()
    return [gathered, tensor[:, :width].copy(), target[:, width:].copy()]


def test_strided_tensor_as_memory_and_resized_vector(world):
    comm, counts, run = world
    gathered, bcast, untouched = strided_program(counts, comm)
    expected = np.stack([(np.arange(35.0).reshape(5, 7) + 1000 * q)[:, :3] for q in range(P)])
    ok = np.array_equal(gathered, expected) and np.array_equal(bcast, expected[0])
    ok = ok and (R == 0 or np.all(untouched == -1.0))    # only the columns the datatype names were written
    check(ok, f"rank {R}: the strided tensor's messages are wrong ({run})")
    _check_routing(counts, run)


# -- torch tensors of every dtype, through DLPack ----------------------------------------------------------

def _torch():
    """torch, or a skip where it is not installed (``tests/``, on the path for ``ranks.py``, holds a ``torch``
    folder that Python would otherwise import as an empty namespace package)."""
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "Tensor"):
        sys.modules.pop("torch", None)
        pytest.skip("torch is not installed")
    return torch


TORCH_DTYPES = ["bfloat16", "float16", "float32", "float64", "complex64", "complex128", "int8", "uint8",
                "int16", "int32", "int64", "bool"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_tensors_of_every_dtype_through_dlpack(world, name):
    """Each dtype reduced as what it is (bfloat16 as ml_dtypes.bfloat16, not its bytes), moved intact."""
    torch = _torch()
    comm, counts, run = world
    dtype = getattr(torch, name)
    if name == "bool":
        x, op, expected = torch.tensor([R == 0, False, True]), MPI.LOR, torch.tensor([True, False, True])
    else:
        x, op = torch.full((3,), R + 1, dtype=dtype), MPI.SUM
        expected = torch.full((3,), P * (P + 1) // 2, dtype=dtype)
    y = torch.zeros(3, dtype=dtype)
    if run == "builtin" and name in ("bfloat16", "float16"):
        pytest.skip("the built-in reduces these as bytes (mpi4py reads DLPack bfloat16 as 'B')")
    counts.call(comm, "Allreduce", x, y, op=op)
    everyone = torch.zeros((P, 3), dtype=dtype)
    counts.call(comm, "Allgather", x, everyone)
    ok = torch.equal(y, expected) and all(torch.equal(everyone[q], x if q == R else everyone[q]) for q in range(P))
    check(ok, f"rank {R}: {name}: {y.tolist()} != {expected.tolist()}")
    _check_routing(counts, run)


def test_torch_dtype_mpicoll_cannot_reduce_is_an_error_on_every_rank(comm):
    """complex32 has no NumPy type: moved as opaque elements, refused by a reduction on every rank."""
    torch = _torch()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch: "ComplexHalf support is experimental"
        x = torch.ones(3, dtype=torch.complex32)
        y = torch.zeros(3, dtype=torch.complex32)
    with pytest.raises(TypeError, match="SUM is not defined"):
        comm.Allreduce(x, y, op=MPI.SUM)
    out = torch.zeros(3 * P, dtype=torch.complex32)
    comm.Allgather(x, out)
    check(torch.equal(out.view(torch.int32), torch.ones(3 * P, dtype=torch.complex32).view(torch.int32)),
          f"rank {R}: complex32 was not moved intact")
