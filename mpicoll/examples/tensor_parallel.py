"""Tensor parallelism (Megatron-style): an MLP block split by columns, then by rows.

Run:  mpirun -n 4 python -m mpicoll.examples.tensor_parallel   (any N >= 1)

The block is Z = gelu(X A) B with X of shape (tokens, d), A (d, h), B (h, d).
Every rank has the whole input X (the activations are replicated) but only a
slice of each weight:

* A is split by **columns**: rank r holds A[:, cols_r] and computes
  Y_r = gelu(X A_r), its own columns of gelu(X A).  GELU acts element by element,
  so no communication is needed here;
* B is split by **rows** with the same slices: rank r holds B[cols_r, :] and
  computes Z_r = Y_r B_r, a partial sum of shape (tokens, d).  Z = sum_r Z_r:
  **one all-reduce** finishes the block.

A column-parallel layer on its own would end with an all-gather of the column
slices instead; the example shows that too.  Checks: both equal the unsplit
computation in one process.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

TOKENS, D, H = 6, 8, 32


def gelu(x: np.ndarray) -> np.ndarray:
    """The tanh approximation of GELU (element-wise)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    rng = np.random.default_rng(0)                        # the same full weights on every rank, for the check
    x, a, b = rng.standard_normal((TOKENS, D)), rng.standard_normal((D, H)), rng.standard_normal((H, D))
    cols = np.array_split(np.arange(H), size)[rank]       # this rank's slice of the hidden dimension
    a_r, b_r = a[:, cols], b[cols, :]                     # what a real rank would store
    print(f"rank {rank}: A[:, {cols[0] if cols.size else '-'}:{cols[-1] + 1 if cols.size else '-'}] "
          f"{a_r.shape} and B rows of the same slice {b_r.shape}", flush=True)

    y_r = gelu(x @ a_r)                                   # column-parallel: no communication
    z = y_r @ b_r                                         # row-parallel: a partial sum ...
    comm.Allreduce(MPI.IN_PLACE, z, op=MPI.SUM)           # ... completed by one all-reduce
    reference = gelu(x @ a) @ b
    say(comm, f"Z = gelu(X A) B of shape {z.shape}: one all-reduce of {z.nbytes} bytes per block")
    check(comm, bool(np.allclose(z, reference, rtol=1e-12, atol=1e-12)),
          "column- then row-parallel block equals the unsplit one")

    # a column-parallel layer alone: all-gather the column slices (uneven: Allgatherv)
    counts = [TOKENS * len(c) for c in np.array_split(np.arange(H), size)]
    gathered = np.empty(TOKENS * H)
    comm.Allgatherv(np.ascontiguousarray(y_r.T).ravel(), [gathered, counts])   # slices are column-major blocks
    y = gathered.reshape(H, TOKENS).T
    check(comm, bool(np.allclose(y, gelu(x @ a), rtol=1e-12, atol=1e-12)), "all-gathered column slices equal gelu(X A)")


if __name__ == "__main__":
    main()
