"""Broadcast: the root's vector is copied to every rank.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.bcast      (any N)

Before:  rank 0: [a0 a1 a2 a3]    rank 1: [. . . .]    ...
After:   every rank: [a0 a1 a2 a3]
Each algorithm is run and compared with MPI's own ``Bcast``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import show_everyone


def main() -> None:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    root = 0
    start = np.arange(1.0, 5.0) if world.rank == root else np.zeros(4)   # only the root has data
    show_everyone(world, f"before Bcast from root {root}:", start)
    ok = True
    for algorithm in mpicoll.algorithms("bcast"):
        x = start.copy()
        comm.Bcast(x, root=root, algorithm=algorithm)     # mpicoll's, by hand on point-to-point calls
        expected = start.copy()
        world.Bcast(expected, root=root)                  # MPI's own
        good = world.allreduce(bool(np.array_equal(x, expected)), op=MPI.LAND)
        ok &= good
        if world.rank == 0:
            print(f"  {algorithm:20s} {'matches' if good else 'DIFFERS FROM'} MPI's Bcast")
    show_everyone(world, "after Bcast:", x)
    if world.rank == 0:
        print("\nbinomial schedule (who sends what in each round):")
        print(mpicoll.schedules("bcast", "binomial", world.size, root=root))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
