"""All-reduce every way mpicoll has, checked against MPI's own, and the ring explained round by round.

Run:  mpirun -n 4 python -m mpicoll.examples.allreduce      (any N >= 1)
  or: python -m mpicoll.launch -n 4 -m mpicoll.examples.allreduce

Every rank contributes a small vector; each of mpicoll's all-reduce algorithms
sums them and is compared with ``MPI.COMM_WORLD.Allreduce`` on the same data.
Then rank 0 prints the ring algorithm's schedule for this many processes in
the form of the textbook figures: the vector is cut into N chunks; in the
reduce-scatter phase each chunk travels once around the ring picking up every
rank's part (a0+a1+...), in the all-gather phase the finished chunks travel
around once more so that everyone has all of them.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.ir.schedule import Reduce

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def ring_walkthrough(size: int) -> str:
    """The ring all-reduce for ``size`` ranks as chunk labels, round by round (round t is step t + 1 of 2(p-1))."""
    plan = mpicoll.schedules("allreduce", "ring", size)
    # what each rank's chunk c holds: a set of contributing ranks, shown as a0+a1+...
    holds = [[{r} for _ in range(size)] for r in range(size)]

    def label(c: int, ranks: set[int]) -> str:
        return "+".join(f"{LETTERS[c % 26]}{r}" for r in sorted(ranks))

    lines = [f"Ring all-reduce on {size} ranks: chunk c of rank r starts as {LETTERS[0]}r, {LETTERS[1]}r, ...",
             "(letter = chunk, digit = whose contribution it includes)"]
    for t in range(plan.nrounds):
        phase = "reduce-scatter" if t < size - 1 else "all-gather"
        lines.append(f"\nround {t} ({phase}; {t + 1} of {plan.nrounds}):")
        arrivals = []
        for r in range(size):
            rnd = plan[r].rounds[t]
            for s in rnd.sends:
                c = s.block.lo
                arrivals.append((s.peer, c, set(holds[r][c])))
                lines.append(f"  rank {r} sends chunk {LETTERS[c % 26]} ({label(c, holds[r][c])}) to rank {s.peer}")
        for dst, c, ranks in arrivals:
            adds = any(isinstance(st, Reduce) for st in plan[dst].rounds[t].steps)
            holds[dst][c] = holds[dst][c] | ranks if adds else ranks
    lines.append("\nafter the last round every rank holds every chunk complete:")
    for r in range(size):
        lines.append(f"  rank {r}: " + "  ".join(label(c, holds[r][c]) for c in range(size)))
    return "\n".join(lines)


def main() -> None:
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    rank, size = comm.rank, comm.size
    x = np.arange(8, dtype=np.float64) + 10 * rank      # rank r holds [10r, 10r+1, ...]
    expected = np.empty_like(x)
    world.Allreduce(x, expected)                         # MPI's own, for comparison
    if rank == 0:
        print(f"{size} ranks; rank r contributes [10r, 10r+1, ..., 10r+7]")
        print(f"MPI built-in Allreduce gives {expected}")
        print(f"mpicoll's {len(mpicoll.algorithms('allreduce'))} all-reduce algorithms on the same data:")
    for algorithm in mpicoll.algorithms("allreduce"):
        out = np.empty_like(x)
        comm.Allreduce(x, out, op=MPI.SUM, algorithm=algorithm)
        ok = world.allreduce(bool(np.array_equal(out, expected)), op=MPI.LAND)
        if rank == 0:
            print(f"  {algorithm:20s} {'matches' if ok else 'DIFFERS FROM'} the built-in")
        if not ok:
            raise SystemExit(f"{algorithm} gave a wrong result")
    if rank == 0:
        print()
        print(ring_walkthrough(size))
        print("\nThe same schedule as mpicoll stores it (print(mpicoll.schedules('allreduce', 'ring', p))):\n")
        print(mpicoll.schedules("allreduce", "ring", size))


if __name__ == "__main__":
    main()
