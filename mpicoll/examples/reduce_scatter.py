"""Reduce-scatter, every algorithm, checked against MPI's own; with the textbook picture.

Run:  python -m mpicoll.launch -n 4 -m mpicoll.examples.reduce_scatter      (any N >= 1)

Every rank holds N blocks; block j of the sum over all ranks ends at rank j.
Then the same with uneven counts (Reduce_scatter: rank j gets j + 1 numbers).
Rank 0 prints what each rank holds before and after.
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
    x = np.arange(size, dtype=np.int64) + 100 * rank      # block j of rank r: 100 r + j
    expected = np.empty(1, dtype=np.int64)
    world.Reduce_scatter_block(x, expected)
    before = world.gather(x)
    if rank == 0:
        show_states("before Reduce_scatter_block (one number per block):", before)
    ok, verdicts, shown = True, [], None
    for algorithm in mpicoll.algorithms("reduce_scatter_block"):
        out = np.zeros(1, dtype=np.int64)
        comm.Reduce_scatter_block(x, out, algorithm=algorithm)
        same = world.allreduce(bool(np.array_equal(out, expected)), op=MPI.LAND)
        ok &= same
        after = world.gather(out)
        if rank == 0:
            verdicts.append(f"  {algorithm}: {'matches' if same else 'DIFFERS FROM'} the built-in")
            if algorithm == "ring":
                shown = ("after (rank j has block j summed over all ranks):", after)
    if rank == 0 and shown is not None:
        show_states(*shown)
        print("every algorithm against the built-in:", *verdicts, sep="\n")
    # uneven: rank j receives j + 1 elements; the input is cut accordingly
    counts = [j + 1 for j in range(size)]
    y = np.arange(sum(counts), dtype=np.int64) + 100 * rank
    ref = np.empty(counts[rank], dtype=np.int64)
    world.Reduce_scatter(y, ref, counts)
    verdicts, shown = [], None
    for algorithm in mpicoll.algorithms("reduce_scatter"):
        out = np.zeros(counts[rank], dtype=np.int64)
        comm.Reduce_scatter(y, out, counts, algorithm=algorithm)
        same = world.allreduce(bool(np.array_equal(out, ref)), op=MPI.LAND)
        ok &= same
        after = world.gather(out)
        if rank == 0:
            verdict = "matches" if same else "DIFFERS FROM"
            verdicts.append(f"  {algorithm}: {verdict} the built-in")
            if algorithm == "pairwise":
                shown = (f"\nafter Reduce_scatter with counts {counts} (rank j gets j + 1 sums):", after)
    if rank == 0 and shown is not None:
        show_states(*shown)
        print("every algorithm against the built-in:", *verdicts, sep="\n")
    if rank == 0:
        print("\nThe ring's schedule:\n")
        print(mpicoll.schedules("reduce_scatter_block", "ring", size))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
