"""Data-parallel training that survives a dead process: catch the error, ``Shrink``, go on.

Run:  python -m mpicoll.launch -n 4 --with-ft ulfm -m mpicoll.examples.elastic_training   (any N >= 2)
  or: mpirun --with-ft ulfm -x OMPI_MCA_async_mpi_finalize=1 -n 4 python -m mpicoll.examples.elastic_training

(The variable, which ``mpicoll.launch --with-ft ulfm`` sets, has Open MPI's ``MPI_Finalize`` leave out a barrier
over every process of the job, which could wait for ever for the dead one: see ``docs/faults.md``.)

Every rank holds a share of one data set (the samples i with i mod N == rank) and fits a linear model to it by
gradient descent: each step, the ranks all-reduce their gradients and take the same step.  Under Open MPI's
fault-tolerance extension (``--with-ft ulfm``), the last rank kills itself (SIGKILL) at step ``DEATH_STEP``.
Its peers' ``Allreduce`` then raises :class:`mpicoll.ProcFailedError` on every survivor (the rank that saw
the failure revokes mpicoll's private communicator, so no one waits for a peer that stopped), and each
survivor does what elastic training does:

1. ``comm = comm.Shrink()``: a communicator of the survivors (mpicoll's, like the one it came from);
2. share the data again over the survivors (sample i on rank i mod N', as the data set is recomputable);
3. go on from the step that failed, with the weights every survivor still holds (the failed step's update
   was never applied: each rank applies a step only after its Allreduce returned).

At the end rank 0 compares the weights with the least-squares solution of the whole data set, computed in
one process, and the run fails if they differ.  Without ``--with-ft ulfm`` nobody dies (a process that dies
without it ends the whole job), and the same training runs to the same answer.
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll import config

SAMPLES, FEATURES = 4096, 8
STEPS, DEATH_STEP, RATE = 400, 100, 0.5


def data() -> tuple[np.ndarray, np.ndarray]:
    """The whole data set (the same on every rank: recomputable, so survivors can share a dead rank's part)."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(SAMPLES, FEATURES))
    y = x @ np.arange(1.0, FEATURES + 1) + 0.1 * rng.normal(size=SAMPLES)
    return x, y


def main() -> int:
    comm = mpicoll.Comm(MPI.COMM_WORLD.Dup())
    comm.Set_errhandler(MPI.ERRORS_RETURN)      # MPI's errors raise (mpi4py's default for COMM_WORLD's dups)
    if comm.size < 2:
        print("elastic_training needs at least 2 processes (one may die)")
        return 0
    x, y = data()
    victim = comm.size - 1 if config.fault_tolerant() else -1
    w, grad = np.zeros(FEATURES), np.empty(FEATURES)
    step = 0
    while step < STEPS:
        mine = slice(comm.rank, SAMPLES, comm.size)
        local = x[mine].T @ (x[mine] @ w - y[mine]) / SAMPLES
        if step == DEATH_STEP and comm.rank == victim and comm.size == MPI.COMM_WORLD.Get_size():
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            comm.Allreduce(local, grad, op=MPI.SUM)
        except mpicoll.ProcFailedError as exc:
            comm = comm.Shrink()
            if comm.rank == 0:
                print(f"step {step}: {exc}; going on with {comm.size} processes")
            continue            # the same step again, on the survivors' shares of the data
        w -= RATE * grad
        step += 1
    if comm.rank != 0:
        return 0
    exact = np.linalg.lstsq(x, y, rcond=None)[0]
    error = float(np.max(np.abs(w - exact)))
    print(f"{comm.size} process(es) finished {STEPS} steps; largest difference from the least-squares "
          f"solution: {error:.2e}")
    ok = error < 1e-6
    print("OK" if ok else "WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
