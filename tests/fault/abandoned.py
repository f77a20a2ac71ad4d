"""Programs that end with mpicoll requests outstanding, or run without the progress thread (issue 25); run by
``tests/fault/test_abandoned.py`` as ``python -m mpicoll.launch -n 2 tests/fault/abandoned.py CASE``.

Every rank prints ``RESULT rank=R ...`` lines, then ends.
"""

from __future__ import annotations

import sys

import numpy as np


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def start_dropped(comm, n: int) -> None:
    """Start an ``Iallreduce`` on ``comm`` and drop every object of it (the request, the buffers, ``comm``)."""
    comm.Iallreduce(np.ones(n), np.zeros(n))


def main(case: str) -> None:
    if case == "serialized":
        import mpi4py

        mpi4py.rc.thread_level = "serialized"
    import warnings

    from mpi4py import MPI

    import mpicoll
    from mpicoll.engine import progress

    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    rank, size = comm.rank, comm.size
    n = 1 << 18                         # 2 MiB of float64: past the eager limit
    if case == "exit_unwaited":         # every rank starts collectives and never waits for them
        keep = [np.zeros(n), np.zeros(n * size)]
        comm.Iallreduce(np.ones(n), keep[0])
        comm.Iallgather(np.ones(n), keep[1])
        say(f"RESULT rank={rank} started")
    elif case == "exit_unwaited_derived":   # the same on a derived communicator, dropped at once: its state
        start_dropped(comm.Dup(), n)        # goes before the requests end, not its private communicator
        say(f"RESULT rank={rank} started")
    elif case == "exit_abandoned_alone":    # only rank 0 starts one (an erroneous program): no hang at exit
        if rank == 0:
            comm.Iallreduce(np.ones(n), np.zeros(n))
        say(f"RESULT rank={rank} started")
    elif case in ("progress_off", "serialized"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a, b, got = np.zeros(4), np.full(3, float(rank == 0)), np.zeros(1)
            reqs = [comm.Iallreduce(np.ones(4), a), world.Irecv(got, (rank - 1) % size, 3),
                    comm.Ibcast(b, root=0), world.Isend(np.ones(1), (rank + 1) % size, 3)]
        mpicoll.Request.Waitall(reqs)     # the caller drives mpicoll's requests
        p = comm.Allreduce_init(np.ones(2), np.zeros(2))
        for _ in range(100):
            p.Start()
            MPI.Request.Waitall([p]) if p.Test() else p.Wait()   # MPI's Waitall once mpicoll completed it
        p.Free()
        ok = bool(np.all(a == size) and np.all(b == 1) and got[0] == 1)
        warned = [str(w.message) for w in caught if "MPI_THREAD_MULTIPLE" in str(w.message)]
        say(f"RESULT rank={rank} thread={progress.running()} ok={ok} warned={bool(warned)}")
    else:
        raise SystemExit(f"unknown case {case}")


if __name__ == "__main__":
    main(sys.argv[1])
