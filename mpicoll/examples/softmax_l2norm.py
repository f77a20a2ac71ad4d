"""Softmax and L2 normalisation of a vector sharded over the ranks.

Run:  mpirun -n 4 python -m mpicoll.examples.softmax_l2norm   (any N >= 1)

A vector of length 1001 is split into N uneven shards, one per rank (as the
vocabulary dimension of a large output layer is split in tensor parallelism).
Neither operation needs the whole vector on any rank; each needs only scalars:

* softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m), with m = max_j x_j for
  numerical safety: one all-reduce with MAX for m, then one with SUM for the
  denominator;
* x / ||x||_2: one all-reduce with SUM of the local sums of squares.

Each rank's shard of the result is checked against the same computation on the
whole vector in one process.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

LENGTH = 1001


def distributed_softmax(comm: MPI.Comm, shard: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Softmax of the whole vector for this rank's shard, the global max and the denominator."""
    m = np.array(shard.max() if shard.size else -np.inf)
    comm.Allreduce(MPI.IN_PLACE, m, op=MPI.MAX)           # global max, for numerical safety
    e = np.exp(shard - m)
    denom = np.array(e.sum())
    comm.Allreduce(MPI.IN_PLACE, denom, op=MPI.SUM)       # global sum of exponentials
    return e / denom, float(m), float(denom)


def distributed_l2_normalize(comm: MPI.Comm, shard: np.ndarray) -> tuple[np.ndarray, float]:
    """This rank's shard of x / ||x||_2, and the norm."""
    sq = np.array(np.dot(shard, shard))
    comm.Allreduce(MPI.IN_PLACE, sq, op=MPI.SUM)          # global sum of squares
    norm = float(np.sqrt(sq))
    return shard / norm, norm


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    full = np.random.default_rng(0).standard_normal(LENGTH) * 30   # large values: exp(x) alone would reach about 1e40
    shard = np.array_split(full, size)[rank]
    shards = comm.gather(f"rank {rank}: elements {shard.size:4d}, local max {shard.max():7.2f}")
    say(comm, *(shards or []))

    soft, m, denom = distributed_softmax(comm, shard)
    say(comm, f"global max m = {m:.2f} (the largest local max; one Allreduce with MAX)",
        f"denominator sum_j exp(x_j - m) = {denom:.6f} (one Allreduce with SUM of the local sums)",
        "without subtracting m, exp(x_j) would overflow for x_j above about 709" if m > 709 else
        f"subtracting m keeps every exp() <= 1 (exp({m:.0f}) alone would be {np.exp(m):.3g})")
    e = np.exp(full - full.max())
    check(comm, m == full.max() and bool(np.isclose(denom, e.sum(), rtol=1e-12)),
          "the global max and denominator equal NumPy's on the whole vector")
    reference = np.array_split(e / e.sum(), size)[rank]
    check(comm, bool(np.allclose(soft, reference, rtol=1e-12, atol=0)),
          "sharded softmax equals the whole-vector softmax")
    total = np.array(soft.sum())
    comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
    say(comm, f"softmax sums to {float(total):.15f} over all shards")

    unit, norm = distributed_l2_normalize(comm, shard)
    reference = np.array_split(full / np.linalg.norm(full), size)[rank]
    say(comm, f"||x||_2 = {norm:.6f} (NumPy on the whole vector: {np.linalg.norm(full):.6f})")
    check(comm, bool(np.allclose(unit, reference, rtol=1e-12, atol=1e-15)), "sharded L2 normalisation equals NumPy's")


if __name__ == "__main__":
    main()
