"""Communicators whose calls were found mismatched: the flag the engine tests, and the error it then raises.

The mismatch check's watcher (:mod:`mpicoll.engine.mismatch`) finds a mismatch and :func:`flag` s the
communicator; the engine's round loops (Python and C) test :data:`FLAGGED` before each round and after each
wait, which costs one test of an empty list in a correct program, and call :func:`check` with their
communicator when it is not empty.  This module owns what was found; it posts no message.
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll.errors import MismatchError

__all__ = ["FLAGGED", "check", "flag", "found", "raised", "unflag", "forget"]

#: the private communicators whose calls were found mismatched (normally empty: what the engine tests)
FLAGGED: list[MPI.Comm] = []
#: private communicator's handle -> [message, collective, what each rank called, whether a call raised it]
_FOUND: dict[int, list] = {}


def flag(private: MPI.Comm, message: str, collective: str, calls: dict[int, str]) -> None:
    """A mismatch found on ``private``: every call on it raises from now on."""
    _FOUND[MPI._handleof(private)] = [message, collective, calls, False]
    FLAGGED.append(private)


def check(comm: MPI.Comm) -> None:
    """Raise the mismatch found on ``comm`` (a private communicator), if there is one: what the engine calls
    before each round and after each wait while :data:`FLAGGED` is not empty."""
    entry = _FOUND.get(MPI._handleof(comm))
    if entry is not None:
        entry[3] = True
        raise MismatchError(entry[0], entry[1], calls=entry[2])


def found(private: MPI.Comm) -> str | None:
    """The message of the mismatch found on ``private``, or None."""
    entry = _FOUND.get(MPI._handleof(private))
    return entry[0] if entry is not None else None


def raised(private: MPI.Comm) -> bool:
    """Whether a call of this rank raised the mismatch found on ``private`` (else it is said at exit)."""
    entry = _FOUND.get(MPI._handleof(private))
    return entry is not None and entry[3]


def unflag(private: MPI.Comm) -> None:
    """``private`` is released: no call will test it (what was found stays until :func:`forget`)."""
    if private in FLAGGED:
        FLAGGED.remove(private)


def forget(private: MPI.Comm) -> None:
    """``private`` is to be freed (its handle may then be another communicator's)."""
    unflag(private)
    _FOUND.pop(MPI._handleof(private), None)
