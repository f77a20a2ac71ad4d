"""DataParallel (one master gathers and broadcasts) against DistributedDataParallel (all-reduce).

Run:  mpirun -n 4 python -m mpicoll.examples.dataparallel_vs_ddp   (any N >= 1)

PyTorch's old ``torch.nn.DataParallel`` drives the replicas from one master:
every step the master scatters the batch, each replica computes its gradient,
the master *gathers* all of them, adds them, updates the parameters and
*broadcasts* the new parameters back.  ``DistributedDataParallel`` (DDP) has
no master: every process computes its gradient and one *all-reduce* sums them,
so every process applies the same update to its own copy.

Both are written here with MPI collectives on the same tiny model (the MLP of
the training examples) and the same data shards:

* master style: ``Gather`` of the gradients to rank 0, the update on rank 0,
  ``Bcast`` of the parameters;
* DDP style: ``Allreduce`` of the gradients, the update on every rank.

The example prints, per step, the bytes the busiest rank receives in each
style (the master receives p - 1 whole gradients and sends p - 1 copies of
the parameters; with a ring all-reduce every rank receives 2 (p-1)/p of one
gradient), and the measured time per step of both (the slowest rank's, median;
noisy on a shared machine).  The check: both styles end with the same
parameters (to rounding) and the DDP replicas are bitwise identical.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples import _mlp
from mpicoll.examples._common import check, say

SAMPLES, STEPS, LR = 256, 20, 0.1


def master_style(comm: mpicoll.Comm, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """DataParallel: rank 0 gathers the gradients, updates, and broadcasts the parameters."""
    w = _mlp.init_params()
    grads = np.empty((comm.size, _mlp.NPARAMS)) if comm.rank == 0 else None
    times = []
    for _ in range(STEPS):
        comm.Barrier()
        t0 = time.perf_counter()
        _, grad = _mlp.loss_and_grad(w, x, y)
        comm.Gather(grad, grads, root=0)                  # the master receives every replica's gradient
        if comm.rank == 0:
            w = w - LR * grads.sum(axis=0) / SAMPLES
        comm.Bcast(w, root=0)                             # and sends the new parameters to every replica
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return w, times


def ddp_style(comm: mpicoll.Comm, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """DDP: one all-reduce of the gradients; every rank updates its own copy the same way."""
    w = _mlp.init_params()
    times = []
    for _ in range(STEPS):
        comm.Barrier()
        t0 = time.perf_counter()
        _, grad = _mlp.loss_and_grad(w, x, y)
        comm.Allreduce(MPI.IN_PLACE, grad, op=MPI.SUM, algorithm="ring")
        w = w - LR * grad / SAMPLES
        times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return w, times


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    p = comm.size
    x, y = _mlp.make_data(SAMPLES)
    mine = np.array_split(np.arange(SAMPLES), p)[comm.rank]
    w_master, t_master = master_style(comm, x[mine], y[mine])
    w_ddp, t_ddp = ddp_style(comm, x[mine], y[mine])
    n = _mlp.NPARAMS * 8
    master_in, master_out = (p - 1) * n, (p - 1) * n
    ring_in = 2 * (p - 1) * n // p
    say(comm, f"{p} replicas, {_mlp.NPARAMS} parameters ({n} bytes of gradient), {STEPS} steps",
        f"master style (Gather + Bcast): rank 0 receives {master_in:,} B and sends {master_out:,} B per step; "
        "the others receive and send one gradient's worth",
        f"DDP style (ring Allreduce):    every rank receives {ring_in:,} B and sends as much per step",
        f"time per step, median of the slowest rank: master {np.median(t_master) * 1e6:.0f} us, "
        f"DDP {np.median(t_ddp) * 1e6:.0f} us",
        ("the ring's 2(p-1) rounds of tiny messages cost more than gathering a 1 KiB gradient here; "
         if np.median(t_ddp) > np.median(t_master) else "")
        + "the master's bytes grow as (p-1) n, every DDP rank's stay below 2 n: with real gradients (megabytes)",
        "and many replicas the master's link is the bottleneck, which is why DDP replaced DataParallel")
    check(comm, bool(np.allclose(w_master, w_ddp, rtol=1e-10, atol=1e-12)),
          "both styles end with the same parameters (to rounding)")
    w0 = w_ddp.copy()
    comm.Bcast(w0, root=0)
    check(comm, bool(np.array_equal(w_ddp, w0)), "the DDP replicas are bitwise identical (no master needed)")


if __name__ == "__main__":
    main()
