"""The ring all-reduce, step by step, written by hand and compared with mpicoll's schedule.

Run:  mpirun -n 4 python -m mpicoll.examples.ring_allreduce_walkthrough   (any N >= 1)

Every rank cuts its vector into N chunks (a, b, c, ... ; rank r's chunk a is
called ar).  The ring all-reduce has two phases of N - 1 steps each, and in every
step each rank sends one chunk to its right neighbour and receives one from its
left neighbour:

* reduce-scatter: in step s = 0 .. N-2 rank r sends chunk (r - s - 1) mod N and
  adds the chunk (r - s - 2) mod N it receives to its own.  Chunk c starts at
  rank c + 1 and travels once around the ring, so after N - 1 steps rank r owns
  the complete sum of chunk r (mpicoll's ``ring.reduce_scatter_steps``);
* all-gather: in step s rank r forwards chunk (r - s) mod N (its own complete
  chunk first) and receives chunk (r - s - 1) mod N, replacing what it had.

The program runs this ring by hand twice with ``sendrecv``: once on *labels*
(sets of names such as {a0, a1}, so the printout reads like the figures in the
notes) and once on numbers, checked against the built-in ``Allreduce``.  Rank 0
then prints :func:`mpicoll.examples.allreduce.ring_walkthrough`, the same story
read off mpicoll's stored schedule, and the check compares the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say
from mpicoll.examples.allreduce import LETTERS, ring_walkthrough


def label(chunk: Any) -> str:
    """A set of names such as {"a1", "a0"} as ``a0+a1`` (sorted by rank); anything else as ``str``."""
    if isinstance(chunk, (set, frozenset)):
        return "+".join(sorted(chunk, key=lambda s: (s[0], int(s[1:]))))
    return str(chunk)


def ring_allreduce(comm: MPI.Comm, chunks: list[Any], add: Callable[[Any, Any], Any],
                   log: Callable[[str], None] = lambda line: None) -> list[Any]:
    """All-reduce ``chunks`` (one per rank) around the ring; ``add`` combines two chunks."""
    rank, size = comm.rank, comm.size
    right, left = (rank + 1) % size, (rank - 1) % size
    chunks = list(chunks)
    for s in range(size - 1):                      # reduce-scatter: chunk c ends complete at rank c
        send_c, recv_c = (rank - s - 1) % size, (rank - s - 2) % size
        got = comm.sendrecv(chunks[send_c], dest=right, source=left)
        chunks[recv_c] = add(got, chunks[recv_c])
        log(f"reduce-scatter step {s + 1}: rank {rank} sent chunk {LETTERS[send_c % 26]}, "
            f"now holds {label(chunks[recv_c])} in chunk {LETTERS[recv_c % 26]}")
    for s in range(size - 1):                      # all-gather: rank r starts with its complete chunk r
        send_c, recv_c = (rank - s) % size, (rank - s - 1) % size
        chunks[recv_c] = comm.sendrecv(chunks[send_c], dest=right, source=left)
        log(f"all-gather step {s + 1}: rank {rank} sent chunk {LETTERS[send_c % 26]}, "
            f"received complete chunk {LETTERS[recv_c % 26]}")
    return chunks


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size

    # 1. labels: chunk c of rank r is the one-element set {letter(c) + str(r)}
    lines: list[str] = []
    labels = ring_allreduce(comm, [frozenset({f"{LETTERS[c % 26]}{rank}"}) for c in range(size)],
                            lambda a, b: a | b, lines.append)
    pretty = "  ".join(label(c) for c in labels)
    for r, (rank_lines, ends) in enumerate(comm.gather((lines, pretty), root=0) or []):  # in rank order
        say(comm, f"-- rank {r} --", *rank_lines, f"rank {r} ends with: {ends}")
    say(comm, "")
    complete = all(c == {f"{LETTERS[i % 26]}{r}" for r in range(size)} for i, c in enumerate(labels))
    check(comm, complete, "after 2(N-1) steps every rank holds every chunk with every rank's part")

    # 2. numbers: the same function, checked against MPI's built-in all-reduce
    x = np.arange(4 * size, dtype=np.float64) * (rank + 1)
    out = np.concatenate(ring_allreduce(comm, np.array_split(x, size), np.add))
    expected = np.empty_like(x)
    MPI.COMM_WORLD.Allreduce(x, expected, op=MPI.SUM)
    check(comm, bool(np.array_equal(out, expected)), "the hand-written ring equals MPI's Allreduce")
    lib = np.empty_like(x)
    comm.Allreduce(x, lib, op=MPI.SUM, algorithm="ring")
    check(comm, bool(np.array_equal(lib, expected)), "mpicoll's ring (algorithm='ring') equals MPI's Allreduce")

    # 3. the same story read off mpicoll's schedule
    if rank == 0:
        story = ring_walkthrough(size)
        print("\n" + story)
        final = story.rsplit("complete:", 1)[1]
    final_ok = rank != 0 or all(f"rank {r}: " + "  ".join(
        "+".join(f"{LETTERS[c % 26]}{q}" for q in range(size)) for c in range(size)) in final for r in range(size))
    check(comm, final_ok, "mpicoll's schedule ends in the same state as the hand-written ring")


if __name__ == "__main__":
    main()
