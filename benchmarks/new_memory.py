"""What a blocking call costs when its buffers are not the last calls' ones: mpicoll against the built-in.

Run on any number of processes::

    python -m mpicoll.launch -n 2 benchmarks/new_memory.py [--calls 4000] [--rounds 5]

mpicoll caches a call's bound plan under its buffers' memory (see
``mpicoll.program.plan``).  This measures the three ways a call can meet that cache,
for small messages, each against the built-in called the same way:

- **same memory**: the same buffers every call (the cached plan runs);
- **new memory**: views at a new offset into a large array every call, so every
  call misses; its *shape* (the call without the addresses) is known, so a
  plan of that shape is moved to the new memory;
- **new size**: the count changes every call (cycling through 1 .. 997
  elements), so every call is a new shape and is checked and bound from scratch.

Variants are interleaved and each timed ``rounds`` times; the table gives the
median over the rounds (us per call, slowest rank), its minimum, and the
median's ratio to the built-in called the same way.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import mpicoll

SIZES = 997   # the counts the "new size" variants cycle through: 1 .. SIZES elements


def variants(comm: MPI.Intracomm, p: int) -> dict[str, Callable[[int], None]]:
    """One call per variant, ``call(i)`` for the i-th call, on ``comm`` (mpicoll's or the built-in)."""
    send, recv = np.ones(8 * p * 1024), np.zeros(8 * p * 1024)

    def offset(i: int) -> int:   # a new offset every call, 8 elements apart, within the arrays
        return 8 * (i % 1000)

    return {
        "Allreduce 8 B, same memory": lambda i: comm.Allreduce(send[:1], recv[:1]),
        "Allreduce 8 B, new memory": lambda i: comm.Allreduce(send[offset(i):offset(i) + 1],
                                                              recv[offset(i):offset(i) + 1]),
        "Allreduce, new size": lambda i: comm.Allreduce(send[:i % SIZES + 1], recv[:i % SIZES + 1]),
        "Bcast 8 B, same memory": lambda i: comm.Bcast(recv[:1], 0),
        "Bcast 8 B, new memory": lambda i: comm.Bcast(recv[offset(i):offset(i) + 1], 0),
        "Bcast, new size": lambda i: comm.Bcast(recv[:i % SIZES + 1], 0),
        "Alltoall 8 B per rank, same memory": lambda i: comm.Alltoall(send[:p], recv[:p]),
        "Alltoall 8 B per rank, new memory": lambda i: comm.Alltoall(send[offset(i):offset(i) + p],
                                                                     recv[offset(i):offset(i) + p]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    ns = parser.parse_args()
    world = MPI.COMM_WORLD
    sides = {"built-in": variants(world, world.size), "mpicoll": variants(mpicoll.Comm(world), world.size)}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(ns.rounds):
        for name in sides["built-in"]:
            for side, calls in sides.items():
                call = calls[name]
                for i in range(ns.calls // 10):
                    call(i)
                world.Barrier()
                start = time.perf_counter()
                for i in range(ns.calls):
                    call(i)
                elapsed = world.allreduce(time.perf_counter() - start, op=MPI.MAX) / ns.calls * 1e6
                times.setdefault((name, side), []).append(elapsed)
    if world.rank == 0:
        print(f"# p = {world.size}, {ns.calls} calls x {ns.rounds} rounds, interleaved; us per call (slowest rank)")
        print(f"# {'variant':<38} {'built-in':>9} {'mpicoll':>9} {'min':>8} {'ratio':>7}")
        for name in sides["built-in"]:
            builtin, ours = (statistics.median(times[name, side]) for side in sides)
            print(f"  {name:<38} {builtin:9.2f} {ours:9.2f} {min(times[name, 'mpicoll']):8.2f} "
                  f"{ours / builtin:7.2f}")


if __name__ == "__main__":
    main()
