"""The GPU transports through the whole call path, on the host stand-in device (no GPU needed).

``StandInArray`` buffers make mpicoll treat NumPy memory as device memory of
:class:`mpicoll.data.device.HostDevice`: the staged transport's pinned
mirrors, segment pipeline and event bookkeeping, and the IPC transport's
shared windows (POSIX shared memory standing in for CUDA IPC), token and
acknowledgement protocol and handle cache all run for real, under MPI.
"""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.data import device as devmod
from mpicoll.data.device import StandInArray
from mpicoll.gpu import handles as gpu_handles
from mpicoll.gpu import transport_of
from mpicoll.program.state import Preparation

from conftest import WORLD, check

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gpu"))
import cases  # noqa: E402

TRANSPORTS = ["staged", "ipc"]


def make(a: np.ndarray) -> StandInArray:
    return np.array(a).view(StandInArray)


def host(a) -> np.ndarray:
    return np.array(a).view(np.ndarray)


@pytest.fixture
def gpu_env(monkeypatch):
    def use(transport: str, segment: int = 64) -> None:
        monkeypatch.setenv("MPICOLL_GPU_TRANSPORT", transport)
        monkeypatch.setenv("MPICOLL_GPU_SEGMENT", str(segment))     # small: many pieces per message
        monkeypatch.setenv("MPICOLL_CUDA_AWARE", "0")
    return use


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("method, algorithm", cases.cases())
def test_every_collective_and_algorithm(comm, gpu_env, transport, method, algorithm):
    gpu_env(transport)
    bad = []
    # the transports do not depend on p beyond the schedules' shapes: the edge counts at p <= 4 keep CI short
    for count in (0, 1, 37) if WORLD.size <= 4 else (37,):
        bad += cases.mismatches(comm, method, algorithm, count, np.float64, make, host)
    if method in cases.IN_PLACE:
        bad += cases.mismatches(comm, method, algorithm, 37, np.float64, make, host, in_place=True)
    check(not bad, "; ".join(bad))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.uint8])
def test_dtypes(comm, gpu_env, transport, dtype):
    gpu_env(transport)
    bad = []
    for method in ("Allreduce", "Reduce_scatter_block", "Allgather"):
        bad += cases.mismatches(comm, method, "auto", 101, dtype, make, host)
    check(not bad, "; ".join(bad))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_large_message_many_segments(comm, gpu_env, transport):
    gpu_env(transport, segment=4096)
    bad = cases.mismatches(comm, "Allreduce", "ring", 100_003, np.float32, make, host)
    bad += cases.mismatches(comm, "Bcast", "linear", 100_003, np.float64, make, host)
    check(not bad, "; ".join(bad))


def test_user_op_and_minloc_fall_back_to_staging(comm, gpu_env):
    gpu_env("ipc")
    import mpicoll

    op = mpicoll.Op(lambda a, b: np.add(a, b, out=b), commute=True)
    x, y = make(np.arange(5.0) + comm.rank), make(np.zeros(5))
    comm.Allreduce(x, y, op)
    want = np.arange(5.0) * comm.size + sum(range(comm.size))
    check(np.array_equal(host(y), want), f"{host(y)}")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nonblocking_and_persistent(comm, gpu_env, transport):
    gpu_env(transport)
    p, r = comm.size, comm.rank
    x, y = make(np.full(33, r, np.float64)), make(np.zeros(33))
    req = comm.Iallreduce(x, y)
    req.Wait()
    ok = np.array_equal(host(y), np.full(33, sum(range(p))))
    preq = comm.Allreduce_init(x, y)
    staged = []
    for k in range(4):
        x[:] = r * k
        preq.Start()
        preq.Wait()
        ok &= np.array_equal(host(y), np.full(33, k * sum(range(p))))
        staged.append((preq._steps, preq._requests))
    preq.Free()
    # bound once: every Start ran the very same bound steps and MPI persistent requests (mirrors allocated once)
    ok &= all(steps is staged[0][0] and reqs is staged[0][1] for steps, reqs in staged)
    check(bool(ok), f"{host(y)}")


def test_ipc_handles_released_over_many_calls_with_changing_buffers(comm, gpu_env):
    gpu_env("ipc")
    dev = devmod.device_of(make(np.zeros(1)))
    p = comm.size
    gc.collect()          # earlier tests' communicators release their IPC state
    opened_before, windows_before = dev.opened, dev.windows
    ok = True
    for i in range(300):
        n = 16 + (i % 5) * 8         # new arrays every call, five sizes
        x, y = make(np.full(n, comm.rank + i, np.float32)), make(np.zeros(n, np.float32))
        comm.Allreduce(x, y)
        ok &= bool(np.all(host(y) == sum(range(p)) + p * i))
    ipc = comm._state.devices.get("ipc")
    live = dev.opened - opened_before
    check(bool(ok) and ipc is not None, "wrong results or no IPC state")
    # at most one mapping per peer and one window of this rank, however many plans came and went
    check(live <= max(p - 1, 0) and len(ipc.held) == p - 1, f"{live} mappings open")
    check(dev.windows - windows_before <= 1, f"{dev.windows} windows")
    # handles were opened only when a window grew, not per call
    check(ipc.leases <= 4 * max(p - 1, 1), f"{ipc.leases} peer windows leased over 300 calls")
    # releasing the communicator's IPC state closes every mapping; its window is kept idle for the next one
    ipc.close()
    comm._state.devices.pop("ipc")
    comm._state.plans.clear()
    check(dev.opened == opened_before, f"{dev.opened - opened_before} mappings left open")
    check(len(gpu_handles.IDLE) >= 1, "the released window was not kept for reuse")


def test_ipc_one_mapping_per_peer_window_whatever_uses_it(comm, gpu_env):
    """Consecutive calls on one buffer, a sub-view of it, and a second communicator over the same ranks: each
    peer window is mapped once per process (a second mapping is refused, on a GPU and on the stand-in)."""
    gpu_env("ipc")
    dev = devmod.device_of(make(np.zeros(1)))
    other = mpicoll.Comm(WORLD.Dup())
    p, r = comm.size, comm.rank
    x, y = make(np.arange(64.0) + r), make(np.zeros(64))
    want = np.arange(64.0) * p + sum(range(p))
    ok = True
    for c in (comm, comm, other, comm, other, other):
        y[:] = 0
        c.Allreduce(x, y)
        ok &= np.array_equal(host(y), want)
        y[:] = 0
        c.Allreduce(x[8:40], y[8:40])          # a sub-view: the same user memory, a new plan
        ok &= np.array_equal(host(y)[8:40], want[8:40]) and not host(y)[:8].any()
    windows = [c._state.devices["ipc"] for c in (comm, other)]
    handles = [h for w in windows for _, h, _ in w.held.values()]
    ok &= all(len(w.held) == p - 1 for w in windows) and len(set(handles)) == len(handles)
    ok &= all(gpu_handles.MAPPINGS.users(dev, h) >= 1 for h in handles)
    other.Free()
    check(bool(ok), f"{host(y)} {[w.held for w in windows]}")


def test_ipc_window_released_on_one_rank_first_is_not_mapped_twice(gpu_env):
    """A communicator's IPC state released on one rank before the others (garbage collection runs at its own
    time on each rank), so that the peers still map its window; then a new communicator, whose window on that
    rank grows.  No rank may map the same memory twice: on a GPU the released window's memory came back from
    cudaMalloc for the next communicator while its peers still mapped it (cudaErrorAlreadyMapped in
    Bcast-binomial-ipc, Scan-linear-ipc, test_dtypes[int64-ipc]); the host stand-in reuses freed memory so too."""
    if WORLD.size < 2:
        pytest.skip("needs two ranks")
    gpu_env("ipc")
    gc.collect()
    comms = [mpicoll.Comm(WORLD.Dup()) for _ in range(3)]
    got = []
    try:
        x, y = make(np.ones(64)), make(np.zeros(64))
        comms[0].Allreduce(x, y)
        if WORLD.rank == 1:
            comms[0]._state.devices["ipc"].close()      # what releasing its state does, here first
        comms[1].Allreduce(x, y)                         # rank 1's new window: the memory its peers still map
        got.append(host(y)[0])
        big, bigger = make(np.ones(1 << 12)), make(np.zeros(1 << 12))
        comms[1].Allreduce(big, bigger)                  # rank 1 grows its window: the one peers still map goes
        got.append(host(bigger)[0])
        comms[2].Allreduce(x, y)                         # a third window on rank 1
        got.append(host(y)[0])
    except RuntimeError as exc:
        got.append(str(exc))
    finally:
        for c in comms:
            c.Free()
    check(got == [WORLD.size] * 3, f"{got}")


def test_ipc_exchange_agreed_when_one_rank_hits_its_plan_cache(comm, gpu_env):
    """A rank that reuses its buffers hits its plan cache while a peer with new buffers misses: whether to
    swap window handles is agreed by all ranks (decided by each rank's own cache, it hung mpi4py's Gather
    test on a GPU, where CuPy's memory pool hands back the same addresses on some ranks only)."""
    gpu_env("ipc")
    x, y = make(np.ones(64, np.float32)), make(np.zeros(64, np.float32))
    kept, ok = [], True
    for i in range(4):
        if comm.rank == 1:        # new memory on rank 1 only (kept alive: new addresses every time)
            x, y = make(np.ones(64 * (i + 2), np.float32))[:64], make(np.zeros(64 * (i + 2), np.float32))[:64]
            kept += [x, y]
        comm.Allreduce(x, y)
        ok &= bool(np.all(host(y) == comm.size))
    check(ok, "wrong results")


@pytest.mark.parametrize("failing", ["window", "open_peer"])
def test_an_ipc_window_one_rank_cannot_allocate_or_open_raises_on_every_rank(gpu_env, monkeypatch, failing):
    """Allocating the window (out of device memory) or opening a peer's handle fails on the last rank only:
    every rank raises, none waits in the exchange's next collective step (a GPU run hung so, in a Barrier)."""
    if WORLD.size < 2:
        pytest.skip("needs two ranks")
    gpu_env("ipc")
    fresh = mpicoll.Comm(WORLD.Dup())

    def refused(*args, **kwargs):
        raise MemoryError(f"{failing} refused")

    if WORLD.rank == WORLD.size - 1:
        monkeypatch.setattr(devmod.HostDevice, failing, refused)
        monkeypatch.setattr(gpu_handles.IDLE, "take", lambda device, nbytes: None)   # no idle window to reuse
    x, y = make(np.ones(64, np.float32)), make(np.zeros(64, np.float32))
    try:
        fresh.Allreduce(x, y)
        got = "ok"
    except RuntimeError as exc:
        got = "own" if f"{failing} refused" in str(exc) else "peer's" if "rank(s)" in str(exc) else str(exc)
    fresh.Free()
    check(got == ("own" if WORLD.rank == WORLD.size - 1 else "peer's"), got)


def _bottom_types(address: int, p: int, n: int, datatype: MPI.Datatype, stride: int) -> list[MPI.Datatype]:
    """mpi4py's testAlltoallwBottom: block j is a struct of ``n`` elements at absolute address
    ``address + j * stride``."""
    return [MPI.Datatype.Create_struct([n], [address + j * stride], [datatype]).Commit() for j in range(p)]


@pytest.mark.parametrize("receive", ["device", "host"])
def test_alltoallw_bottom_at_device_addresses(comm, gpu_env, receive):
    """MPI.BOTTOM with datatypes at absolute device addresses (mpi4py's testAlltoallwBottom with CuPy arrays,
    refused on one rank before, which left the others waiting): the blocks are packed from host copies of
    the device bytes and received into such copies, written back to the device."""
    gpu_env("staged")
    dev = devmod.device_of(make(np.zeros(1)))
    p, r = comm.size, comm.rank
    ok = True
    for n in range(1, p + 1):
        sbuf = make(np.full((p, n), n + 10 * r, np.float64))
        rbuf = make(np.full((p, n), -1.0)) if receive == "device" else np.full((p, n), -1.0)
        saddr, raddr = MPI.Get_address(np.asarray(sbuf)), MPI.Get_address(np.asarray(rbuf))
        stypes = _bottom_types(saddr, p, n, MPI.DOUBLE, n * 8)
        rtypes = _bottom_types(raddr, p, n, MPI.DOUBLE, n * 8)
        dev.log.clear()
        with devmod.addressable(sbuf, *([rbuf] if receive == "device" else [])):
            comm.Alltoallw((MPI.BOTTOM, ([1] * p, [0] * p), stypes), (MPI.BOTTOM, ([1] * p, [0] * p), rtypes))
        for t in stypes + rtypes:
            t.Free()
        want = np.repeat(n + 10 * np.arange(p, dtype=np.float64), n).reshape(p, n)
        ok &= np.array_equal(host(rbuf), want)
        kinds = [entry[0] for entry in dev.log]
        ok &= "d2h" in kinds and (("h2d" in kinds) == (receive == "device"))   # through the host copies
    check(bool(ok), f"{host(rbuf)}")


def test_alltoallw_bottom_interleaved_device_blocks_keep_each_others_results(comm, gpu_env):
    """Receive blocks that interleave in one device array (block j: every p-th element from j): one host copy
    for all of them, so writing it back does not overwrite a block with the stale bytes of another's copy."""
    gpu_env("staged")
    p, r, n = comm.size, comm.rank, 3
    sbuf = make(np.arange(p * n, dtype=np.float64) + 100 * r)
    rbuf = make(np.full(p * n, -1.0))
    column = MPI.DOUBLE.Create_vector(n, 1, p).Commit()
    saddr, raddr = MPI.Get_address(np.asarray(sbuf)), MPI.Get_address(np.asarray(rbuf))
    stypes = _bottom_types(saddr, p, n, MPI.DOUBLE, n * 8)               # block j: elements j*n .. j*n+n-1
    rtypes = _bottom_types(raddr, p, 1, column, 8)                        # block i: elements i, i+p, i+2p
    with devmod.addressable(sbuf, rbuf):
        comm.Alltoallw((MPI.BOTTOM, ([1] * p, [0] * p), stypes), (MPI.BOTTOM, ([1] * p, [0] * p), rtypes))
    for t in stypes + rtypes + [column]:
        t.Free()
    want = np.array([r * n + k + 100 * i for k in range(n) for i in range(p)], np.float64)
    check(np.array_equal(host(rbuf), want), f"{host(rbuf)} != {want}")


def test_staged_pipeline_order(comm, gpu_env):
    """Results go back to the device right after their final write, before later rounds' messages."""
    gpu_env("staged", segment=1 << 20)
    dev = devmod.device_of(make(np.zeros(1)))
    n = 64 * comm.size
    x, y = make(np.ones(n)), make(np.zeros(n))
    comm.Allreduce(x, y, algorithm="ring")      # plan made and run once
    dev.log.clear()
    comm.Allreduce(x, y, algorithm="ring")      # cached plan: no allocation, no re-binding
    log = list(dev.log)
    while log and log[0][0] == "sync":      # waiting for the previous call's copies back
        log.pop(0)
    kinds = [e[0] for e in log]
    h2d = [i for i, k in enumerate(kinds) if k == "h2d"]
    d2h = [i for i, k in enumerate(kinds) if k == "d2h"]
    ok = np.array_equal(host(y), np.full(n, comm.size))
    if comm.size > 1:
        # the caller's stream is waited on before any copy, the copies back end with the caller waiting
        ok &= kinds[:2] == ["record", "wait"] and log[-1][:2] == ("wait", "current")
        ok &= len(d2h) >= 1 and len(h2d) == comm.size          # one block back per final write
    check(bool(ok), f"{log}")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_debug_2_reports_the_transport(comm, gpu_env, monkeypatch, capfd, transport):
    gpu_env(transport)
    monkeypatch.setenv("MPICOLL_DEBUG", "2")
    comm = mpicoll.Comm(WORLD.Dup())     # a communicator made in debug mode logs its calls (the careful path)
    x, y = make(np.ones(4)), make(np.zeros(4))
    comm.Allreduce(x, y)
    err = capfd.readouterr().err
    check(f"mpicoll[{comm.rank}]: allreduce" in err and f"blocking path: transport {transport}" in err, err)
    check(np.array_equal(np.asarray(y), np.full(4, comm.size)), f"{y}")   # the careful path ran the transport
    comm.Free()


def test_transport_of_plan(comm, gpu_env):
    gpu_env("staged")
    from mpicoll.calls import allreduce

    preparation = Preparation(comm._state)
    plan = allreduce.prepare(preparation, make(np.ones(4)), make(np.zeros(4)), MPI.SUM, algorithm="auto")
    check(transport_of(plan).startswith("not chosen"), transport_of(plan))
    plan.device.run(comm._state.private, comm._state.next_tag(0))
    check(transport_of(plan).startswith("staged"), transport_of(plan))
    plan = allreduce.prepare(preparation, np.ones(4), np.zeros(4), MPI.SUM, algorithm="auto")
    check(transport_of(plan) is None)
    WORLD.Barrier()


def test_bench_device_standin(monkeypatch, capfd):
    from mpicoll.bench import cli as bench

    monkeypatch.setenv("MPICOLL_DEBUG", "2")
    results = bench.main(["allreduce", "bcast", "--device", "standin", "--sizes", "8,4K", "--iters", "2",
                          "--warmup", "0", "--quiet"])
    err = capfd.readouterr().err
    if WORLD.size > 1:   # each transport variant ran its own transport
        check(all(f"blocking path: transport {t}" in err for t in ("ipc", "staged")), err[-2000:])
    variants = set(results[0]["sizes"][0]["stats"])
    check({"memcpy", "builtin", "by-hand", "staged", "ipc", "persistent"} <= variants, f"{variants}")
    bad = [(r["collective"], e["bytes"], n) for r in results for e in r["sizes"]
           for n, s in e["stats"].items() if not s.get("ok", False)]
    check(not bad, f"wrong results: {bad}")
