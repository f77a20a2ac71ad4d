"""Reduce: the root gets the element-wise sum of every rank's vector.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.reduce      (any N)

Before:  rank r: [r+1, 10(r+1)]
After:   root: [sum of r+1, sum of 10(r+1)]; the other ranks' buffers are untouched.
Each algorithm is run and compared with MPI's own ``Reduce``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import show_everyone


def main() -> None:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    root = world.size - 1                                   # any rank can be the root
    x = np.array([1.0, 10.0]) * (world.rank + 1)
    show_everyone(world, f"before Reduce(SUM) to root {root}:", x)
    expected = np.zeros(2)
    world.Reduce(x, expected, op=MPI.SUM, root=root)        # MPI's own
    ok = True
    for algorithm in mpicoll.algorithms("reduce"):
        out = np.zeros(2)                                   # only the root's is written
        comm.Reduce(x, out, op=MPI.SUM, root=root, algorithm=algorithm)
        good = world.allreduce(bool(world.rank != root or np.array_equal(out, expected)), op=MPI.LAND)
        ok &= good
        if world.rank == 0:
            print(f"  {algorithm:20s} {'matches' if good else 'DIFFERS FROM'} MPI's Reduce")
    show_everyone(world, "after Reduce (recvbuf):", out)
    if world.rank == 0:
        print("\nbinomial schedule: a tree toward rank 0 in rank order, then rank 0 -> root:")
        print(mpicoll.schedules("reduce", "binomial", world.size, root=root))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
