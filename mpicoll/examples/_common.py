"""Small helpers shared by the examples (not an example itself)."""

from __future__ import annotations

from mpi4py import MPI


def say(comm: MPI.Comm, *lines: str) -> None:
    """Print ``lines`` once, from rank 0."""
    if comm.rank == 0:
        print("\n".join(lines), flush=True)


def check(comm: MPI.Comm, ok: bool, what: str) -> None:
    """Agree across ranks that ``ok`` holds everywhere; print the verdict, or stop every rank.

    Every rank calls this with its own ``ok``; the verdict is their logical AND,
    so a failure on any one rank makes every rank exit with an error (no hang).
    """
    everywhere = comm.allreduce(bool(ok), op=MPI.LAND)
    if comm.rank == 0:
        print(f"check: {what}: {'OK' if everywhere else 'FAILED'}", flush=True)
    if not everywhere:
        raise SystemExit(f"example check failed: {what}")
