"""Tree versus ring all-reduce: measured here, and modelled up to 24,576 ranks.

Run:  mpirun -n 4 python -m mpicoll.examples.tree_vs_ring   (any N >= 1)

A ring all-reduce takes 2(p-1) steps, each moving n/p bytes: its bandwidth term
is the best possible, but its latency grows linearly with p.  A (double binary)
tree takes about 2 log2(p) steps of (pipelined) data: latency grows with log p
and bandwidth stays within a constant of the ring's.  So for small messages on
many ranks the tree wins by orders of magnitude (NCCL 2.4 measured about 180x
for 8 bytes at 24,576 GPUs), while for large messages on few ranks the ring wins.

Part 1 measures both algorithms of mpicoll here (and MPI's built-in) for 8 bytes
and 1 MiB, and checks that every result equals the built-in.  On a laptop or a
shared 2-core machine these times are noise; only the ratios mean anything.
Part 2 prints the alpha-beta model for p = 4 ... 24,576 with the ``nccl-summit``
constants: the schedule-derived cost model :mod:`mpicoll.analysis.cost`, exactly what
``python -m mpicoll model allreduce -p P --bytes N --preset nccl-summit`` prints,
next to the textbook closed forms:

    ring:  T = 2(p-1) alpha + 2 (p-1)/p n beta
    tree:  T = 4 ceil(log2 p) alpha + 2 n beta        (pipelined double binary tree)
"""

from __future__ import annotations

import math
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

ALGORITHMS = ("ring", "double_binary_tree")


def model(p: int, nbytes: int) -> dict[str, float]:
    """Seconds per algorithm from the schedules, as ``python -m mpicoll model ... --preset nccl-summit``."""
    from mpicoll.analysis.presets import preset
    from mpicoll.tools import commands as tools

    result = tools.model("allreduce", p, nbytes, preset("nccl-summit"), ALGORITHMS)
    return {a: result.costs[a].time for a in ALGORITHMS}


def closed_form(algorithm: str, p: int, nbytes: float, alpha: float, beta: float) -> float:
    """Seconds for an all-reduce of ``nbytes`` on ``p`` ranks, from the closed forms above."""
    if p == 1:
        return 0.0
    if algorithm == "ring":
        return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta
    return 4 * math.ceil(math.log2(p)) * alpha + 2 * nbytes * beta


def measure(comm: MPI.Comm, nbytes: int, reps: int) -> dict[str, float]:
    """Median seconds per all-reduce of ``nbytes`` for each algorithm; checks each result."""
    x = np.arange(nbytes // 8, dtype=np.float64) + comm.rank
    expected = np.empty_like(x)
    MPI.COMM_WORLD.Allreduce(x, expected)
    out = np.empty_like(x)
    times: dict[str, float] = {}
    for algorithm in (*ALGORITHMS, "built-in"):
        samples = []
        for _ in range(reps):
            comm.Barrier()
            t0 = time.perf_counter()
            if algorithm == "built-in":
                MPI.COMM_WORLD.Allreduce(x, out)
            else:
                comm.Allreduce(x, out, algorithm=algorithm)
            samples.append(time.perf_counter() - t0)
        times[algorithm] = comm.allreduce(float(np.median(samples)), op=MPI.MAX)
        check(comm, bool(np.array_equal(out, expected)), f"{algorithm}, {nbytes} bytes, equals the built-in")
    return times


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    say(comm, f"Part 1: measured on {comm.size} ranks of this machine (median, slowest rank)")
    for nbytes, reps in ((8, 20), (1 << 20, 5)):
        t = measure(comm, nbytes, reps)
        say(comm, f"  {nbytes:>8} bytes: " + "  ".join(f"{a} {s * 1e6:9.1f} us" for a, s in t.items()))

    from mpicoll.analysis.presets import preset

    m = preset("nccl-summit")
    say(comm, f"\nPart 2: the cost model on the schedules (mpicoll.analysis.cost, preset nccl-summit: alpha = "
              f"{m.alpha * 1e6:.1f} us, beta = 1/({1 / m.beta / 1e9:.1f} GB/s), {m.ranks_per_node} ranks per node),",
        "and the closed forms with the same alpha and beta:",
        "       p |   8 B: ring      tree    ratio |  closed: ring      tree |  64 MiB: ring      tree")
    ratios = []
    for p in (4, 96, 1536, 24576):
        small = model(p, 8) if comm.rank == 0 else dict.fromkeys(ALGORITHMS, 1.0)
        big = model(p, 64 << 20) if comm.rank == 0 else dict.fromkeys(ALGORITHMS, 1.0)
        closed = [closed_form(a, p, 8.0, m.alpha, m.beta) for a in ALGORITHMS]
        ratios.append(small["ring"] / small["double_binary_tree"])
        say(comm, f"{p:8d} | {small['ring'] * 1e6:9.1f} us {small['double_binary_tree'] * 1e6:7.1f} us "
                  f"{ratios[-1]:6.0f}x | {closed[0] * 1e6:9.1f} us {closed[1] * 1e6:7.1f} us | "
                  f"{big['ring'] * 1e3:8.2f} ms {big['double_binary_tree'] * 1e3:7.2f} ms")
    say(comm, "NCCL measured 44 ms (ring) and about 0.25 ms (tree) for 8 bytes at 24,576 GPUs; the preset's",
        "per-algorithm alpha for the tree carries the cost of hops that cross nodes.  At 64 MiB the ring wins",
        "on few ranks (its bandwidth term is 2(p-1)/p n beta, the tree's about 2 n beta) until its 2(p-1) alpha",
        "catches up with it (no link contention modelled).")
    ratios = comm.bcast(ratios, root=0)
    check(comm, ratios[-1] > 100 and ratios == sorted(ratios),
          "the tree's advantage for small messages grows with p and exceeds 100x at 24,576 ranks")


if __name__ == "__main__":
    main()
