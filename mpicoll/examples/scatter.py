"""Scatter: rank i receives block i of the root's vector.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.scatter      (any N)

Before:  root: [0 1 2 3 ...] (two elements per rank)    others: nothing yet
After:   rank r: [2r, 2r+1]
Each algorithm is run and compared with MPI's own ``Scatter``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import show_everyone


def main() -> None:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    root, p = 0, world.size
    full = np.arange(2.0 * p) if world.rank == root else None   # only the root has data to send
    show_everyone(world, f"before Scatter from root {root}:", full)
    expected = np.zeros(2)
    world.Scatter(full, expected, root=root)                # MPI's own
    ok = True
    for algorithm in mpicoll.algorithms("scatter"):
        out = np.zeros(2)
        comm.Scatter(full, out, root=root, algorithm=algorithm)
        good = world.allreduce(bool(np.array_equal(out, expected)), op=MPI.LAND)
        ok &= good
        if world.rank == 0:
            print(f"  {algorithm:20s} {'matches' if good else 'DIFFERS FROM'} MPI's Scatter")
    show_everyone(world, "after Scatter (recvbuf):", out)
    if world.rank == 0:
        print("\nbinomial schedule: the root hands each child its subtree's blocks:")
        print(mpicoll.schedules("scatter", "binomial", p, root=root))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
