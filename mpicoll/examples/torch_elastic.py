"""torch training that loses a process and finishes on the survivors, with the right weights.

Run:  python -m mpicoll.launch -n 4 --with-ft ulfm -m mpicoll.examples.torch_elastic   (any N >= 2; needs torch)
  or: mpirun --with-ft ulfm -x OMPI_MCA_async_mpi_finalize=1 -n 4 python -m mpicoll.examples.torch_elastic

The torch counterpart of ``elastic_training``: every rank of the ``"mpicoll"`` backend holds a share of one
data set (sample i on rank i mod N) and fits a linear model (``torch.nn.Linear``, no bias) by gradient descent,
each step summing the ranks' gradients with ``dist.all_reduce``.  Under Open MPI's fault-tolerance extension
(``--with-ft ulfm``) the last rank kills itself (SIGKILL) at step ``DEATH_STEP``; the survivors' ``all_reduce``
raises torch's ``DistBackendError``, and each survivor

1. asks which ranks failed: ``mpicoll.torch.failed_ranks(group)`` (MPI's ``Shrink``, the same list everywhere);
2. makes a group of the survivors, ``dist.new_group(survivors, use_local_synchronization=True)`` (made over
   the communicator the ``Shrink`` made), and goes on in it;
3. shares the data again over the survivors and repeats the step that failed (its update was never applied).

At the end rank 0 compares the weights with the least-squares solution of the whole data set, computed in one
process (``torch.linalg.lstsq``), and the run fails if they differ.  Without ``--with-ft ulfm`` nobody dies and
the same training runs to the same answer.
"""

from __future__ import annotations

import os
import signal

from mpi4py import MPI

from mpicoll import config
from mpicoll.examples._common import check, say

SAMPLES, FEATURES = 240, 6
STEPS, DEATH_STEP, RATE = 400, 100, 0.5


def data(torch):
    """The whole data set, the same on every rank: ``y = x @ w_true + noise`` (float64, a fixed seed)."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(SAMPLES, FEATURES, generator=gen, dtype=torch.float64)
    w_true = torch.arange(1, FEATURES + 1, dtype=torch.float64)
    return x, x @ w_true + 0.01 * torch.randn(SAMPLES, generator=gen, dtype=torch.float64)


def main() -> int:
    world = MPI.COMM_WORLD
    try:
        import torch
        import torch.distributed as dist

        import mpicoll.torch  # registers "mpicoll"; fills RANK, WORLD_SIZE, MASTER_* from MPI
    except ImportError:
        say(world, "torch is not installed: nothing to run (pip install -e '.[torch]')")
        return 0
    if world.size < 2:
        say(world, "run this on 2 or more processes (one may die)")
        return 0
    dist.init_process_group("mpicoll")
    x, y = data(torch)
    victim = dist.get_world_size() - 1 if config.fault_tolerant() else -1
    model = torch.nn.Linear(FEATURES, 1, bias=False, dtype=torch.float64)
    torch.nn.init.zeros_(model.weight)
    group, ranks = dist.group.WORLD, list(range(dist.get_world_size()))
    step = 0
    while step < STEPS:
        me, size = ranks.index(dist.get_rank()), len(ranks)
        mine = slice(me, SAMPLES, size)
        model.zero_grad()
        loss = ((model(x[mine]).squeeze(1) - y[mine]) ** 2).sum() / (2 * SAMPLES)
        loss.backward()
        grad = model.weight.grad
        if step == DEATH_STEP and dist.get_rank() == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            dist.all_reduce(grad, group=group)          # the sum of every rank's share: the whole gradient
        except dist.DistBackendError as exc:
            failed = mpicoll.torch.failed_ranks(group)
            ranks = [r for r in ranks if r not in failed]
            group = dist.new_group(ranks, use_local_synchronization=True)
            if ranks.index(dist.get_rank()) == 0:
                print(f"step {step}: {type(exc).__name__}; ranks {failed} failed, going on with {len(ranks)} "
                      "processes", flush=True)
            continue            # the same step again, on the survivors' shares of the data
        with torch.no_grad():
            model.weight -= RATE * grad
        step += 1
    exact = torch.linalg.lstsq(x, y.unsqueeze(1)).solution.squeeze(1)
    error = float((model.weight.detach().squeeze(0) - exact).abs().max())
    ok = error < 1e-6
    if ranks.index(dist.get_rank()) == 0:
        print(f"{len(ranks)} process(es) finished {STEPS} steps; largest difference from the least-squares "
              f"solution: {error:.2e}", flush=True)
    if victim < 0:          # nobody died: every rank agrees, on the world
        check(world, ok, "the weights")
        dist.destroy_process_group()
    elif ranks.index(dist.get_rank()) == 0:
        print("OK" if ok else "WRONG", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
