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


def distributed_softmax(comm: MPI.Comm, shard: np.ndarray) -> np.ndarray:
    """Softmax of the whole vector, returned for this rank's shard."""
    m = np.array(shard.max() if shard.size else -np.inf)
    comm.Allreduce(MPI.IN_PLACE, m, op=MPI.MAX)           # global max, for numerical safety
    e = np.exp(shard - m)
    denom = np.array(e.sum())
    comm.Allreduce(MPI.IN_PLACE, denom, op=MPI.SUM)       # global sum of exponentials
    return e / denom


def distributed_l2_normalize(comm: MPI.Comm, shard: np.ndarray) -> tuple[np.ndarray, float]:
    """This rank's shard of x / ||x||_2, and the norm."""
    sq = np.array(np.dot(shard, shard))
    comm.Allreduce(MPI.IN_PLACE, sq, op=MPI.SUM)          # global sum of squares
    norm = float(np.sqrt(sq))
    return shard / norm, norm


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    full = np.random.default_rng(0).standard_normal(LENGTH) * 30   # large values: naive exp would overflow
    shard = np.array_split(full, size)[rank]
    print(f"rank {rank}: shard of {shard.size} elements, local max {shard.max():.2f}", flush=True)

    soft = distributed_softmax(comm, shard)
    e = np.exp(full - full.max())
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
