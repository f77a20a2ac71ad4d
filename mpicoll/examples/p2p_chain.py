"""Point-to-point messages along a chain: rank 0 -> 1 -> 2 -> ..., modified on the way.

Run:  mpirun -n 4 python -m mpicoll.examples.p2p_chain      (any N >= 1; N = 1 has no chain)

Rank 0 creates a small vector and sends it to rank 1 with ``Send``; every rank r
in the middle receives it with ``Recv`` from r - 1, adds r * 10 to every element
and sends it on to r + 1; the last rank prints what arrived.  ``Recv`` blocks
until the message is there, so the ranks run one after the other, like a bucket
brigade.  The last rank checks the result against the closed form
``start + 10 * (1 + 2 + ... + (N-1))``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    start = np.array([1.0, 2.0, 3.0])
    say(comm, f"{size} ranks; rank 0 starts with {start}, every later rank r adds {10} * r")
    data = start.copy() if rank == 0 else np.empty(3)
    if rank > 0:
        comm.Recv(data, source=rank - 1, tag=7)      # blocks until rank - 1 has sent
        print(f"rank {rank} received {data} from rank {rank - 1}", flush=True)
        data += 10 * rank                            # the modification on the way
    if rank < size - 1:
        comm.Send(data, dest=rank + 1, tag=7)        # the tag must match the receiver's
        print(f"rank {rank} sent     {data} to   rank {rank + 1}", flush=True)
    ok = True
    if rank == size - 1:
        expected = start + 10 * sum(range(size))
        print(f"rank {rank} (last) holds {data}; expected {expected}", flush=True)
        ok = bool(np.array_equal(data, expected))
    check(comm, ok, "the last rank holds start + 10 * (1 + ... + (N-1))")


if __name__ == "__main__":
    main()
