"""Context parallelism (ring attention): K/V blocks travel around the ring, Q stays home.

Run:  mpirun -n 4 python -m mpicoll.examples.ring_attention   (any N >= 1)

A long sequence is split into N blocks, one per rank; rank r holds the queries,
keys and values of its block (Q_r, K_r, V_r).  Attention softmax(Q K^T / sqrt(d)) V
needs every key for every query, but not all at once: in N steps each rank
attends Q_r to the K/V block it currently holds, then passes that block to its
right neighbour and receives the next from its left (``Sendrecv``).  The partial
results are merged with the *online softmax* (as in FlashAttention): keep per
query the running maximum score m, the running denominator l and the running
weighted sum o; when a new block raises the maximum, rescale the old l and o by
exp(m_old - m_new).  After N steps o / l is exact attention, and no rank ever
held more than two K/V blocks.

The check: each rank's output equals full attention over the whole sequence.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

SEQ, D = 37, 8          # 37: blocks of uneven length on most N


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((SEQ, D)) for _ in range(3))    # the whole sequence, for the check
    lengths = [len(b) for b in np.array_split(np.arange(SEQ), size)]
    starts = np.concatenate(([0], np.cumsum(lengths)))
    mine = slice(starts[rank], starts[rank + 1])
    q_r = q[mine]
    kv = np.concatenate([k[mine], v[mine]], axis=1)               # K and V travel together

    m = np.full(len(q_r), -np.inf)                                # running max score per query
    l_sum = np.zeros(len(q_r))                                    # running softmax denominator
    o = np.zeros((len(q_r), D))                                   # running weighted sum of values
    right, left = (rank + 1) % size, (rank - 1) % size
    for step in range(size):
        owner = (rank - step) % size                              # whose block we hold now
        scores = q_r @ kv[:, :D].T / np.sqrt(D)
        m_new = np.maximum(m, scores.max(axis=1, initial=-np.inf))
        scale = np.exp(m - m_new)                                 # rescale what was summed so far
        p = np.exp(scores - m_new[:, None])
        l_sum = l_sum * scale + p.sum(axis=1)
        o = o * scale[:, None] + p @ kv[:, D:]
        m = m_new
        if rank == 0:
            print(f"step {step}: rank 0 attends to the K/V block of rank {owner} "
                  f"(positions {starts[owner]}..{starts[owner + 1] - 1})", flush=True)
        if step < size - 1:                                       # pass the block on around the ring
            nxt = np.empty((lengths[(owner - 1) % size], 2 * D))
            comm.Sendrecv(kv, dest=right, recvbuf=nxt, source=left)
            kv = nxt
    out = o / l_sum[:, None]

    scores = q @ k.T / np.sqrt(D)                                 # full attention in one process
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    full = (weights / weights.sum(axis=1, keepdims=True)) @ v
    say(comm, f"sequence of {SEQ} split into blocks {lengths}; {size} ring steps")
    check(comm, bool(np.allclose(out, full[mine], rtol=1e-12, atol=1e-12)), "ring attention equals full attention")


if __name__ == "__main__":
    main()
