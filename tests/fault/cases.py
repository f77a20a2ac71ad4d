"""Erroneous programs, one per case, run by ``tests/fault/test_faults.py`` on 2 processes (some on 3).

``python -m mpicoll.launch -n 2 tests/fault/cases.py CASE`` runs one case: the
erroneous call, then (when the case returns) one correct Allreduce on the same
communicator.  Every rank prints one line ``RESULT rank=R ERRORTYPE: message``
(or ``RESULT rank=R ok``) and ``NEXT rank=R ok`` (or ``NEXT rank=R ERRORTYPE``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

import mpicoll

LARGE = 1 << 18          # float64 elements: 2 MiB, well past the eager limit


def gather_small_root(comm: mpicoll.Comm, n: int = 4) -> None:
    recv = np.zeros(2 * n - 1 if comm.rank == 0 else 1)
    comm.Gather(np.ones(n), recv, root=0)


def gather_small_root_large(comm: mpicoll.Comm) -> None:
    gather_small_root(comm, LARGE)


def bcast_readonly(comm: mpicoll.Comm, n: int = 4) -> None:
    buf = np.arange(n, dtype=float)
    if comm.rank == 1:
        buf.flags.writeable = False
    comm.Bcast(buf, root=0)


def bcast_readonly_large(comm: mpicoll.Comm) -> None:
    bcast_readonly(comm, LARGE)


def reduce_readonly_root(comm: mpicoll.Comm) -> None:
    recv = np.zeros(8)
    recv.flags.writeable = comm.rank != 0
    comm.Reduce(np.ones(8), recv, root=0)


def count_mismatch(comm: mpicoll.Comm) -> None:
    n = 4 + comm.rank
    comm.Allreduce(np.ones(n), np.zeros(n))


def dtype_mismatch(comm: mpicoll.Comm) -> None:
    dtype = np.float64 if comm.rank == 0 else np.float32
    comm.Allreduce(np.ones(4, dtype), np.zeros(4, dtype))


def algorithm_mismatch(comm: mpicoll.Comm) -> None:
    comm.Allreduce(np.ones(8), np.zeros(8), algorithm="ring" if comm.rank == 0 else "recursive_doubling")


def root_mismatch(comm: mpicoll.Comm) -> None:
    buf = np.full(4, float(comm.rank))
    comm.Bcast(buf, root=comm.rank)
    time.sleep(2.0)     # the program does something else: the check finds the message left unreceived


def skipped_call(comm: mpicoll.Comm) -> None:
    """Rank 1 never calls the Allreduce rank 0 waits in (and then waits in the next one itself)."""
    if comm.rank == 0:
        comm.Allreduce(np.ones(4), np.zeros(4))


def skipped_wait(comm: mpicoll.Comm) -> None:
    """As skipped_call, for Wait on a nonblocking request."""
    if comm.rank == 0:
        comm.Iallreduce(np.ones(4), np.zeros(4)).Wait()


def timeout_uncaught(comm: mpicoll.Comm) -> None:
    """Rank 1 is stuck elsewhere; rank 0's watchdog raises, uncaught, and launch aborts the job."""
    if comm.rank == 1:
        time.sleep(120)
    comm.Allreduce(np.ones(4), np.zeros(4))


def uncaught(comm: mpicoll.Comm) -> None:
    if comm.rank == 1:
        raise RuntimeError("an uncaught error on rank 1")
    comm.Barrier()
    time.sleep(60)


def killed(comm: mpicoll.Comm) -> None:
    if comm.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.Barrier()
    time.sleep(60)


def fail_on_rank_1(invec: np.ndarray, inoutvec: np.ndarray) -> None:
    """A sum, except on rank 1 of the world, where it raises."""
    if MPI.COMM_WORLD.rank == 1:
        raise ValueError("rank 1 cannot reduce")
    inoutvec += invec


def fail_on_rank_1_mpi(inbuf: Any, inoutbuf: Any, datatype: MPI.Datatype) -> None:
    """``fail_on_rank_1`` with MPI.Op.Create's signature (raw buffers of doubles)."""
    fail_on_rank_1(np.frombuffer(inbuf), np.frombuffer(inoutbuf))


def user_op_raises(comm: mpicoll.Comm, op: Any = None, nonblocking: bool = False) -> None:
    """An Allreduce whose user op raises on rank 1: the job must end, not leave ranks 0 and 2 waiting.

    The program catches what the call raises, as a program may: an uncaught
    error would end the job under ``mpicoll.launch`` anyway.  Every rank then
    sleeps 60 s, so a job that ends sooner was ended by the abort.
    """
    op = mpicoll.Op(fail_on_rank_1, commute=True) if op is None else op
    x, y = np.ones(10), np.zeros(10)
    try:
        if nonblocking:
            comm.Iallreduce(x, y, op=op).Wait()
        else:
            comm.Allreduce(x, y, op=op)
    except ValueError as exc:
        say(f"RESULT rank={comm.rank} {type(exc).__name__}: {exc}")
    time.sleep(60)


def user_op_raises_nonblocking(comm: mpicoll.Comm) -> None:
    user_op_raises(comm, nonblocking=True)


def mpi_op_raises(comm: mpicoll.Comm) -> None:
    user_op_raises(comm, MPI.Op.Create(fail_on_rank_1_mpi, commute=True))


def mpi_op_raises_nonblocking(comm: mpicoll.Comm) -> None:
    user_op_raises(comm, MPI.Op.Create(fail_on_rank_1_mpi, commute=True), nonblocking=True)


ENDS_THE_JOB = ("uncaught", "killed", "timeout_uncaught", "user_op_raises", "user_op_raises_nonblocking",
                "mpi_op_raises", "mpi_op_raises_nonblocking")


def say(line: str) -> None:
    """Print one line in one write: MPICH's mpiexec (hydra) forwards each write as it comes, so a line
    printed as two writes (``print`` writes the text, then the newline) can be split by another rank's."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def described(exc: Exception) -> str:
    """``TYPE: message``, for an MPI library's own error ``Exception (MPI_ERR_CLASS): message``: the error class
    is what both MPI families agree on (Open MPI's text starts with it, MPICH's is an error stack)."""
    if type(exc) is MPI.Exception:
        names = {getattr(MPI, n): n for n in dir(MPI)
                 if n.startswith("ERR_") and n != "ERR_LASTCODE" and isinstance(getattr(MPI, n), int)}
        return f"Exception (MPI_{names.get(exc.Get_error_class(), exc.Get_error_class())}): {exc}"
    return f"{type(exc).__name__}: {exc}"


def main(case: str) -> None:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    func = globals()[case]
    if case != "timeout_uncaught":
        comm.Barrier()       # mpicoll's private communicator exists from here on, as in most programs
    if case in ENDS_THE_JOB:
        func(comm)           # no try: these must end the job
        return
    unusable = False      # the always-on mismatch check leaves a communicator unusable: a new one, on every rank
    try:
        func(comm)
        say(f"RESULT rank={comm.rank} ok")
    except Exception as exc:
        say(f"RESULT rank={comm.rank} {described(exc)}")
        unusable = bool(getattr(exc, "calls", None))
    if case == "root_mismatch":       # every rank's part completed; the next call raises
        try:
            comm.Barrier()
            say(f"AGAIN rank={comm.rank} ok")
        except Exception as exc:
            say(f"AGAIN rank={comm.rank} {described(exc)}")
            unusable = bool(getattr(exc, "calls", None))
    if unusable:
        comm = comm.Dup()
    if case.startswith("skipped"):
        # rank 0 gave up on a call rank 1 never made: that communicator is out of step, and says so at once on
        # rank 0; every rank goes on with a new one (MPI's own Dup is in step)
        if comm.rank == 0:
            t0 = time.monotonic()
            try:
                comm.Allreduce(np.ones(3), np.empty(3))
                say("STEP rank=0 no error")
            except Exception as exc:
                say(f"STEP rank=0 {described(exc)} after {time.monotonic() - t0:.3f} s")
        comm = comm.Dup()
    x = np.full(3, comm.rank + 1.0)
    try:
        comm.Allreduce(MPI.IN_PLACE, x)
        assert x.tolist() == [3.0] * 3, x
        say(f"NEXT rank={comm.rank} ok")
    except Exception as exc:
        say(f"NEXT rank={comm.rank} {described(exc)}")


if __name__ == "__main__":
    main(sys.argv[1])
