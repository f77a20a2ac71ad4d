"""Gather: the root collects one block from every rank, in rank order.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.gather      (any N)

Before:  rank r: [r r]
After:   root: [0 0 1 1 2 2 ...]
Each algorithm is run and compared with MPI's own ``Gather``.
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
    x = np.full(2, float(world.rank))
    show_everyone(world, f"before Gather to root {root}:", x)
    expected = np.zeros(2 * p) if world.rank == root else None
    world.Gather(x, expected, root=root)                    # MPI's own
    ok = True
    for algorithm in mpicoll.algorithms("gather"):
        out = np.zeros(2 * p) if world.rank == root else None   # only the root needs a receive buffer
        comm.Gather(x, out, root=root, algorithm=algorithm)
        good = world.allreduce(bool(out is None or np.array_equal(out, expected)), op=MPI.LAND)
        ok &= good
        if world.rank == 0:
            print(f"  {algorithm:20s} {'matches' if good else 'DIFFERS FROM'} MPI's Gather")
    show_everyone(world, "after Gather:", out)
    if world.rank == 0:
        print("\nbinomial schedule: each rank passes its whole subtree up:")
        print(mpicoll.schedules("gather", "binomial", p, root=root))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
