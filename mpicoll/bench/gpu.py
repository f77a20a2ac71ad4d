"""``python -m mpicoll.bench --device gpu``: mpicoll on CuPy buffers against the ways to do it without mpicoll.

At every size, in one run, interleaved round by round (as the CPU benchmark):

- ``builtin``: MPI's built-in collective on *host* NumPy arrays of the same
  size (the ratio column's base, as in the CPU table);
- ``by-hand``: ``x.get()``, the built-in on the host copies, ``y.set()``:
  what a user without mpicoll writes;
- ``ipc`` and ``staged``: mpicoll on the device arrays with
  ``MPICOLL_GPU_TRANSPORT`` set to each (``ipc`` only when every rank is on
  one node), algorithm ``auto``;
- ``persistent``: the ``*_init`` form on the device arrays;
- ``memcpy``: a device-to-device copy of the same size on every rank at once
  (``cudaMemcpy`` through CuPy), the physical reference.

Every device variant's time includes synchronising the current stream after
the call, so it is the time until the result is usable.  Each variant's
result is checked against the built-in's once per size.  ``--device standin``
runs the same benchmark on the host stand-in device (for tests only: its
figures say nothing about a GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.bench.report import Progress, human
from mpicoll.bench.sweep import cores, time_all
from mpicoll.bench.variants import BUILTIN, COLLECTIVES, PERSISTENT, Buffers, Collective, close
from mpicoll.comm.comm import Comm
from mpicoll.data.device import StandInArray
from mpicoll.gpu.transport import asked_for, node_local

__all__ = ["run_bench_gpu", "GpuArrays"]

BY_HAND = "by-hand"


class GpuArrays:
    """How to make device arrays, copy them and wait for them: CuPy, or the host stand-in."""

    def __init__(self, device: str) -> None:
        if device == "gpu":
            try:
                import cupy  # noqa: PLC0415
            except ImportError:
                raise SystemExit("--device gpu needs CuPy (pip install cupy-cuda12x)") from None
            count = cupy.cuda.runtime.getDeviceCount()
            cupy.cuda.Device(MPI.COMM_WORLD.Get_rank() % count).use()
            self.asarray: Callable = cupy.asarray
            self.get: Callable = cupy.asnumpy
            self.set: Callable = lambda dev, host: dev.set(host)
            self.copyto: Callable = cupy.copyto
            self.sync: Callable = lambda: cupy.cuda.get_current_stream().synchronize()
            self.name = f"cupy {cupy.__version__}, {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}"
        elif device == "standin":
            self.asarray = lambda a: np.array(a).view(StandInArray)
            self.get = lambda a: np.array(a).view(np.ndarray)
            self.set = lambda dev, host: np.copyto(dev, host)
            self.copyto = np.copyto
            self.sync = lambda: None
            self.name = "host stand-in (not a GPU: for tests only)"
        else:
            raise ValueError(f"--device: expected cpu, gpu or standin, got {device!r}")


def _with_transport(transport: str, fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` run with ``transport`` asked for (each variant has its own buffers, so its own plan, which
    keeps the transport of its first run)."""
    def call() -> None:
        with asked_for(transport):
            fn()
    return call


def measure_gpu(coll: Collective, comm: Comm, nbytes: int, dtype: np.dtype, xp: GpuArrays, transports: list[str],
                iters: int, warmup: int) -> dict[str, Any]:
    """Time every variant at one size (slowest rank); the same result layout as :func:`mpicoll.bench.sweep.measure`."""
    world = MPI.Intracomm(comm)
    rank, p = comm.rank, comm.size
    bufs = Buffers(coll, rank, p, nbytes, dtype)
    dev_send = xp.asarray(bufs.send)
    outs: dict[str, Any] = {}

    def dev_args(variant: str) -> tuple:
        host_args = bufs.args(variant)
        outs[variant] = xp.asarray(bufs.out(variant))
        swap = {id(bufs.send): dev_send, id(bufs.out(variant)): outs[variant]}
        return tuple(swap.get(id(a), a) for a in host_args)

    builtin = getattr(MPI.Intracomm, coll.method)
    host_args = bufs.args(BUILTIN)
    calls: dict[str, Callable[[], None]] = {BUILTIN: lambda: builtin(comm, *host_args)}

    hand_args = bufs.args(BY_HAND)             # (send, out, ...) or, for bcast, (buf, root), on the host
    host_out = bufs.out(BY_HAND)
    outs[BY_HAND] = dev_out = xp.asarray(host_out)

    def by_hand() -> None:
        if coll.name == "bcast":
            host_out[...] = xp.get(dev_out)
            builtin(comm, *hand_args)
        else:
            builtin(comm, xp.get(dev_send), *hand_args[1:])
        xp.set(dev_out, host_out)
        xp.sync()
    calls[BY_HAND] = by_hand

    method = getattr(comm, coll.method)
    requests = []
    for transport in transports:
        args = dev_args(transport)
        calls[transport] = _with_transport(transport, _synced(lambda a=args: method(*a, algorithm="auto"), xp))
    if hasattr(comm, coll.method + "_init"):
        req = getattr(comm, coll.method + "_init")(*dev_args(PERSISTENT))
        requests.append(req)

        def persistent() -> None:
            req.Start()
            req.Wait()
            xp.sync()
        calls[PERSISTENT] = persistent

    # check each result once against the built-in's
    for name, fn in calls.items():
        bufs.reset_for_check(name)
        if name in outs:
            xp.set(outs[name], bufs.out(name))
            xp.sync()
        fn()
    ref = bufs.out(BUILTIN)
    checked = {}
    for name in calls:
        got = xp.get(outs[name]) if name in outs else bufs.out(name)
        checked[name] = (coll.root_only and rank != 0) or close(got, ref)
    flags = np.array([checked[n] for n in calls], dtype=np.int32)
    world.Allreduce(MPI.IN_PLACE, flags, op=MPI.MIN)
    checked = {n: bool(f) for n, f in zip(calls, flags)}

    src = xp.asarray(np.ones(max(1, nbytes // dtype.itemsize), dtype))
    dst = xp.asarray(np.zeros_like(bufs.copy_src))
    timed = {"memcpy": _synced(lambda: xp.copyto(dst, src), xp), **calls}
    stats = time_all(timed, checked, requests, world, warmup, iters, bufs.nbytes, coll.factor(p))
    return {"bytes": bufs.nbytes, "count": bufs.count, "stats": stats}


def _synced(fn: Callable[[], None], xp: GpuArrays) -> Callable[[], None]:
    def call() -> None:
        fn()
        xp.sync()
    return call


def run_bench_gpu(comm: Comm, collectives: list[str], sizes: list[int], *, device: str = "gpu",
                  dtype: str = "float32", iters: int = 20, warmup: int = 3, progress: bool = True) -> list[dict]:
    """The GPU sweep; every rank returns the same list of per-collective results (as
    :func:`mpicoll.bench.sweep.run_bench`)."""
    xp = GpuArrays(device)
    dt = np.dtype(dtype)
    transports = ["ipc", "staged"] if node_local(comm) else ["staged"]
    notes = [f"device: {xp.name}; memcpy = device-to-device copy on every rank at once; device times include "
             "synchronising the stream after the call; ratio base: the built-in on host arrays",
             f"by-hand = x.get() + built-in + y.set(); transports timed: {', '.join(transports)} (algorithm auto)"]
    results = []
    bar = Progress(len(collectives) * len(sizes), progress and comm.rank == 0)
    for name in collectives:
        key = name.lower()
        if key not in COLLECTIVES:
            raise ValueError(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)}")
        coll = COLLECTIVES[key]
        entries = []
        for nbytes in sizes:
            entries.append(measure_gpu(coll, comm, nbytes, dt, xp, transports, iters, warmup))
            bar.step(f"{coll.name} {human(nbytes)}")
        results.append({"collective": coll.name, "p": comm.size, "dtype": dt.name, "iters": iters,
                        "cores": cores(), "notes": notes, "sizes": entries, "device": device})
    return results
