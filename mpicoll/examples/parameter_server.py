"""A parameter server: the same training as data_parallel_training, through one central rank.

Run:  mpirun -n 4 python -m mpicoll.examples.parameter_server   (any N >= 2: rank 0 serves, N - 1 workers)

Rank 0 (the server) holds the parameters; ranks 1..N-1 (the workers) hold the
data shards.  Each step the server sends the parameters to every worker, every
worker sends back its gradient, and the server adds them and updates.  The
result is the same full-batch training, but the traffic is not spread evenly:
per step the server sends (N-1) P numbers for P parameters and receives as
many, while in a ring all-reduce every rank sends about 2 P (N-1)/N and
receives as many.  The busiest rank carries N/2 times more, and this grows with
N: this is why all-reduce replaced parameter servers for dense models.  The
example counts the bytes it moves (in + out, gradients only).

The check: the loss curve equals single-process training.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples import _mlp
from mpicoll.examples._common import check, say

SAMPLES, STEPS, LR = 256, 30, 0.05


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    if size < 2:
        raise SystemExit("parameter_server needs N >= 2 (one server and at least one worker)")
    x, y = _mlp.make_data(SAMPLES)
    workers = range(1, size)
    shard = np.array_split(np.arange(SAMPLES), size - 1)[rank - 1] if rank else None
    w = _mlp.init_params() if rank == 0 else np.empty(_mlp.NPARAMS)
    grad_and_loss = np.empty(_mlp.NPARAMS + 1)
    losses, sent = [], 0
    for _ in range(STEPS):
        if rank == 0:
            for r in workers:                                    # push the parameters ...
                comm.Send(w, dest=r, tag=0)
            total = np.zeros(_mlp.NPARAMS + 1)
            for r in workers:                                    # ... pull the gradients, in rank order
                comm.Recv(grad_and_loss, source=r, tag=1)
                total += grad_and_loss
            sent += 2 * (size - 1) * w.nbytes
            losses.append(total[-1] / SAMPLES)
            w = w - LR * total[:-1] / SAMPLES
        else:
            comm.Recv(w, source=0, tag=0)
            loss, grad_and_loss[:-1] = _mlp.loss_and_grad(w, x[shard], y[shard])
            grad_and_loss[-1] = loss
            comm.Send(grad_and_loss, dest=0, tag=1)
            sent += 2 * w.nbytes
    traffic = comm.gather(sent, root=0)
    reference = _mlp.train_single(STEPS, LR, SAMPLES)
    ring = 2 * 2 * (size - 1) / size * _mlp.NPARAMS * 8 * STEPS   # in + out
    say(comm, f"server + {size - 1} workers, {STEPS} steps of {_mlp.NPARAMS} float64 parameters",
        f"bytes in + out per rank: {traffic}",
        f"a ring all-reduce would move {ring:.0f} bytes per rank: the server carries "
        f"{traffic[0] / ring if traffic else 0:.1f}x that",
        "step  parameter-server loss   single-process loss",
        *[f"{t:4d}  {a:21.12f}  {b:18.12f}" for t, (a, b) in enumerate(zip(losses, reference)) if t % 10 == 0])
    ok = rank != 0 or bool(np.allclose(losses, reference, rtol=1e-10))
    check(comm, ok, "the server's loss curve matches single-process training")


if __name__ == "__main__":
    main()
