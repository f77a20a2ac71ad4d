"""All-gather, every algorithm, checked against MPI's own; with the textbook picture.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.allgather      (any N >= 1)

Rank r starts with one block, "r0 r1" (two numbers); afterwards every rank
holds every rank's block, in rank order.  Rank 0 prints what each rank holds
before and after, then the ring algorithm's schedule.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import show_states


def main() -> int:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    rank, size = comm.rank, comm.size
    mine = np.array([10 * rank, 10 * rank + 1], dtype=np.int64)   # this rank's block
    expected = np.empty(2 * size, dtype=np.int64)
    world.Allgather(mine, expected)                                 # MPI's own, for comparison
    before = world.gather(mine)
    if rank == 0:
        show_states("before Allgather (each rank has its own block):", before)
    ok, verdicts, shown = True, [], None
    for algorithm in mpicoll.algorithms("allgather"):
        out = np.zeros(2 * size, dtype=np.int64)
        comm.Allgather(mine, out, algorithm=algorithm)
        same = world.allreduce(bool(np.array_equal(out, expected)), op=MPI.LAND)
        ok &= same
        after = world.gather(out)
        if rank == 0:
            verdicts.append(f"  {algorithm}: {'matches' if same else 'DIFFERS FROM'} the built-in")
            if algorithm == "ring":
                shown = ("after Allgather (every rank has every block):", after)
    if rank == 0 and shown is not None:
        show_states(*shown)
        print("every algorithm against the built-in:", *verdicts, sep="\n")
    if rank == 0:
        print("\nThe ring's schedule (print(mpicoll.schedules('allgather', 'ring', p))):\n")
        print(mpicoll.schedules("allgather", "ring", size))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
