"""Jobs that go wrong with the flight recorder on, for ``tests/fault/test_trace.py`` and the docs' examples.

Run with ``MPICOLL_TRACE=DIR`` on 3 processes::

    MPICOLL_TIMEOUT=1 python -m mpicoll.launch -n 3 tests/fault/traced.py missing     (or mismatch)
    python -m mpicoll.launch -n 3 --with-ft ulfm tests/fault/traced.py death

Every case makes two correct ``Allreduce`` calls (ring) on an ``mpicoll.Comm`` of ``COMM_WORLD`` first, then:

- ``missing``: rank 2 skips the third; ranks 0 and 1 time out (``MPICOLL_TIMEOUT``);
- ``mismatch``: ranks 0 and 2 call ``Bcast`` third, rank 1 ``Allreduce``;
- ``death``: rank 2 kills itself (SIGKILL) before the third; ranks 0 and 1 raise ``ProcFailedError``;
- ``outstanding``: ranks 0 and 1 start an ``Iallreduce`` that rank 2 never starts, and exit without waiting;
- ``hang``: as ``missing`` with no timeout: rank 2 sleeps, ranks 0 and 1 wait; every rank prints
  ``WAITING rank=R PID`` and writes its record on ``SIGUSR1``;
- ``inter-missing``: on an intercommunicator of the even ranks (0, 2) and the odd one (1), an ``Allreduce``
  and an ``Iallreduce`` waited for, then rank 2 skips a second ``Allreduce``; ranks 0 and 1 time out.

Every rank prints ``RESULT rank=R ok`` or ``RESULT rank=R ERRORTYPE``; then ``python -m mpicoll doctor DIR``
says what happened.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def say(line: str) -> None:
    """One write per line (MPICH's hydra forwards each write as it comes: a print's pieces can interleave)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    case = sys.argv[1]
    base = MPI.COMM_WORLD.Dup()
    base.Set_errhandler(MPI.ERRORS_RETURN)
    comm = mpicoll.Comm(base)
    rank = comm.Get_rank()
    x, y = np.ones(8), np.zeros(8)
    for _ in range(2):
        comm.Allreduce(x, y, algorithm="ring")
    MPI.COMM_WORLD.Barrier()
    try:
        if case == "missing" and rank != 2:
            comm.Allreduce(x, y, algorithm="ring")
        elif case == "mismatch":
            if rank == 1:
                comm.Allreduce(x, y, algorithm="ring")
            else:
                comm.Bcast(np.ones(16), root=0, algorithm="binomial")
        elif case == "hang":
            say(f"WAITING rank={rank} {os.getpid()}")
            if rank == 2:
                time.sleep(60)
            else:
                comm.Allreduce(x, y, algorithm="ring")
        elif case == "outstanding":
            if rank != 2:
                comm.Iallreduce(x, y, algorithm="ring")     # never waited for: the job ends with it outstanding
        elif case == "inter-missing":
            half = comm.Split(rank % 2, rank)
            inter = half.Create_intercomm(0, comm, 1 - rank % 2, tag=7)
            inter.Allreduce(x, y)
            inter.Iallreduce(x, y).Wait()
            if rank != 2:
                inter.Allreduce(x, y)
        elif case == "death":
            if rank == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            comm.Allreduce(x, y, algorithm="ring")
        say(f"RESULT rank={rank} ok")
    except Exception as exc:   # (the error is in the record; the test reads the doctor's report)
        say(f"RESULT rank={rank} {type(exc).__name__}")
    if case == "death":
        os._exit(0)     # a finalize would wait for the dead process (the record was written when it raised)


if __name__ == "__main__":
    main()
