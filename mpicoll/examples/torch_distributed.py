"""The torch.distributed lessons on mpicoll and on Gloo: the same code, both backends, which is faster.

Run:  mpirun -n 4 python -m mpicoll.examples.torch_distributed   (any N >= 2; needs torch: pip install
      -e ".[torch]"; without torch it says so and exits 0)

The classic first torch.distributed programs, each written once against a
``group`` argument and run on a group of the ``"mpicoll"`` backend and on a
Gloo group over the same processes:

* point to point: a token passed around the ring with ``send``/``recv``, then
  ``isend``/``irecv`` in both directions at once;
* ``all_reduce`` (a sum), ``all_gather``, ``broadcast`` and ``scatter``;
* groups: ``new_group`` of the even ranks, an all-reduce inside it;
* softmax and L2 normalisation of a vector sharded over the ranks: only
  scalars cross the network (a MAX and two SUM all-reduces).

Each result is checked against the right answer on every rank, then each
lesson is timed on both backends, taking turns (the median over 7 rounds of
the slowest rank's mean over 4 runs), and the table says which is faster.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

from mpi4py import MPI

from mpicoll.examples._common import check, say

ROUNDS, REPEATS = 7, 4  # the median of ROUNDS rounds of REPEATS runs, the backends taking turns
LENGTH = 1001


def lessons(dist, torch) -> dict[str, Callable]:
    """Each lesson: ``fn(group) -> bool`` (True when its result is right on this rank)."""

    def ring(group) -> bool:
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        token = torch.zeros(1)
        if rank == 0:
            token += 1
            dist.send(token, group_dst=1, group=group)
            dist.recv(token, group_src=size - 1, group=group)
        else:
            dist.recv(token, group_src=rank - 1, group=group)
            token += 1
            dist.send(token, group_dst=(rank + 1) % size, group=group)
        both = torch.empty(2)
        left, right = torch.empty(1), torch.empty(1)
        works = [dist.isend(torch.tensor([float(rank)]), group_dst=(rank + 1) % size, group=group),
                 dist.isend(torch.tensor([float(rank)]), group_dst=(rank - 1) % size, group=group),
                 dist.irecv(left, group_src=(rank - 1) % size, group=group),
                 dist.irecv(right, group_src=(rank + 1) % size, group=group)]
        for w in works:
            w.wait()
        both[0], both[1] = left, right
        return (rank != 0 or token.item() == size) and both.tolist() == [(rank - 1) % size, (rank + 1) % size]

    def all_reduce(group) -> bool:
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        t = torch.arange(4, dtype=torch.float32) + rank
        dist.all_reduce(t, group=group)
        return torch.equal(t, torch.arange(4, dtype=torch.float32) * size + sum(range(size)))

    def all_gather(group) -> bool:
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        outs = [torch.empty(2) for _ in range(size)]
        dist.all_gather(outs, torch.full((2,), float(rank)), group=group)
        return all(torch.equal(o, torch.full((2,), float(r))) for r, o in enumerate(outs))

    def broadcast(group) -> bool:
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        t = torch.full((3,), float(rank))
        dist.broadcast(t, group_src=size - 1, group=group)
        return torch.equal(t, torch.full((3,), float(size - 1)))

    def scatter(group) -> bool:
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        out = torch.empty(2)
        chunks = [torch.full((2,), 10.0 * r) for r in range(size)] if rank == 0 else None
        dist.scatter(out, chunks, group_src=0, group=group)
        return torch.equal(out, torch.full((2,), 10.0 * rank))

    def groups(group) -> bool:
        ranks = dist.get_process_group_ranks(group)
        evens = dist.new_group(ranks[::2], backend=dist.get_backend(group))
        if dist.get_rank() not in ranks[::2]:
            return True
        t = torch.ones(1)
        dist.all_reduce(t, group=evens)
        return t.item() == len(ranks[::2])

    def softmax_l2(group) -> bool:
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        full = torch.randn(LENGTH, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 30
        shard = torch.tensor_split(full, size)[rank]
        m = shard.max().reshape(1)
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
        e = torch.exp(shard - m)
        denom = e.sum().reshape(1)
        dist.all_reduce(denom, group=group)
        sq = (shard * shard).sum().reshape(1)
        dist.all_reduce(sq, group=group)
        soft_ok = torch.allclose(e / denom, torch.tensor_split(torch.softmax(full, 0), size)[rank], rtol=1e-12)
        return soft_ok and torch.allclose(shard / sq.sqrt(), torch.tensor_split(full / full.norm(), size)[rank])

    return {"ring (send/recv, isend/irecv)": ring, "all_reduce": all_reduce, "all_gather": all_gather,
            "broadcast": broadcast, "scatter": scatter, "new_group + all_reduce": groups,
            "softmax + L2 norm": softmax_l2}


def timed(world: MPI.Comm, fn: Callable, groups: dict[str, object]) -> dict[str, float]:
    """Per backend: the median over rounds of the slowest rank's mean seconds per run of ``fn(group)``.

    The backends take turns round by round, so that a machine whose load changes (other jobs) weighs on
    both alike.
    """
    times: dict[str, list[float]] = {name: [] for name in groups}
    for _ in range(ROUNDS):
        for name, group in groups.items():
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(REPEATS):
                fn(group)
            times[name].append(world.allreduce((time.perf_counter() - t0) / REPEATS, op=MPI.MAX))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    world = MPI.COMM_WORLD
    try:
        import torch
        import torch.distributed as dist

        import mpicoll.torch  # noqa: F401  (registers "mpicoll"; fills RANK, WORLD_SIZE, MASTER_* from MPI)
    except ImportError:
        say(world, "torch is not installed: nothing to run (pip install -e '.[torch]')")
        return
    if world.size < 2:
        say(world, "run this on 2 or more processes")
        return
    dist.init_process_group("mpicoll")
    backends = {"mpicoll": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    table = []
    for name, fn in lessons(dist, torch).items():
        for backend, group in backends.items():
            check(world, fn(group), f"{name} on {backend}")
        if name.startswith("new_group"):
            continue  # it makes a group each time: not a fair thing to time
        table.append((name, timed(world, fn, backends)))
    say(world, "", f"{'lesson':32s} {'mpicoll':>10s} {'gloo':>10s}  faster",
        *(f"{n:32s} {t['mpicoll'] * 1e6:8.0f}us {t['gloo'] * 1e6:8.0f}us  "
          f"{'mpicoll' if t['mpicoll'] < t['gloo'] else 'gloo'} ({max(t.values()) / min(t.values()):.1f}x)"
          for n, t in table))
    world.Barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
