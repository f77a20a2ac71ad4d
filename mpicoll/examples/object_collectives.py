"""Python objects through collectives: what pickling costs next to the buffer form, measured side by side.

Run:  mpirun -n 4 python -m mpicoll.examples.object_collectives   (any N)

``comm.bcast(obj)``, ``comm.allreduce(obj, op)`` and the other lowercase
collectives take any picklable object.  mpicoll runs them on the same
schedules as the buffer collectives (a binomial tree for ``bcast``, recursive
doubling for ``allreduce``), one whole object per block, pickled once with
mpi4py's ``MPI.pickle``.  Ops apply as mpi4py applies them (``MPI.SUM`` is
``+``, any callable works, in rank order).  This example shows results first
(a dict broadcast, a list concatenated in rank order, MAXLOC on pairs), then
times the same all-reduce of a float64 array three ways in one run:
``Allreduce`` on the buffer, ``allreduce`` of the array as an object through
mpicoll, and mpi4py's own ``allreduce``.  The ratios are what pickling and
the Python-level reduction cost on this machine.
"""

from __future__ import annotations

import operator
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

REPEAT = 30


def timed(comm: MPI.Comm, call) -> float:
    """Median seconds of ``call()`` over REPEAT runs, the slowest rank's each time."""
    times = []
    for _ in range(REPEAT):
        comm.Barrier()
        t0 = time.perf_counter()
        call()
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return float(np.median(times))


def main() -> None:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    rank, size = comm.rank, comm.size
    config = comm.bcast({"lr": 0.1, "layers": [64, 32]} if rank == 0 else None, root=0)
    check(world, config == {"lr": 0.1, "layers": [64, 32]}, "bcast of a dict from rank 0")
    words = comm.allreduce([f"r{rank}"], op=operator.add)
    check(world, words == [f"r{r}" for r in range(size)], "allreduce with + on lists: concatenated in rank order")
    best = comm.allreduce((float(rank % 3), rank), op=MPI.MAXLOC)
    check(world, best == world.allreduce((float(rank % 3), rank), op=MPI.MAXLOC), "MAXLOC on (value, rank) pairs, "
          "as mpi4py's own")
    say(world, f"\nall-reduce of n float64 on {size} ranks: median of {REPEAT}, seconds (ratio to the buffer form)")
    for n in (1, 1000, 100_000):
        x = np.full(n, 1.0 + rank)
        out = np.empty_like(x)
        buf = timed(world, lambda x=x, out=out: comm.Allreduce(x, out, op=MPI.SUM))
        ours = timed(world, lambda x=x: comm.allreduce(x, op=MPI.SUM))
        theirs = timed(world, lambda x=x: world.allreduce(x, op=MPI.SUM))
        check(world, np.array_equal(comm.allreduce(x, op=MPI.SUM), out), f"n={n}: object and buffer results agree")
        say(world, f"  n={n:>7}: Allreduce {buf:.2e}   mpicoll allreduce {ours:.2e} ({ours / buf:.1f}x)   "
                   f"mpi4py allreduce {theirs:.2e} ({theirs / buf:.1f}x)")


if __name__ == "__main__":
    main()
