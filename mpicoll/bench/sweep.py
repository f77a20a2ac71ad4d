"""``--style table``'s sweep: time every variant of each collective at each size, in one run.

At each size the variants run interleaved round by round on the same warm
buffers (:func:`mpicoll.bench.timing.time_variants`), next to ``np.copyto`` of
the same size; the time of a round is the slowest rank's.  Every variant's
result is checked once against the built-in's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.bench.cases import algorithm_run
from mpicoll.bench.report import Progress, human
from mpicoll.bench.timing import batch_size, time_variants
from mpicoll.bench.variants import (
    AUTO,
    BUILTIN,
    COLLECTIVES,
    Buffers,
    Collective,
    close,
    has_module,
    make_call,
    variants,
)
from mpicoll.comm.comm import Comm

__all__ = ["measure", "run_bench", "statistics", "cores"]


def measure(coll: Collective, comm: Comm, nbytes: int, dtype: np.dtype, names: list[str], iters: int,
            warmup: int) -> dict[str, Any]:
    """Time every variant at one size; returns per-variant statistics (slowest rank) and checks."""
    world = MPI.Intracomm(comm)
    rank, p = comm.rank, comm.size
    bufs = Buffers(coll, rank, p, nbytes, dtype)
    calls: dict[str, Callable[[], None]] = {}
    requests = []
    errors: dict[str, str] = {}
    for name in names:
        try:
            fn, req = make_call(name, coll, comm, bufs)
        except Exception as exc:   # an algorithm that cannot run here (reported, not fatal)
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        calls[name] = fn
        if req is not None:
            requests.append(req)
    ran = {}
    if AUTO in calls and has_module(coll):   # what "auto" runs at this size (prepared as the call would be)
        ran[AUTO] = algorithm_run(comm, coll.method, bufs.args(AUTO), AUTO)
    # check each result once, against the built-in's
    checked: dict[str, bool] = {}
    for name, fn in calls.items():
        bufs.reset_for_check(name)
        fn()
    ref = bufs.out(BUILTIN)
    for name in calls:
        if coll.root_only and rank != 0:
            checked[name] = True
        else:
            checked[name] = close(bufs.out(name), ref)
    flags = np.array([checked[n] for n in calls], dtype=np.int32)
    world.Allreduce(MPI.IN_PLACE, flags, op=MPI.MIN)
    checked = {n: bool(f) for n, f in zip(calls, flags)}
    copy_src, copy_dst = bufs.copy_src, bufs.copy_dst
    copy_fn = lambda: np.copyto(copy_dst, copy_src)  # noqa: E731
    timed = {"memcpy": copy_fn, **calls}
    stats = time_all(timed, checked, requests, world, warmup, iters, bufs.nbytes, coll.factor(p))
    for name, alg in ran.items():
        stats[name]["ran"] = alg
    for name, err in errors.items():
        stats[name] = {"error": err}
    return {"bytes": bufs.nbytes, "count": bufs.count, "stats": stats}


def time_all(timed: dict[str, Callable[[], None]], checked: dict[str, bool], requests: list, world: Any,
             warmup: int, iters: int, nbytes: int, factor: float) -> dict[str, dict[str, Any]]:
    """Time every variant of one size (warm-up rounds, a batch size each, interleaved rounds; the slowest
    rank's times), free the size's persistent requests, and give each variant's :func:`statistics`."""
    batch = {name: batch_size(fn, world) for name, fn in timed.items()}
    for _ in range(warmup):
        for fn in timed.values():
            fn()
    slowest = time_variants(timed, batch, iters, world)
    for req in requests:
        req.Free()
    return statistics(timed, slowest, batch, checked, nbytes, factor)


def statistics(timed: dict[str, Callable[[], None]], slowest: np.ndarray, batch: dict[str, int],
               checked: dict[str, bool], nbytes: int, factor: float) -> dict[str, Any]:
    """Per variant: median and minimum of the slowest rank's times, algbw, busbw, batch, check, ratio.

    ``slowest`` has one row per round and one column per entry of ``timed``
    (``memcpy`` first, then the calls, the built-in among them); ``factor`` is
    the collective's busbw factor (nccl-tests'); the ratio is to the built-in's
    median.
    """
    stats: dict[str, Any] = {}
    for j, name in enumerate(timed):
        col = slowest[:, j]
        med, low = float(np.median(col)), float(col.min())
        algbw = nbytes / med / 1e9
        stats[name] = {"median_s": med, "min_s": low, "algbw_GBs": algbw,
                       "busbw_GBs": algbw * (1.0 if name == "memcpy" else factor),
                       "batch": batch[name], "ok": checked.get(name, True)}
    base = stats[BUILTIN]["median_s"]
    for name in timed:
        if name != "memcpy":
            stats[name]["ratio"] = stats[name]["median_s"] / base
    return stats


def run_bench(comm: Comm, collectives: list[str], sizes: list[int], *, algorithms: list[str] | None = None,
              dtype: str = "float64", iters: int = 20, warmup: int = 3, progress: bool = True) -> list[dict]:
    """Run the sweep; every rank returns the same list of per-collective results."""
    dt = np.dtype(dtype)
    plans = []
    for name in collectives:
        key = name.lower()
        if key not in COLLECTIVES:
            raise ValueError(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)}")
        coll = COLLECTIVES[key]
        names, notes = variants(coll, comm.size, algorithms)
        plans.append((coll, names, notes))
    bar = Progress(sum(len(sizes) for _ in plans), progress and comm.rank == 0)
    results = []
    for coll, names, notes in plans:
        entries = []
        for nbytes in sizes:
            entries.append(measure(coll, comm, nbytes, dt, names, iters, warmup))
            bar.step(f"{coll.name} {human(nbytes)}")
        results.append({"collective": coll.name, "p": comm.size, "dtype": dt.name, "iters": iters,
                        "cores": cores(), "notes": notes, "sizes": entries})
    return results


def cores() -> int:
    """The machine's cores (mpirun binds each rank to one): a table flags more ranks than this as noisy."""
    return os.cpu_count() or 1
