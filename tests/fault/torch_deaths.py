"""A rank dies under the "mpicoll" torch backend (MPI's fault-tolerance extension): every survivor's pending and
next collective raise torch's ``DistBackendError`` (not a hang).

Run under ``mpirun --with-ft ulfm`` on 4 processes (``tests/fault/test_deaths.py`` does)::

    python -m mpicoll.launch -n 4 --with-ft ulfm tests/fault/torch_deaths.py CASE

``CASE`` is ``blocking`` (``dist.all_reduce``), ``async`` (``async_op=True``, waited on) or ``elastic`` (as
``blocking``, then the survivors go on).  Rank 2 kills itself 20 ms into a loop of all-reduces of 8 MiB; each
survivor prints ``RAISED rank=R <type> <seconds>``.  In ``elastic`` the survivors then ask which ranks failed
(``mpicoll.torch.failed_ranks``), make a group of themselves (``dist.new_group``) and train a small model with
DDP on it for a few steps; each prints ``SHRUNK rank=R <failed> <rank in the group> <its size>`` and
``NEXT rank=R ok`` when the group's all-reduce and DDP's averaged weights are right.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import mpicoll.torch  # registers "mpicoll"

VICTIM = 2


def main() -> None:
    case = sys.argv[1]
    dist.init_process_group("mpicoll")
    rank = dist.get_rank()
    t = torch.ones(1 << 20, dtype=torch.float64)

    def call() -> None:
        if case == "async":
            dist.all_reduce(t, async_op=True).wait()
        else:
            dist.all_reduce(t)

    call()
    dist.barrier()
    died = time.time() + 0.02
    if rank == VICTIM:
        threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGKILL)).start()
    try:
        while True:
            call()
    except Exception as exc:   # noqa: BLE001 - what torch raises is the point
        print(f"RAISED rank={rank} {type(exc).__name__} {max(0.0, time.time() - died):.3f}", flush=True)
    if case == "elastic":
        go_on(rank)
    # and the program ends as any does: the job must end with the survivors


def go_on(rank: int) -> None:
    """The elastic pattern: a group of the survivors (``docs/faults.md``), then an all-reduce and DDP steps on it."""
    failed = mpicoll.torch.failed_ranks()
    group = dist.new_group([r for r in range(dist.get_world_size()) if r not in failed],
                           use_local_synchronization=True)
    print(f"SHRUNK rank={rank} {failed} {dist.get_rank(group)} {dist.get_world_size(group)}", flush=True)
    t = torch.ones(4)
    dist.all_reduce(t, group=group)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1, bias=False), process_group=group)
    with torch.no_grad():
        model.module.weight.fill_(1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    new_rank, size = dist.get_rank(group), dist.get_world_size(group)
    for _ in range(3):          # each rank's data differ: DDP averages the gradients, so the weights agree
        opt.zero_grad()
        model(torch.full((2, 4), float(new_rank + 1))).sum().backward()
        opt.step()
    # the gradient of sum(x @ w.T) is the column sums of x, 2 (r + 1) per weight: its mean over the ranks, 3 steps
    expected = 1.0 - 3 * 0.1 * sum(2.0 * (r + 1) for r in range(size)) / size
    right = failed == [VICTIM] and size == 3 and bool((t == size).all()) and \
        torch.allclose(model.module.weight, torch.full((1, 4), expected))
    print(f"NEXT rank={rank} {'ok' if right else 'wrong'}", flush=True)


if __name__ == "__main__":
    main()
