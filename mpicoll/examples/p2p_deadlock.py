"""The send/send deadlock, shown safely, and three ways to fix it.

Run:  mpirun -n 4 python -m mpicoll.examples.p2p_deadlock   (any even N >= 2; with odd N the last rank sits out)

Ranks pair up (0 with 1, 2 with 3, ...) and swap a large array.  The naive code is
``Send(mine, partner); Recv(theirs, partner)`` on both sides.  A small message may
slip through because MPI copies it into a buffer ("eager" protocol), but a large
one is sent only once the receiver has posted its receive ("rendezvous"): both
ranks sit in ``Send`` waiting for a receive the other will never post.  That is a
deadlock, and a real program would hang forever.

To show it without hanging, this example uses ``Issend`` (a *synchronous* send
that cannot complete before the matching receive has started, whatever the size)
and polls it with ``Test`` for a second: it never completes, and that is the
deadlock, detected.  Then both ranks post their receives, which rescues the
sends.  The three fixes follow, each checked:

1. ordering: even ranks send first then receive, odd ranks receive then send;
2. ``Sendrecv``: MPI does both at once and orders them itself;
3. ``Isend``/``Irecv`` then ``Waitall``: nothing blocks until both are posted.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

N = 1 << 18          # 2 MiB of float64: far above any eager limit
PATIENCE = 1.0       # seconds to wait before calling it a deadlock


def demonstrate_deadlock(comm: MPI.Comm, partner: int, mine: np.ndarray, theirs: np.ndarray) -> bool:
    """Both ranks send first; return True if no send anywhere completed in time (the deadlock)."""
    comm.Barrier()                                   # start the clocks together
    req = comm.Issend(mine, dest=partner, tag=1)     # like Send, but never completes before the receive
    deadline = time.monotonic() + PATIENCE
    completed = False
    while time.monotonic() < deadline and not completed:
        completed = req.Test()
        time.sleep(0.01)
    # Nobody posts a receive before everybody has stopped waiting, so "completed" is honest.
    anyone_completed = comm.allreduce(completed and partner != MPI.PROC_NULL, op=MPI.LOR)
    # Rescue: post the receives the naive program never reached; the sends can now finish.
    comm.Recv(theirs, source=partner, tag=1)
    req.Wait()
    return not anyone_completed


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    partner = rank ^ 1 if (rank ^ 1) < size else MPI.PROC_NULL   # odd N: the last rank has no partner
    mine = np.full(N, float(rank))
    theirs = np.empty(N)
    expected = float(partner) if partner != MPI.PROC_NULL else None
    pairs = ", ".join(f"({a},{a + 1})" for a in range(0, size - 1, 2)) or "none"
    alone = f"; rank {size - 1} has no partner" if size % 2 else ""
    say(comm, f"{size} ranks in pairs {pairs}{alone}; each pair swaps {mine.nbytes >> 20} MiB")

    def received() -> bool:
        return expected is None or bool(np.all(theirs == expected))

    # 0. the deadlock: both sides send first
    stalled = demonstrate_deadlock(comm, partner, mine, theirs)
    say(comm, f"\nnaive send/send: after {PATIENCE:.0f} s no send had completed on any rank: "
              f"{'deadlock detected' if stalled else 'no deadlock?'} (rescued by posting the receives)")
    if size == 1:
        say(comm, "(one rank has no partner: nothing can deadlock; run with N >= 2)")
    check(comm, (stalled or size == 1) and received(), "both synchronous sends stalled until the receives were posted")

    # 1. ordering: break the symmetry by rank parity
    theirs[:] = -1
    if rank % 2 == 0:
        comm.Send(mine, dest=partner, tag=2)
        comm.Recv(theirs, source=partner, tag=2)
    else:
        comm.Recv(theirs, source=partner, tag=2)
        comm.Send(mine, dest=partner, tag=2)
    check(comm, received(), "fix 1, even ranks send first, odd ranks receive first")

    # 2. Sendrecv: one call, MPI pairs the two directions itself
    theirs[:] = -1
    comm.Sendrecv(mine, dest=partner, sendtag=3, recvbuf=theirs, source=partner, recvtag=3)
    check(comm, received(), "fix 2, Sendrecv")

    # 3. nonblocking: post both, then wait for both
    theirs[:] = -1
    reqs = [comm.Irecv(theirs, source=partner, tag=4), comm.Isend(mine, dest=partner, tag=4)]
    MPI.Request.Waitall(reqs)
    check(comm, received(), "fix 3, Irecv + Isend + Waitall")


if __name__ == "__main__":
    main()
