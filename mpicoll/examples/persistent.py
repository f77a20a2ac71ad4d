"""Small-message latency: a persistent Allreduce_init plan against MPI's built-in Allreduce, side by side.

Run:  mpirun -n 2 python -m mpicoll.examples.persistent      (any N >= 1)
  or: python -m mpicoll.launch -n 2 -m mpicoll.examples.persistent [--count 1 --iters 20000]

A persistent plan pays for everything once (schedule, views, tag, MPI persistent
point-to-point requests); each ``Start(); Wait()`` then only runs the rounds.
The variants below are timed in interleaved batches in the same run (the
machine is shared and noisy, so compare ratios), and the median time per call
over the batches is printed with its ratio to the built-in ``Allreduce``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import mpicoll


def variants(comm: mpicoll.Comm, x: np.ndarray, y: np.ndarray, algorithm: str,
             every: bool) -> tuple[dict[str, Callable[[], None]], MPI.Prequest]:
    """The timed variants by name, and the built-in persistent request (for the caller to free)."""
    world = MPI.COMM_WORLD
    ours = comm.Allreduce_init(x, y, algorithm=algorithm)
    theirs = world.Allreduce_init(x, y)

    def persistent() -> None:
        ours.Start()
        ours.Wait()

    def builtin_persistent() -> None:
        theirs.Start()
        theirs.Wait()

    runs = {
        "MPI built-in Allreduce": lambda: world.Allreduce(x, y),
        "mpicoll Allreduce_init + Start/Wait": persistent,
        "MPI built-in Allreduce_init": builtin_persistent,
    }
    if every:   # the calls that prepare a plan each time
        runs["mpicoll Allreduce (blocking)"] = lambda: comm.Allreduce(x, y, algorithm=algorithm)
        runs["mpicoll Iallreduce + Wait"] = lambda: comm.Iallreduce(x, y, algorithm=algorithm).Wait()
    return runs, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description="persistent Allreduce latency vs MPI's built-in")
    parser.add_argument("--count", type=int, default=1, help="float64 elements (default 1 = 8 bytes)")
    parser.add_argument("--iters", type=int, default=2000, help="calls per batch")
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--algorithm", default="auto")
    parser.add_argument("--all", action="store_true", help="also time mpicoll's blocking Allreduce and Iallreduce")
    ns = parser.parse_args()
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    x, y = np.full(ns.count, 1.0 + comm.rank), np.zeros(ns.count)
    runs, builtin_request = variants(comm, x, y, ns.algorithm, ns.all)
    per_call: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():          # warm up every path
        for _ in range(100):
            fn()
    for _ in range(ns.batches):
        for name, fn in runs.items():
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(ns.iters):
                fn()
            per_call[name].append(comm.allreduce((time.perf_counter() - t0) / ns.iters, op=MPI.MAX))
    builtin_request.Free()    # MPICH warns at MPI_Finalize about a persistent request left unfreed
    expected = comm.size * (comm.size + 1) / 2
    ok = comm.allreduce(bool(np.all(y == expected)), op=MPI.LAND)
    if comm.rank == 0:
        base = float(np.median(per_call["MPI built-in Allreduce"]))
        print(f"{comm.size} ranks, {ns.count * 8} bytes, algorithm={ns.algorithm}: median over {ns.batches} "
              f"interleaved batches of {ns.iters} calls (results correct: {ok})")
        for name, values in per_call.items():
            med = float(np.median(values))
            print(f"  {name:38s} {med * 1e6:8.2f} us   x{med / base:5.2f} of built-in Allreduce")


if __name__ == "__main__":
    main()
