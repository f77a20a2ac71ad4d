"""Mixture of experts: tokens dispatched to their expert's rank with Alltoallv, and back.

Run:  mpirun -n 4 python -m mpicoll.examples.moe_alltoall   (any N >= 1: one expert per rank)

Every rank holds a few tokens (vectors of width D) and one expert (a D x D
matrix).  A router scores every token against every expert and picks the best
(top-1).  Expert e lives on rank e, so the tokens must travel:

1. sort the local tokens by destination rank and count them per destination;
2. ``Alltoall`` of the counts: every rank learns how many tokens it will receive
   from each rank (the counts differ per step, hence the v-variant next);
3. ``Alltoallv`` of the tokens (dispatch); the expert processes what it received;
4. ``Alltoallv`` back with the send and receive counts swapped (combine), and
   undo the sort.

The check: every token's output equals its expert applied to it in one process.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

TOKENS, D = 10, 4


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    rng = np.random.default_rng(0)
    experts = rng.standard_normal((size, D, D))               # all of them, for the check
    router = rng.standard_normal((D, size))
    tokens = np.random.default_rng(100 + rank).standard_normal((TOKENS, D))
    choice = np.argmax(tokens @ router, axis=1)               # top-1 routing: expert (= rank) per token

    order = np.argsort(choice, kind="stable")                 # 1. group the tokens by destination
    send = np.ascontiguousarray(tokens[order])
    send_counts = np.bincount(choice, minlength=size)
    recv_counts = np.empty(size, dtype=send_counts.dtype)
    comm.Alltoall(send_counts, recv_counts)                   # 2. who sends me how many

    def v(counts: np.ndarray) -> tuple[list[int], list[int]]:
        """(counts, displacements) in numbers (tokens x D) for a v-variant call."""
        n = [int(c) * D for c in counts]
        return n, [int(d) for d in np.concatenate(([0], np.cumsum(n)[:-1]))]

    received = np.empty((int(recv_counts.sum()), D))
    comm.Alltoallv([send, v(send_counts), MPI.DOUBLE], [received, v(recv_counts), MPI.DOUBLE])   # 3. dispatch
    processed = received @ experts[rank]                      # this rank's expert at work
    back = np.empty_like(send)
    comm.Alltoallv([processed, v(recv_counts), MPI.DOUBLE], [back, v(send_counts), MPI.DOUBLE])   # 4. combine
    out = np.empty_like(tokens)
    out[order] = back                                         # undo the sort

    print(f"rank {rank}: sends {send_counts.tolist()} tokens to experts 0..{size - 1}, "
          f"its expert got {recv_counts.tolist()} from ranks 0..{size - 1}", flush=True)
    expected = np.einsum("td,tde->te", tokens, experts[choice])
    load = np.empty(size, dtype=recv_counts.dtype)
    comm.Allreduce(send_counts, load, op=MPI.SUM)
    say(comm, f"expert load (tokens per expert): {load.tolist()}; an unbalanced router makes the slowest "
              "expert set the pace (real MoE layers cap it with a capacity factor)")
    check(comm, bool(np.allclose(out, expected, rtol=1e-12, atol=1e-12)),
          "every token came back processed by its expert")


if __name__ == "__main__":
    main()
