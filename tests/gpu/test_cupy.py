"""Every collective x algorithm x transport on CuPy buffers, against the same calls on NumPy arrays.

Run on a GPU machine: ``python -m mpicoll.launch -n 2 -m pytest tests/gpu --with-mpi -q``
(and ``-n 4``).  Without CuPy or a GPU every test is skipped (see conftest.py).
"""

from __future__ import annotations

import gc

import cases
import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.gpu import handles

from conftest import WHY_NOT, WORLD, check

if WHY_NOT is None:
    import cupy
else:  # collected, then skipped
    cupy = None

TRANSPORTS = ["staged", "ipc"]


def make(a: np.ndarray):
    return cupy.asarray(a)


def host(a) -> np.ndarray:
    return cupy.asnumpy(a)


@pytest.fixture
def gpu_env(monkeypatch):
    def use(transport: str, segment: int | None = None) -> None:
        monkeypatch.setenv("MPICOLL_GPU_TRANSPORT", transport)
        if segment is not None:
            monkeypatch.setenv("MPICOLL_GPU_SEGMENT", str(segment))
    return use


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("method, algorithm", cases.cases())
def test_every_collective_and_algorithm(comm, gpu_env, transport, method, algorithm):
    gpu_env(transport, segment=4096)
    bad = []
    for count in (0, 1, 37, 1 << 16):
        bad += cases.mismatches(comm, method, algorithm, count, np.float32, make, host)
    if method in cases.IN_PLACE:
        bad += cases.mismatches(comm, method, algorithm, 37, np.float32, make, host, in_place=True)
    check(not bad, "; ".join(bad))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_dtypes(comm, gpu_env, transport, dtype):
    gpu_env(transport)
    bad = []
    for method in ("Allreduce", "Reduce", "Reduce_scatter_block", "Allgather", "Scan"):
        for count in (1, 1001):
            bad += cases.mismatches(comm, method, "auto", count, dtype, make, host)
    check(not bad, "; ".join(bad))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("op", ["MAX", "MIN", "PROD", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR"])
def test_ops_on_the_device(comm, gpu_env, transport, op):
    gpu_env(transport)
    mpi_op = getattr(MPI, op)
    x = cases.data(comm.rank, 257, np.int32)
    want = np.zeros_like(x)
    comm.Allreduce(x, want, mpi_op)
    got = cupy.zeros(257, cupy.int32)
    comm.Allreduce(cupy.asarray(x), got, mpi_op)
    check(np.array_equal(host(got), want), op)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_large(comm, gpu_env, transport):
    gpu_env(transport)
    n = 16 << 20        # 64 MiB of float32: many 1 MiB segments
    bad = cases.mismatches(comm, "Allreduce", "ring", n, np.float32, make, host)
    bad += cases.mismatches(comm, "Bcast", "linear", n // 4, np.float32, make, host)
    check(not bad, "; ".join(bad))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_order(comm, gpu_env, transport):
    """Work queued before the call is seen; work queued after sees the result; no explicit synchronize."""
    gpu_env(transport)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.zeros(1 << 20, cupy.float32)
        x += comm.rank + 1            # queued, maybe not run yet
        y = cupy.empty_like(x)
        comm.Allreduce(x, y)
        z = y * 2                     # queued after the call on the same stream
        got = cupy.asnumpy(z, stream=stream)
    stream.synchronize()
    check(bool(np.all(got == 2 * sum(range(1, comm.size + 1)))), f"{got[:4]}")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nonblocking_and_persistent(comm, gpu_env, transport):
    gpu_env(transport)
    p, r = comm.size, comm.rank
    x, y = cupy.full(1001, r, cupy.float64), cupy.zeros(1001, cupy.float64)
    comm.Iallreduce(x, y).Wait()
    ok = bool(cupy.all(y == sum(range(p))))
    preq = comm.Allreduce_init(x, y)
    for k in range(5):
        x.fill(r * k)
        preq.Start()
        preq.Wait()
        ok &= bool(cupy.all(y == k * sum(range(p))))
    preq.Free()
    check(ok)


def test_ipc_handles_released_over_1000_calls(comm, gpu_env):
    gpu_env("ipc")
    gc.collect()
    ok = True
    for i in range(1000):
        n = 1024 + (i % 7) * 256            # new buffers every call
        x = cupy.full(n, comm.rank + i, cupy.float32)
        y = cupy.zeros(n, cupy.float32)
        comm.Allreduce(x, y)
        ok &= bool(cupy.all(y == sum(range(comm.size)) + comm.size * i))
    ipc = comm._state.devices.get("ipc")
    check(bool(ok) and ipc is not None, "wrong results or no IPC state")
    check(len(ipc.held) == comm.size - 1, f"{len(ipc.held)} mappings")
    check(ipc.leases <= 4 * max(comm.size - 1, 1), f"{ipc.leases} peer windows leased over 1000 calls")
    comm._state.plans.clear()          # the plans' window views go first
    ipc.close()
    comm._state.devices.pop("ipc")
    # the mappings are closed; the window is kept idle for the next communicator, within the bounds
    check(len(handles.IDLE) >= 1 and handles.IDLE.held <= handles.IDLE_BYTES, f"{len(handles.IDLE)} idle")
    free_before = cupy.cuda.runtime.memGetInfo()[0]
    gc.collect()
    handles.IDLE.clear()               # every peer let go of it above (close() on every rank, then check's allgather)
    check(cupy.cuda.runtime.memGetInfo()[0] >= free_before, "freeing the idle windows freed no memory")


def test_ipc_window_released_on_one_rank_first_is_not_mapped_twice(gpu_env):
    """tests/mpi/test_gpu_standin.py's test of the same name, on the GPU: a communicator's IPC state released on
    one rank first (its peers still map its window), then new communicators; none maps a window twice
    (cudaErrorAlreadyMapped in Bcast-binomial-ipc, Scan-linear-ipc, test_dtypes[int64-ipc] on an H200)."""
    if WORLD.size < 2:
        pytest.skip("needs two ranks")
    gpu_env("ipc")
    gc.collect()
    comms = [mpicoll.Comm(WORLD.Dup()) for _ in range(3)]
    got = []
    try:
        x, y = cupy.ones(64), cupy.zeros(64)
        comms[0].Allreduce(x, y)
        if WORLD.rank == 1:
            comms[0]._state.devices["ipc"].close()
        comms[1].Allreduce(x, y)
        got.append(float(y[0]))
        big, bigger = cupy.ones(1 << 20), cupy.zeros(1 << 20)
        comms[1].Allreduce(big, bigger)
        got.append(float(bigger[0]))
        comms[2].Allreduce(x, y)
        got.append(float(y[0]))
    except Exception as exc:
        got.append(str(exc))
    finally:
        for c in comms:
            c.Free()
    check(got == [WORLD.size] * 3, f"{got}")


def test_ipc_one_mapping_per_peer_window_on_two_communicators(comm, gpu_env):
    """Consecutive calls on one buffer, a sub-view of it, and a second communicator over the same ranks."""
    gpu_env("ipc")
    other = mpicoll.Comm(WORLD.Dup())
    p, r = comm.size, comm.rank
    x, y = cupy.arange(64, dtype=cupy.float64) + r, cupy.zeros(64)
    want = np.arange(64.0) * p + sum(range(p))
    ok = True
    for c in (comm, comm, other, comm, other, other):
        y[:] = 0
        c.Allreduce(x, y)
        ok &= np.array_equal(host(y), want)
        y[:] = 0
        c.Allreduce(x[8:40], y[8:40])
        ok &= np.array_equal(host(y)[8:40], want[8:40]) and not host(y)[:8].any()
    other.Free()
    check(bool(ok), f"{host(y)}")


def test_alltoallw_bottom_at_device_addresses(comm):
    """mpi4py's testAlltoallwBottom with CuPy arrays: struct datatypes at absolute device addresses."""
    p, r = comm.size, comm.rank
    ok = True
    for n in range(1, p + 1):
        sbuf, rbuf = cupy.full((p, n), n + 10 * r, cupy.float64), cupy.full((p, n), -1.0)
        saddr, raddr = MPI.Get_address(sbuf), MPI.Get_address(rbuf)
        stypes = [MPI.Datatype.Create_struct([n], [saddr + j * n * 8], [MPI.DOUBLE]).Commit() for j in range(p)]
        rtypes = [MPI.Datatype.Create_struct([n], [raddr + j * n * 8], [MPI.DOUBLE]).Commit() for j in range(p)]
        comm.Alltoallw((MPI.BOTTOM, ([1] * p, [0] * p), stypes), (MPI.BOTTOM, ([1] * p, [0] * p), rtypes))
        for t in stypes + rtypes:
            t.Free()
        want = np.repeat(n + 10 * np.arange(p, dtype=np.float64), n).reshape(p, n)
        ok &= np.array_equal(host(rbuf), want)
    check(bool(ok), f"{host(rbuf)}")
