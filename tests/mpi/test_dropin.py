"""mpicoll.Comm as a drop-in for an mpi4py communicator: buffer kinds, message specs, datatypes, errors.

One regression test per failure found by running mpi4py's own collective
suites against mpicoll.Comm (the whole suites run in tests/run_all.py); every
result is compared with the MPI library's own collective on the same arguments.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import errors

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P = WORLD.size
R = WORLD.rank


def both(call, make):
    """Run ``call(comm, *buffers)`` with mpicoll and with MPI's built-in on fresh ``make()`` buffers."""
    mine, theirs = make(), make()
    call(_mine(), *mine)
    call(builtin_comm(), *theirs)
    return mine, theirs


_BUILTIN: list = []
_MINE: list = []


def _mine() -> mpicoll.Comm:
    if not _MINE:
        _MINE.append(mpicoll.Comm(WORLD))
    return _MINE[0]


def builtin_comm() -> MPI.Intracomm:
    if not _BUILTIN:
        _BUILTIN.append(WORLD.Dup())
    return _BUILTIN[0]


def same(mine, theirs) -> bool:
    return all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(mine, theirs))


# -- derived datatypes ---------------------------------------------------------------------------


@pytest.mark.parametrize("root", sorted({0, P - 1}))
def test_bcast_indexed_type(comm, root):
    """mpi4py's testBcastTypeIndexed: an indexed datatype moves only the elements it selects."""
    for start in (0, 1):
        indexed = MPI.INT.Create_indexed_block(1, list(range(start, 10, 2))).Commit()

        def make():
            return [np.arange(10, dtype="i") if R == root else np.full(10, -1, "i")]

        mine, theirs = both(lambda c, b, t=indexed: c.Bcast([b, 1, t], root), make)
        indexed.Free()
        check(same(mine, theirs), f"{mine[0]} != {theirs[0]}")
        want = np.where(np.arange(10) % 2 == start, np.arange(10), -1) if R != root else np.arange(10)
        check(np.array_equal(mine[0], want), f"{mine[0]}")


def test_vector_send_contiguous_recv(comm):
    """Send and receive datatypes differ but share a type signature (every other int vs ints)."""
    vector = MPI.INT.Create_vector(3, 1, 2).Commit()
    sendbuf = np.arange(6, dtype="i") + 10 * R
    recv = np.full(3 * P, -1, "i")
    comm.Allgather([sendbuf, 1, vector], [recv, 3, MPI.INT])
    vector.Free()
    want = np.concatenate([np.arange(0, 6, 2) + 10 * r for r in range(P)])
    check(np.array_equal(recv, want), f"{recv}")


def test_vector_receive_leaves_gaps(comm):
    """A vector receive type writes every other element and leaves the rest untouched."""
    vector = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()
    mine = np.full(4 * P, -1.0)
    theirs = mine.copy()
    send = np.array([R, R + 0.5])
    comm.Allgather(send, [mine, 1, vector])
    builtin_comm().Allgather(send, [theirs, 1, vector])
    vector.Free()
    check(np.array_equal(mine, theirs), f"{mine} != {theirs}")


def test_allreduce_vector_type(comm):
    """A predefined op applies elementwise to the basic elements a derived datatype selects."""
    vector = MPI.DOUBLE.Create_vector(4, 1, 3).Commit()
    recv = np.full(12, -1.0)
    comm.Allreduce([np.arange(12.0) * (R + 1), 1, vector], [recv, 1, vector], MPI.SUM)
    vector.Free()
    want = np.full(12, -1.0)
    want[::3] = np.arange(12.0)[::3] * P * (P + 1) / 2
    check(np.array_equal(recv, want), f"{recv}")


def test_struct_type_moves_and_refuses_reduction(comm):
    struct = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    mine, theirs = both(lambda c, b: c.Bcast([b, 2, struct], 0),
                        lambda: [np.arange(32, dtype=np.uint8) * (R == 0)])
    check(same(mine, theirs), f"{mine[0]} != {theirs[0]}")
    with pytest.raises(MPI.Exception) as info:
        comm.Allreduce(MPI.IN_PLACE, [np.zeros(32, np.uint8), 2, struct], MPI.SUM)
    struct.Free()
    check(info.value.Get_error_class() == MPI.ERR_OP and isinstance(info.value, TypeError))


def test_persistent_bcast_indexed_repacks_each_start(comm):
    indexed = MPI.INT.Create_indexed_block(1, [0, 3]).Commit()
    buf = np.zeros(4, "i")
    req = comm.Bcast_init([buf, 1, indexed], 0)
    for step in range(2):
        buf[:] = np.arange(4) + 10 * step if R == 0 else -1
        req.Start()
        req.Wait()
        want = np.array([10 * step, -1, -1, 3 + 10 * step]) if R else np.arange(4) + 10 * step
        check(np.array_equal(buf, want), f"step {step}: {buf}")
    req.Free()
    indexed.Free()


# -- v-spec forms -------------------------------------------------------------------------------


@pytest.mark.parametrize("count", sorted({0, 1, max(P - 1, 0)}))
def test_gatherv_count_and_stride(comm, count):
    """mpi4py's testGatherv2: ``(buf, (count, stride), datatype)``; testGatherv3: ``[buf, count]``."""
    for root in range(P):
        recv = np.full(P * P, -1.0)
        comm.Gatherv([np.full(P, float(root)), count, MPI.DOUBLE],
                     (recv, (count, P), MPI.DOUBLE) if R == root else None, root)
        if R == root:
            rows = recv.reshape(P, P)
            check(bool((rows[:, :count] == root).all() and (rows[:, count:] == -1).all()), f"{rows}")
        else:
            check(True)
        recv = np.full(count * P, -1.0)
        comm.Gatherv(np.full(count, float(root)), [recv, count] if R == root else None, root)
        check(R != root or bool((recv == root).all()), f"{recv}")


@pytest.mark.parametrize("count", sorted({0, 1, max(P - 1, 0)}))
def test_allgatherv_alltoallv_stride(comm, count):
    """mpi4py's testAllgatherv2 and testAlltoallv2: a scalar displacement is a stride."""
    recv = np.full(P * P, -1.0)
    comm.Allgatherv([np.full(P, float(R)), count, MPI.DOUBLE], (recv, (count, P), MPI.DOUBLE))
    rows = recv.reshape(P, P)
    check(bool((rows[:, :count] == np.arange(P)[:, None]).all() and (rows[:, count:] == -1).all()), f"{rows}")
    recv = np.full(P * P, -1.0)
    comm.Alltoallv((np.full(P * P, float(R)), (count, P), MPI.DOUBLE), (recv, (count, P), MPI.DOUBLE))
    rows = recv.reshape(P, P)
    check(bool((rows[:, :count] == np.arange(P)[:, None]).all() and (rows[:, count:] == -1).all()), f"{rows}")


@pytest.mark.parametrize("count", sorted({0, 1, P}))
def test_scatterv_forms(comm, count):
    """mpi4py's testScatterv2 (count, stride) and testScatterv3 (``[buf, count]``, no truncation, no hang)."""
    for root in range(P):
        send = np.repeat(np.arange(P, dtype=float), P)
        recv = np.full(P, -1.0)
        comm.Scatterv((send, (count, P), MPI.DOUBLE) if R == root else None, [recv, count, MPI.DOUBLE], root)
        check(bool((recv[:count] == R).all() and (recv[count:] == -1).all()), f"{recv}")
        recv = np.full(count, -1.0)
        comm.Scatterv([np.full(count * P, float(root)), count] if R == root else None, recv, root)
        check(bool((recv == root).all()), f"{recv}")


# -- buffer kinds -------------------------------------------------------------------------------


def test_fortran_order(comm):
    mine, theirs = both(lambda c, s, r: c.Allreduce(s, r, MPI.SUM),
                        lambda: [np.asfortranarray(np.arange(6.0).reshape(2, 3) + R), np.zeros((3, 2), order="F")])
    check(same(mine, theirs), f"{mine[1]} != {theirs[1]}")


class DLPackOnly:
    """A DLPack producer and nothing else (no buffer protocol), counting how often it is consumed."""

    def __init__(self, array: np.ndarray) -> None:
        self.array, self.calls = array, 0

    def __dlpack__(self, stream=None):
        self.calls += 1
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_cpu_consumed_once(comm):
    send, recv = DLPackOnly(np.arange(4.0) + R), DLPackOnly(np.zeros(4))
    comm.Allreduce(send, recv, MPI.SUM)
    want = np.arange(4.0) * P + P * (P - 1) / 2
    check(np.array_equal(recv.array, want), f"{recv.array}")
    check(send.calls == 1 and recv.calls == 1, f"__dlpack__ called {send.calls}, {recv.calls} times")


class HostCAI:
    """``__cuda_array_interface__`` over host memory (as mpi4py's own tests use it)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.__cuda_array_interface__ = {"version": 3, "shape": array.shape, "typestr": array.dtype.str,
                                         "data": (array.ctypes.data, False), "strides": None}


def test_cuda_array_interface_on_host(comm):
    had_cupy = "cupy" in sys.modules
    recv = HostCAI(np.zeros(3 * P, "i"))
    comm.Allgather(HostCAI(np.full(3, R, "i")), recv)
    check(np.array_equal(recv.array, np.repeat(np.arange(P), 3)), f"{recv.array}")
    check(had_cupy or "cupy" not in sys.modules, "host CAI buffers must not import cupy")


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "mmap"])
def test_bytes_like(comm, kind):
    import mmap

    def make():
        data = bytes(range(R, R + 8))
        if kind == "mmap":
            m = mmap.mmap(-1, 8)
            m.write(data)
            return [m]
        return [bytearray(data) if kind == "bytearray" else memoryview(bytearray(data))]

    mine, theirs = both(lambda c, b: c.Bcast([b, MPI.BYTE], 0), make)
    check(bytes(mine[0]) == bytes(theirs[0]) == bytes(range(8)), f"{bytes(mine[0])!r}")


# -- MPI-style errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("call, error_class, pytype", [
    (lambda c: c.Bcast(np.zeros(2), root=P), MPI.ERR_ROOT, ValueError),
    (lambda c: c.Allreduce(np.zeros(2), np.zeros(1), MPI.SUM), MPI.ERR_TRUNCATE, ValueError),
    (lambda c: c.Allreduce(np.zeros(2), np.zeros(2, "i"), MPI.SUM), MPI.ERR_TYPE, TypeError),
    (lambda c: c.Bcast([np.zeros(2), -1, MPI.DOUBLE]), MPI.ERR_COUNT, ValueError),
    (lambda c: c.Bcast(object()), MPI.ERR_BUFFER, TypeError),
    (lambda c: c.Bcast([np.zeros(2), MPI.DATATYPE_NULL]), MPI.ERR_TYPE, ValueError),
])
def test_errors_are_mpi_exceptions(comm, call, error_class, pytype):
    """Argument errors are MPI.Exception with the matching class *and* the ValueError/TypeError of before."""
    with pytest.raises(MPI.Exception) as info:
        call(comm)
    exc = info.value
    check(exc.Get_error_class() == error_class and isinstance(exc, pytype) and isinstance(exc, errors.MPIError),
          f"{type(exc).__name__}: {exc} (class {exc.Get_error_class()})")
    check(bool(str(exc)) and str(exc).split(":")[0] in ("root", "recvbuf", "buf", "sendbuf"), str(exc))
