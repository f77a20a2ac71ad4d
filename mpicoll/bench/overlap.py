"""``python -m mpicoll.bench overlap``: how much of a nonblocking collective hides behind computation.

For each collective (``Iallreduce``, ``Ialltoall``) and size (bytes per rank's
buffer, default 64 KiB to 64 MiB by factors of 4), three implementations run
side by side in one process, interleaved repetition by repetition:

- ``builtin``: the MPI library's own ``MPI.COMM_WORLD.Iallreduce``;
- ``mpicoll``: ``mpicoll.Comm``'s, with the progress thread (:mod:`mpicoll.engine.progress`);
- ``mpicoll, no thread``: the same with the thread paused (:func:`~mpicoll.engine.progress.pause`), so
  the request advances only where the program calls mpicoll (here: the final ``Wait``).

Each is timed three ways, as OSU's ``osu_iallreduce`` does:

- ``comm``: start the collective, ``Wait`` at once;
- ``compute``: the computation alone (NumPy passes over a 64 KiB array, which
  release the GIL), sized before the repetitions so that it lasts about as long
  as the built-in's ``comm`` time at that size (the same for every variant);
- ``both``: start, compute, ``Wait`` (the program a user writes to overlap).

``overlap`` = (comm + compute - both) / min(comm, compute): the share of the
shorter of the two that was hidden, 1 when ``both`` takes as long as the longer
alone, 0 when it takes their sum (negative: overlapping cost more than serial,
e.g. when the computation and the messages fight for the same cores).  Every
time is the slowest rank's, the median over ``--repeat`` repetitions.

    python -m mpicoll.launch -n 2 -m mpicoll.bench overlap
    python -m mpicoll.launch -n 4 -m mpicoll.bench overlap --collectives allreduce --sizes 1M,16M --repeat 9
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.bench.report import human
from mpicoll.engine import progress
from mpicoll.tools.units import parse_size

__all__ = ["main", "VARIANTS"]

VARIANTS = ("builtin", "mpicoll", "mpicoll, no thread")
_WORK = 1 << 13           # float64 elements of the compute array (64 KiB: one pass is tens of microseconds)


def _sizes(text: str) -> list[int]:
    """``LO:HI`` (LO, then times 4 up to HI) or a list ``64K,1M``."""
    if ":" in text:
        lo, hi = (parse_size(part) for part in text.split(":"))
        sizes = [lo]
        while sizes[-1] * 4 <= hi:
            sizes.append(sizes[-1] * 4)
        return sizes
    return [parse_size(part) for part in text.split(",") if part.strip()]


def _buffers(collective: str, nbytes: int, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Send and receive buffers of ``nbytes`` per rank (Ialltoall: ``nbytes`` split into ``size`` blocks)."""
    n = max(nbytes // 8 // size * size, size)
    return np.full(n, float(rank + 1)), np.zeros(n)


def _starter(collective: str, comm: mpicoll.Comm, world: MPI.Intracomm, variant: str,
             send: np.ndarray, recv: np.ndarray) -> Callable[[], MPI.Request]:
    target = world if variant == "builtin" else comm
    method = getattr(target, "Iallreduce" if collective == "allreduce" else "Ialltoall")
    return lambda: method(send, recv)


def _compute(passes: int, work: np.ndarray) -> None:
    for _ in range(passes):
        np.sin(work, out=work)


def _slowest(world: MPI.Intracomm, fn: Callable[[], None]) -> float:
    world.Barrier()
    t0 = time.perf_counter()
    fn()
    return world.allreduce(time.perf_counter() - t0, op=MPI.MAX)


def _calibrate(world: MPI.Intracomm, seconds: float, work: np.ndarray) -> int:
    """Compute passes that last about ``seconds`` (the same count on every rank: rank 0's measure)."""
    t = min(_slowest(world, lambda: _compute(32, work)) for _ in range(3)) / 32
    return world.bcast(max(1, round(seconds / max(t, 1e-9))), root=0)


def measure(comm: mpicoll.Comm, collective: str, nbytes: int, repeat: int) -> dict[str, dict[str, float]]:
    """``{variant: {"comm", "compute", "both": seconds}}`` for one collective and size (medians)."""
    world = MPI.COMM_WORLD
    send, recv = _buffers(collective, nbytes, world.rank, world.size)
    work = np.random.default_rng(world.rank).random(_WORK)
    starts = {v: _starter(collective, comm, world, v, send, recv) for v in VARIANTS}
    for v in VARIANTS:                       # warm-up: plans made, pages touched
        starts[v]().Wait()
    builtin = np.median([_slowest(world, lambda: starts["builtin"]().Wait()) for _ in range(3)])
    passes = _calibrate(world, builtin, work)
    times: dict[str, dict[str, list[float]]] = {v: {"comm": [], "compute": [], "both": []} for v in VARIANTS}

    def both(start: Callable[[], MPI.Request]) -> None:
        req = start()
        _compute(passes, work)
        req.Wait()

    for _ in range(repeat):
        for v in VARIANTS:
            if v == "mpicoll, no thread":
                progress.pause()
            start = starts[v]
            try:
                times[v]["comm"].append(_slowest(world, lambda: start().Wait()))   # noqa: B023 - called at once
                times[v]["compute"].append(_slowest(world, lambda: _compute(passes, work)))
                times[v]["both"].append(_slowest(world, lambda: both(start)))      # noqa: B023 - called at once
            finally:
                progress.resume()
    return {v: {k: float(np.median(ts)) for k, ts in kinds.items()} for v, kinds in times.items()}


def overlap(t: dict[str, float]) -> float:
    """The share of the shorter of comm and compute that ``both`` hid."""
    return (t["comm"] + t["compute"] - t["both"]) / min(t["comm"], t["compute"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m mpicoll.bench overlap", description=__doc__.splitlines()[0])
    ap.add_argument("--collectives", default="allreduce,alltoall", help="allreduce, alltoall or both (default)")
    ap.add_argument("--sizes", default="64K:64M", help="bytes per rank: LO:HI (factor 4) or a list 64K,1M")
    ap.add_argument("--repeat", type=int, default=5, help="repetitions; medians are reported (default 5)")
    args = ap.parse_args(argv)
    collectives = [c.strip().lower() for c in args.collectives.split(",") if c.strip()]
    if not set(collectives) <= {"allreduce", "alltoall"} or args.repeat < 1:
        ap.error("--collectives takes allreduce and/or alltoall; --repeat must be >= 1")
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    comm.Iallreduce(np.zeros(1), np.zeros(1)).Wait()     # the first request starts the progress thread
    thread = progress.running()
    if comm.rank == 0:
        print(f"# mpicoll.bench overlap: {comm.size} ranks, progress thread {'on' if thread else 'OFF'}, "
              f"median of {args.repeat}; times in ms (slowest rank); overlap = (comm + compute - both) / "
              "min(comm, compute)")
        print(f"{'collective':10s} {'size':>8s} {'variant':20s} {'comm':>9s} {'compute':>9s} {'both':>9s} "
              f"{'overlap':>8s}")
    for collective in collectives:
        for nbytes in _sizes(args.sizes):
            result = measure(comm, collective, nbytes, args.repeat)
            if comm.rank == 0:
                for v, t in result.items():
                    print(f"{'I' + collective:10s} {human(nbytes):>8s} {v:20s} {t['comm'] * 1e3:9.2f} "
                          f"{t['compute'] * 1e3:9.2f} {t['both'] * 1e3:9.2f} {overlap(t):8.2f}", flush=True)


if __name__ == "__main__":
    main()
