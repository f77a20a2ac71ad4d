"""Diagnostics: see which algorithm ran (MPICOLL_DEBUG=2) and what the debug checks catch.

Run:  mpirun -n 4 python -m mpicoll.examples.diagnostics   (any N >= 2)

Like ``NCCL_DEBUG=INFO``, ``MPICOLL_DEBUG=2`` prints one line per call and rank
on stderr: the algorithm that ran, its rounds, the sizes and the time.  This
example turns it on for communicators it wraps itself (it sets the variable and
calls :func:`mpicoll.config.reload`, as a program that changes the environment
must), then:

1. runs an 8-byte and a 1 MiB all-reduce with ``algorithm="auto"`` and prints
   every rank's log line in rank order (it captures them from stderr and
   gathers them on rank 0): which algorithm auto ran for each size;
2. makes the last rank call ``Allreduce`` with a different count than the
   others: with ``MPICOLL_DEBUG`` set the ranks compare their calls first, so
   every rank raises :class:`mpicoll.MismatchError` naming the ranks and the
   counts, instead of hanging; the example prints rank 0's message;
3. gives one rank a root out of range: every rank raises
   :class:`mpicoll.ArgumentError` (the faulty rank's ``MPI.ERR_ROOT`` reaches
   all of them), so nobody is left waiting.

The docs page "Diagnostics" lists every error and what it means.
"""

from __future__ import annotations

import contextlib
import io
import os

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll import config
from mpicoll.examples._common import check, say


@contextlib.contextmanager
def debug_level(level: str):
    """Wrap communicators with ``MPICOLL_DEBUG=level`` inside the block (the old value comes back after)."""
    old = os.environ.get("MPICOLL_DEBUG")
    os.environ["MPICOLL_DEBUG"] = level
    config.reload()
    try:
        yield
    finally:
        if old is None:
            del os.environ["MPICOLL_DEBUG"]
        else:
            os.environ["MPICOLL_DEBUG"] = old
        config.reload()


def logged_allreduce(comm: mpicoll.Comm, nbytes: int) -> str:
    """An all-reduce of ``nbytes`` with auto; returns this rank's MPICOLL_DEBUG=2 line (captured from stderr)."""
    x = np.ones(nbytes // 8)
    y = np.empty_like(x)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        comm.Allreduce(x, y)
    check(comm, bool(np.all(y == comm.size)), f"{nbytes}-byte all-reduce sums the {comm.size} ranks")
    return err.getvalue().strip()


def main() -> None:
    world = MPI.COMM_WORLD
    with debug_level("2"):
        comm = mpicoll.Comm(world.Dup())
        say(comm, "1. MPICOLL_DEBUG=2: one line per call and rank (collected here and printed in rank order)")
        chosen = []
        for nbytes in (8, 1 << 20):
            line = logged_allreduce(comm, nbytes)
            lines = comm.gather(line)
            say(comm, *(f"   {text}" for text in (lines or [])))
            chosen.append(line.split("algorithm=")[1].split()[0] if "algorithm=" in line else "?")
        say(comm, f"   auto ran {chosen[0]} for 8 bytes and {chosen[1]} for 1 MiB: small messages are "
                  "latency-bound, large ones bandwidth-bound (python -m mpicoll model allreduce -p "
                  f"{comm.size} --bytes 1M says why)")
        check(comm, "?" not in chosen and comm.allreduce(chosen) == chosen * comm.size,
              "every rank logged the algorithm it ran, the same on every rank")

        say(comm, "\n2. the last rank passes 3 elements, the others 4: every rank raises MismatchError")
        count = 3 if comm.rank == comm.size - 1 else 4
        try:
            comm.Allreduce(np.ones(count), np.empty(count))
            caught = None
        except mpicoll.MismatchError as exc:
            caught = exc
        say(comm, f"   rank 0 caught: {caught}")
        check(comm, caught is not None, "every rank raised MismatchError, none hung")

        say(comm, f"\n3. rank {comm.size - 1} gives root = {comm.size} to Bcast: every rank raises ArgumentError")
        root = comm.size if comm.rank == comm.size - 1 else 0
        try:
            comm.Bcast(np.zeros(4), root=root)
            failed = None
        except (mpicoll.ArgumentError, ValueError) as exc:
            failed = exc
        say(comm, f"   rank 0 caught {type(failed).__name__}: {failed}")
        check(comm, isinstance(failed, ValueError), "every rank raised, none was left waiting")
        comm.Free()


if __name__ == "__main__":
    main()
