"""What the mismatch check's watcher costs a program holding many communicators: side by side in one run.

Run on two processes::

    python -m mpicoll.launch -n 2 benchmarks/many_communicators.py [--idle 1000] [--calls 20000] [--rounds 7]

The program makes ``idle`` communicators (one call each, then left alone) and times the cached 8-byte
``Allreduce`` on one more.  The watcher thread of :mod:`mpicoll.engine.mismatch` looks at every watched
communicator every ``TICK`` seconds; the variants are that, and the same with the idle communicators taken
out of the watcher's list (as if they were not watched), interleaved ``rounds`` times so that a change of
the machine's load hits both alike.  Also printed: the time of one look over every watched communicator
(the watcher's work per tick, holding Python's interpreter lock).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.engine import mismatch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    ns = parser.parse_args()
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    idle = [mpicoll.Comm(world.Dup()) for _ in range(ns.idle)]
    x, y = np.ones(1), np.zeros(1)
    for c in idle:
        c.Allreduce(x, y)
    handles = {MPI._handleof(c._state.private) for c in idle}
    with mismatch._LOCK:
        kept = {h: w for h, w in mismatch._WATCHED.items() if h in handles}
    looks, watched = [], len(mismatch._WATCHED)
    if mismatch._WATCHER:
        watcher, status = mismatch._WATCHER[0], MPI.Status()
        for _ in range(20):
            t0 = time.perf_counter()
            watcher.look(status)
            looks.append(time.perf_counter() - t0)
    for _ in range(100):
        comm.Allreduce(x, y)
    times: dict[str, list[float]] = {"watched": [], "not watched": []}
    for r in range(ns.rounds):
        order = ["watched", "not watched"]
        for name in order if r % 2 == 0 else order[::-1]:
            with mismatch._LOCK:
                for h, w in kept.items():
                    if name == "watched":
                        mismatch._WATCHED[h] = w
                    else:
                        mismatch._WATCHED.pop(h, None)
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(ns.calls):
                comm.Allreduce(x, y)
            times[name].append((time.perf_counter() - t0) / ns.calls)
    if world.Get_rank() == 0:
        if looks:
            print(f"one look of the watcher over {watched} communicators: median "
                  f"{statistics.median(looks) * 1e3:.2f} ms (every {mismatch.TICK} s)")
        else:
            print("the watcher does not run (MPICOLL_TRACE_CALLS=0, or MPI without MPI_THREAD_MULTIPLE)")
        for name, ts in times.items():
            print(f"{name:>11}: Allreduce 8 B median {statistics.median(ts) * 1e6:6.2f} us  min "
                  f"{min(ts) * 1e6:6.2f} us per call, {ns.idle} idle communicators")
        ratios = [a / b for a, b in zip(times["watched"], times["not watched"])]
        print(f"watched / not watched: median of the rounds' ratios {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f} .. {max(ratios):.3f}), {ns.rounds} rounds of {ns.calls} calls")
    for c in idle:
        c.Free()


if __name__ == "__main__":
    main()
