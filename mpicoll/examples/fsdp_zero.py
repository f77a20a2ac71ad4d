"""Sharded data parallelism (FSDP / ZeRO-3): parameters, gradients and optimizer state split over ranks.

Run:  mpirun -n 4 python -m mpicoll.examples.fsdp_zero   (any N >= 1)

Plain data parallelism keeps a full copy of the parameters, the gradients and
the optimizer state (here: SGD momentum) on every rank.  ZeRO-3 / FSDP keeps
only 1/N of each.  A step is:

1. ``Allgather`` the parameter shards into the full vector (just before use; FSDP
   does it layer by layer and frees the full copy afterwards);
2. forward and backward on this rank's data shard (a full-size local gradient);
3. ``Reduce_scatter_block``: sum the gradients over ranks, and each rank keeps only
   the sum for its own shard of parameters;
4. update the own shard with the own shard of the momentum.

All-gather + reduce-scatter move the same bytes as one all-reduce (an all-reduce
*is* a reduce-scatter followed by an all-gather), so the memory saving is free in
bandwidth.  The check: the loss curve equals single-process momentum SGD.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples import _mlp
from mpicoll.examples._common import check, say

SAMPLES, STEPS, LR, MOMENTUM = 256, 30, 0.05, 0.9


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    x, y = _mlp.make_data(SAMPLES)
    mine = np.array_split(np.arange(SAMPLES), size)[rank]
    shard_len = -(-_mlp.NPARAMS // size)                  # pad so that every rank owns an equal shard
    padded = np.zeros(shard_len * size)
    padded[:_mlp.NPARAMS] = _mlp.init_params()
    w_shard = padded[rank * shard_len:(rank + 1) * shard_len].copy()   # all this rank keeps between steps
    v_shard = np.zeros(shard_len)                                      # momentum: sharded too
    full_w, full_g, g_shard, loss = np.empty_like(padded), np.zeros_like(padded), np.empty(shard_len), np.empty(1)
    losses, calls = [], []
    for step in range(STEPS):
        comm.Allgather(w_shard, full_w)                                # 1. gather the parameters
        local_loss, full_g[:_mlp.NPARAMS] = _mlp.loss_and_grad(full_w[:_mlp.NPARAMS], x[mine], y[mine])
        comm.Reduce_scatter_block(full_g, g_shard, op=MPI.SUM)        # 3. my shard of the summed gradient
        comm.Allreduce(np.array([local_loss]), loss, op=MPI.SUM)       # (only for printing the loss)
        if step < 3:   # what this step moved, as the calls' arguments say
            calls.append(f"step {step}: Allgather {w_shard.size} -> {full_w.size} floats, "
                         f"Reduce_scatter_block {full_g.size} -> {g_shard.size} floats, loss {loss[0] / SAMPLES:.6f}")
        losses.append(loss[0] / SAMPLES)
        v_shard = MOMENTUM * v_shard + g_shard / SAMPLES               # 4. update my shard only
        w_shard = w_shard - LR * v_shard
    reference = _mlp.train_single(STEPS, LR, SAMPLES, momentum=MOMENTUM)
    nbytes = full_w.nbytes
    least = 2 * (size - 1) * nbytes // size if size > 1 else 0
    say(comm, "Each step's collectives (the first three steps; every step makes the same two calls):", *calls,
        f"per step each rank must receive at least (p-1)/p n = {least // 2} bytes in the all-gather and send "
        f"as much in the reduce-scatter: {least} bytes in all, what one all-reduce of the {nbytes}-byte "
        "gradient needs (2 (p-1)/p n), so sharding costs no extra bandwidth")
    say(comm, f"{_mlp.NPARAMS} parameters (+{padded.size - _mlp.NPARAMS} padding) over {size} ranks: "
              f"each rank keeps {2 * shard_len} numbers of parameters + momentum between steps "
              f"instead of {2 * _mlp.NPARAMS}",
        "step  sharded loss         single-process loss",
        *[f"{t:4d}  {a:18.12f}  {b:18.12f}" for t, (a, b) in enumerate(zip(losses, reference)) if t % 10 == 0])
    check(comm, bool(np.allclose(losses, reference, rtol=1e-10)), "the loss curve matches single-process momentum SGD")


if __name__ == "__main__":
    main()
