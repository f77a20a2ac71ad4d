"""All-to-all, every algorithm, checked against MPI's own; with the textbook picture.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.alltoall      (any N >= 1)

Rank r's block j (the number 10 r + j) goes to rank j, which stores it as its
block r: the matrix of blocks is transposed.  Rank 0 prints each rank's blocks
before and after, then Bruck's schedule.
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
    x = np.arange(size, dtype=np.int64) + 10 * rank          # block j is 10 r + j: "from r, for j"
    expected = np.empty_like(x)
    world.Alltoall(x, expected)
    before = world.gather(x)
    if rank == 0:
        show_states("before Alltoall (row r = rank r's blocks, one per destination):", before)
    ok, verdicts, shown = True, [], None
    for algorithm in mpicoll.algorithms("alltoall"):
        out = np.zeros_like(x)
        comm.Alltoall(x, out, algorithm=algorithm)
        same = world.allreduce(bool(np.array_equal(out, expected)), op=MPI.LAND)
        ok &= same
        after = world.gather(out)
        if rank == 0:
            verdicts.append(f"  {algorithm}: {'matches' if same else 'DIFFERS FROM'} the built-in")
            if algorithm == "pairwise":
                shown = ("after (the transpose: rank j holds 10 r + j from every r):", after)
    if rank == 0 and shown is not None:
        show_states(*shown)
        print("every algorithm against the built-in:", *verdicts, sep="\n")
    if rank == 0:
        print("\nBruck's schedule (rotate, lg p packed exchanges, rotate back):\n")
        print(mpicoll.schedules("alltoall", "bruck", size))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
