"""Intercommunicator collectives: mpicoll's stages against the MPI library's own, side by side.

Run (any N >= 2; timings mean something only with a core per process)::

    python -m mpicoll.launch -n 2 benchmarks/intercomm.py [--calls 200] [--rounds 5] [--sizes 8,1024]
                                                          [--collectives Allreduce,Bcast,Barrier]

The world is split into the even and the odd ranks, joined by an intercommunicator made twice: by
``mpicoll.Comm.Create_intercomm`` and by MPI.  For each collective and size, the two are timed in turns
(``rounds`` times ``calls`` back-to-back calls each, so the machine's load hits both alike); the table gives
the median microseconds per call, as OSU's latency benchmarks do, and mpicoll's time over MPI's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll

SIZES = (8, 1024, 65536, 1 << 20)   # bytes per rank


def calls(comm: MPI.Intercomm, nbytes: int, color: int) -> dict:
    n = nbytes // 8
    x, y = np.ones(n), np.empty(n)
    m = comm.Get_remote_size()
    gathered = np.empty(n * m)
    root = (MPI.ROOT if comm.Get_rank() == 0 else MPI.PROC_NULL) if color == 0 else 0
    return {
        "Allreduce": lambda: comm.Allreduce(x, y, op=MPI.SUM),
        "Bcast": lambda: comm.Bcast(x, root),
        "Allgather": lambda: comm.Allgather(x, gathered),
        "Barrier": comm.Barrier,
    }


def median_us(call, count: int, comm: MPI.Intracomm) -> float:
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(count):
        call()
    return (time.perf_counter() - t0) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="bytes per rank, comma-separated")
    parser.add_argument("--collectives", default="Allreduce,Bcast,Allgather,Barrier",
                        help="the collectives to time, comma-separated")
    ns = parser.parse_args()
    sizes = [int(size) for size in ns.sizes.split(",")]
    wanted = ns.collectives.split(",")
    world = MPI.COMM_WORLD
    if world.size < 2:
        raise SystemExit("run on 2 or more processes")
    color = world.rank % 2
    wrapped = mpicoll.Comm(world)
    half = wrapped.Split(color, world.rank)
    ours = half.Create_intercomm(0, wrapped, 1 - color)
    plain_half = world.Split(color, world.rank)
    theirs = plain_half.Create_intercomm(0, world, 1 - color, tag=3)
    if world.rank == 0:
        print(f"# intercommunicator collectives, {world.size} ranks ({(world.size + 1) // 2} + {world.size // 2}), "
              f"median of {ns.rounds} x {ns.calls} calls, {MPI.Get_library_version().splitlines()[0]}")
        print(f"{'# collective':<12}{'Size':>10}{'mpicoll (us)':>15}{'MPI (us)':>12}{'ratio':>8}")
    for nbytes in sizes:
        table_ours, table_theirs = calls(ours, nbytes, color), calls(theirs, nbytes, color)
        for name in wanted:
            if name == "Barrier" and nbytes != sizes[0]:
                continue
            for call in (table_ours[name], table_theirs[name]):   # warm up
                for _ in range(10):
                    call()
            a, b = [], []
            for _ in range(ns.rounds):
                a.append(median_us(table_ours[name], ns.calls, world))
                b.append(median_us(table_theirs[name], ns.calls, world))
            ta, tb = statistics.median(a), statistics.median(b)
            if world.rank == 0:
                size = "-" if name == "Barrier" else nbytes
                print(f"{name:<12}{size:>10}{ta:>15.2f}{tb:>12.2f}{ta / tb:>8.2f}", flush=True)
    for comm in (ours, theirs, half, plain_half):
        comm.Free()


if __name__ == "__main__":
    main()
