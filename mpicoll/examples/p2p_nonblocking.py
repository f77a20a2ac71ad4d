"""Nonblocking messages overlapped with computation: a halo exchange.

Run:  mpirun -n 4 python -m mpicoll.examples.p2p_nonblocking   (any N >= 1)

A long periodic 1-D array is split over the ranks.  One smoothing step replaces
every element by the mean of itself and its two neighbours, so each rank needs one
element from its left neighbour and one from its right (the "halo").  The rank
posts ``Irecv`` for both halo cells and ``Isend`` of its own edge cells, then
smooths its *interior*, which needs no halo, while the messages travel; only then
does it ``Waitall`` and finish the two edge elements.  ``Test`` calls during the
work show whether the messages were still in flight.  The result is checked
against the same smoothing of the whole array in one process.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

TOTAL = 40_000
STEPS = 5


def smooth_serial(x: np.ndarray) -> np.ndarray:
    """The reference: one periodic 3-point smoothing step of the whole array."""
    return (np.roll(x, 1) + x + np.roll(x, -1)) / 3


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    full = np.random.default_rng(0).standard_normal(TOTAL)       # the same on every rank
    lo, hi = (TOTAL * rank) // size, (TOTAL * (rank + 1)) // size
    x = full[lo:hi].copy()
    left, right = (rank - 1) % size, (rank + 1) % size
    halo_l, halo_r = np.empty(1), np.empty(1)
    in_flight = 0
    for _ in range(STEPS):
        reqs = [comm.Irecv(halo_l, source=left, tag=0), comm.Irecv(halo_r, source=right, tag=1),
                comm.Isend(x[-1:], dest=right, tag=0), comm.Isend(x[:1], dest=left, tag=1)]
        new = np.empty_like(x)
        new[1:-1] = (x[:-2] + x[1:-1] + x[2:]) / 3                 # interior: overlapped with the messages
        in_flight += not MPI.Request.Testall(reqs)                  # were they still travelling?
        MPI.Request.Waitall(reqs)
        new[0] = (halo_l[0] + x[0] + (x[1] if len(x) > 1 else halo_r[0])) / 3
        new[-1] = ((x[-2] if len(x) > 1 else halo_l[0]) + x[-1] + halo_r[0]) / 3
        x = new
        full = smooth_serial(full)
    print(f"rank {rank}: elements {lo}..{hi - 1}; messages still in flight after the interior work "
          f"in {in_flight} of {STEPS} steps", flush=True)
    say(comm, "(on a busy 2-core machine the answer varies; on a real network it is usually 'all')")
    check(comm, bool(np.allclose(x, full[lo:hi], rtol=0, atol=1e-12)),
          f"{STEPS} overlapped smoothing steps equal the single-process result")


if __name__ == "__main__":
    main()
