"""Mismatched collective calls: MPI's built-in returns wrong data in silence; mpicoll raises on every rank.

Run:  mpirun -n 4 python -m mpicoll.examples.mismatch        (any N >= 2)

MPI requires every rank of a communicator to make the same collective calls, in the same order, with the
same count, type signature, root and op.  A program that breaks the rule is wrong, and MPI does not promise
to say so.  Three wrong programs, and one right one:

1. rank 0 reduces with ``MAX`` where the others use ``SUM``.  On MPI's built-in ``Allreduce`` the call
   returns normally, and the ranks hold different "sums".  On ``mpicoll.Comm`` every rank raises
   ``mpicoll.MismatchError`` saying what each rank called.
2. rank 1 calls ``Bcast`` where the others call ``Allreduce``.  The built-in hangs (not run here: it would
   not come back); mpicoll raises on every rank within about a second.
3. rank 1 skips an ``Allreduce`` and goes on to the ``Barrier`` after it: the same.
4. rank 1 is two seconds late: not an error, and mpicoll says nothing.

How: every message of a call carries a hash of what must match (in its tag), so messages of different calls
never match; a call that waits half a second asks its peers what they called (see
``mpicoll.engine.mismatch``).  A correct program pays nothing for it.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say


def outcome(program, comm: mpicoll.Comm) -> tuple[str, float]:
    """Run ``program(comm)`` then a Barrier on ``comm``: (what happened, seconds)."""
    t0 = time.monotonic()
    try:
        program(comm)
        comm.Barrier()
        return "returned normally", time.monotonic() - t0
    except mpicoll.MismatchError as exc:
        return f"raised MismatchError: {exc}", time.monotonic() - t0


def report(world: MPI.Comm, title: str, text: str, seconds: float) -> list[str]:
    """Every rank's line, printed by rank 0; the lines."""
    lines = world.gather(f"  rank {world.rank} ({seconds:.2f} s): {text}")
    if world.rank == 0:
        print(title)
        print("\n".join(lines), flush=True)
    return world.bcast(lines)


def main() -> None:
    world = MPI.COMM_WORLD
    rank, size = world.rank, world.size
    if size < 2:
        say(world, "a mismatch needs two ranks: run with mpirun -n 2 or more")
        return
    x, y = np.full(4, rank + 1.0), np.zeros(4)
    odd = MPI.MAX if rank == 0 else MPI.SUM

    world.Allreduce(x, y, op=odd)                       # 1, on the built-in: no error, different answers
    answers = world.allgather(float(y[0]))
    say(world, "1. rank 0 reduces with MAX, the others with SUM", "   on MPI's built-in Allreduce: "
        f"returned normally on every rank, the ranks hold {answers}")
    check(world, len(set(answers)) > 1, "the built-in returned different answers in silence")

    programs = [
        ("   on mpicoll", lambda c: c.Allreduce(x, y, op=odd)),
        ("2. rank 1 calls Bcast where the others call Allreduce, on mpicoll",
         lambda c: c.Bcast(x, root=1) if rank == 1 else c.Allreduce(x, y)),
        ("3. rank 1 skips an Allreduce and goes on to the Barrier, on mpicoll",
         lambda c: None if rank == 1 else c.Allreduce(x, y)),
    ]
    for title, program in programs:
        comm = mpicoll.Comm(world.Dup())                # (a mismatched communicator stays unusable: a new one each)
        text, seconds = outcome(program, comm)
        lines = report(world, title, text, seconds)
        check(world, all("MismatchError" in line for line in lines), "every rank raised MismatchError")
        comm.Free()

    comm = mpicoll.Comm(world.Dup())

    def late(c: mpicoll.Comm) -> None:
        if rank == 1:
            time.sleep(2.0)
        c.Allreduce(x, y)
    text, seconds = outcome(late, comm)
    report(world, "4. rank 1 is two seconds late, on mpicoll: not an error", text, seconds)
    check(world, text == "returned normally" and y[0] == size * (size + 1) / 2, "a late rank is not reported")
    comm.Free()


if __name__ == "__main__":
    main()
