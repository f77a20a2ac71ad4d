"""Reproducible sums: the same bits for every algorithm, placement and process count.

Run:  mpirun -n 4 python -m mpicoll.examples.reproducible   (any N >= 1)

A floating-point sum depends on the order of its terms, and every all-reduce
algorithm has its own order: the ring starts each block at another rank,
recursive doubling pairs ranks by bit, the binomial tree folds subtrees, the
double binary tree sums two trees.  So the same data gives different bits with
different algorithms, when the contributions move to other ranks, and when the
same vectors are summed by another number of processes.

On 2 processes every algorithm adds the same two terms, and a + b == b + a: nothing
differs there; run on 3 or more to see the algorithms disagree.

Part 1: one Allreduce of the same data (one row per rank, values spread over 60
binades with cancellations) with every algorithm, then with the rows rotated
over the ranks; it prints how many elements differ from the first result and by
how much, relative to the sum of the terms' magnitudes.  Then the same with ``reproducible=True``:
nothing differs, and the bits equal the one-process reference
(``mpicoll.data.fixedpoint.sum_rows``).

Part 2: 24 vectors summed by every rank and by the first half of the ranks (each
rank adds its share locally, then one Allreduce): with floats the bits depend on
the process count; with :class:`mpicoll.ReproducibleSum` they do not.

The example exits non-zero if a reproducible result differs anywhere.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.data import fixedpoint as fp
from mpicoll.examples._common import check, say

COUNT = 20_000


def table(rows: int, seed: int) -> np.ndarray:
    """The same rows on every rank."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, COUNT)) * np.exp2(rng.integers(-30, 30, (rows, COUNT)))
    if rows > 1:
        x[1, ::4] = -x[0, ::4] * (1 + 2.0 ** -40)      # near-cancellations
    return x


def relative(a: np.ndarray, b: np.ndarray, scale: np.ndarray) -> float:
    """The largest ``|a - b|`` relative to the sum of the terms' magnitudes (what error bounds scale with)."""
    return float(np.max(np.abs(a - b) / scale, initial=0.0))


def differences(comm: mpicoll.Comm, rows: np.ndarray, reproducible: bool) -> list[np.ndarray]:
    """Allreduce of the rows (rank i gives row i, then row i+1) with every algorithm: the results."""
    p, r = comm.size, comm.rank
    results = []
    scale = np.abs(rows).sum(axis=0)
    header = f"{'algorithm':>20} {'placement':>10} {'elements differing':>19} {'max |diff| / sum |x|':>21}"
    say(comm, "", f"reproducible={reproducible}", header)
    for shift in (0, 1):
        for algorithm in mpicoll.algorithms("allreduce"):
            out = np.empty(COUNT)
            comm.Allreduce(rows[(r + shift) % p], out, op=MPI.SUM, algorithm=algorithm, reproducible=reproducible)
            results.append(out)
            base = results[0]
            differ = int(np.count_nonzero(out.view(np.int64) != base.view(np.int64)))
            say(comm, f"{algorithm:>20} {'rotated' if shift else 'as is':>10} {differ:>19} "
                      f"{relative(out, base, scale):>21.2e}")
    return results


def by_process_count(comm: mpicoll.Comm, rows: np.ndarray, reproducible: bool) -> list[bytes]:
    """The sum of all rows, by every rank and by the first half of the ranks; the bits of each, on rank 0."""
    found = []
    for q in sorted({comm.size, max(comm.size // 2, 1)}, reverse=True):
        sub = comm.Split(0 if comm.rank < q else MPI.UNDEFINED, comm.rank)
        if sub != MPI.COMM_NULL:
            mine = rows[sub.rank::q]
            if reproducible:
                acc = mpicoll.ReproducibleSum(COUNT)
                for row in mine:
                    acc.add(row)
                total = acc.allreduce(sub).value()
            else:
                total = np.empty(COUNT)
                sub.Allreduce(mine.sum(axis=0), total, op=MPI.SUM)
            found.append(total.tobytes())
            sub.Free()
    return comm.bcast(found, root=0)


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    say(comm, f"Part 1: Allreduce of {COUNT} float64 on {comm.size} processes, every algorithm, two placements")
    rows = table(comm.size, 1)
    differences(comm, rows, reproducible=False)
    same = differences(comm, rows, reproducible=True)
    reference = fp.sum_rows(rows).tobytes()
    check(comm, all(out.tobytes() == reference for out in same),
          "reproducible=True: every algorithm and placement gives the one-process bits")

    say(comm, "", f"Part 2: 24 vectors summed on {comm.size} and on {max(comm.size // 2, 1)} processes")
    rows = table(24, 2)
    plain = by_process_count(comm, rows, reproducible=False)
    differ = np.count_nonzero(np.frombuffer(plain[0], np.int64) != np.frombuffer(plain[-1], np.int64))
    say(comm, f"  floats:          {differ} of {COUNT} elements differ between the two process counts")
    exact = by_process_count(comm, rows, reproducible=True)
    differ = np.count_nonzero(np.frombuffer(exact[0], np.int64) != np.frombuffer(exact[-1], np.int64))
    say(comm, f"  ReproducibleSum: {differ} of {COUNT} elements differ between the two process counts")
    check(comm, differ == 0, "ReproducibleSum: the same bits on every process count")


if __name__ == "__main__":
    main()
