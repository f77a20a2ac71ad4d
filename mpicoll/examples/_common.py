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


def show_states(title: str, states: list) -> None:
    """Print one line per rank, as the textbook figures show a collective (call on rank 0)."""
    print(title)
    for r, state in enumerate(states):
        text = "(no buffer)" if state is None else " ".join(f"{v:>4}" for v in list(state))
        print(f"  rank {r}: {text}")


def show_everyone(comm: MPI.Comm, title: str, x) -> None:
    """Gather what every rank holds (``x`` may be None) and print it on rank 0."""
    states = comm.gather(None if x is None else list(x.tolist()))
    if comm.rank == 0:
        show_states(title, states)
