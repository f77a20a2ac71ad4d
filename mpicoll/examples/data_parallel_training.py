"""Data-parallel training (DP/DDP): a sharded data set, gradients averaged with Allreduce.

Run:  mpirun -n 4 python -m mpicoll.examples.data_parallel_training   (any N >= 1)

Every rank holds the same model (same initial parameters, same seed) and a
different shard of the data set.  In each step a rank computes the gradient of
the loss on its shard only; one all-reduce adds the N partial gradients, and
dividing by the global sample count gives exactly the full-batch gradient.  So
every rank applies the same update and the replicas never drift apart; this is
what PyTorch's DistributedDataParallel does (it also cuts the gradients into
buckets and starts each bucket's all-reduce while backpropagation continues).
All parameters live in one flat vector here, i.e. one bucket, one all-reduce.

The check: the loss curve equals single-process full-batch training (to
rounding), and all ranks end with bitwise-identical parameters.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples import _mlp
from mpicoll.examples._common import check, say

SAMPLES, STEPS, LR = 256, 30, 0.05


def train_data_parallel(comm: MPI.Comm) -> tuple[list[float], np.ndarray]:
    """Train on this rank's shard; return the global mean loss before each step, and the parameters."""
    x, y = _mlp.make_data(SAMPLES)
    shard = np.array_split(np.arange(SAMPLES), comm.size)[comm.rank]    # this rank's samples
    w = _mlp.init_params()
    buf = np.empty(_mlp.NPARAMS + 1)                 # gradient and loss travel in one message
    losses = []
    for _ in range(STEPS):
        loss, grad = _mlp.loss_and_grad(w, x[shard], y[shard])
        buf[:-1], buf[-1] = grad, loss
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)    # sum over ranks = full-batch sum
        losses.append(buf[-1] / SAMPLES)
        w = w - LR * buf[:-1] / SAMPLES
    return losses, w


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    losses, w = train_data_parallel(comm)
    reference = _mlp.train_single(STEPS, LR, SAMPLES)
    say(comm, f"{comm.size} ranks x ~{SAMPLES // comm.size} samples; {_mlp.NPARAMS} parameters in one bucket",
        "step  data-parallel loss   single-process loss",
        *[f"{t:4d}  {a:18.12f}  {b:18.12f}"
          for t, (a, b) in enumerate(zip(losses, reference)) if t % 5 == 0 or t == STEPS - 1])
    check(comm, bool(np.allclose(losses, reference, rtol=1e-10)), "the loss curve matches single-process training")
    check(comm, losses[-1] < 0.5 * losses[0], "the loss went down")
    w0 = w.copy()
    comm.Bcast(w0, root=0)
    check(comm, bool(np.array_equal(w, w0)), "all replicas hold bitwise-identical parameters")


if __name__ == "__main__":
    main()
