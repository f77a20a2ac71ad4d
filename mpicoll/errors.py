"""MPI-style exceptions: a clear message naming the argument, catchable as ``MPI.Exception``.

mpi4py raises ``MPI.Exception`` (with an MPI error class such as ``MPI.ERR_ROOT``)
for arguments MPI rejects; mpicoll checks the same arguments before any message
and raises exceptions that are *both* an ``MPI.Exception`` with the matching
error class *and* the ``ValueError``/``TypeError`` mpicoll raised before::

    try:
        comm.Bcast(buf, root=7)
    except MPI.Exception as exc:
        assert exc.Get_error_class() == MPI.ERR_ROOT
        print(exc)   # root: Bcast needs a root rank in 0 .. 3 ..., got 7

``str(exc)`` is mpicoll's message; ``exc.Get_error_string()`` is MPI's text for
the class.
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

__all__ = ["MismatchError", "ArgumentError", "PeerFailure", "TopologyError", "ProcFailedError", "OutOfStepError",
           "MPIError", "RootError", "CountError", "CountTypeError", "TypeMismatchError", "DatatypeError",
           "OpError", "OpTypeError", "BufferValueError", "BufferTypeError", "TruncateError", "ArgError"]


class MPIError(MPI.Exception):
    """An argument error found by mpicoll, with MPI error class ``ERROR_CLASS``."""

    ERROR_CLASS = MPI.ERR_ARG

    def __init__(self, message: str) -> None:
        MPI.Exception.__init__(self, self.ERROR_CLASS)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    __hash__ = MPI.Exception.__hash__


class RootError(MPIError, ValueError):
    """A root outside ``0 .. size - 1`` (``MPI.ERR_ROOT``)."""

    ERROR_CLASS = MPI.ERR_ROOT


class CountError(MPIError, ValueError):
    """A negative or inconsistent count or displacement (``MPI.ERR_COUNT``)."""

    ERROR_CLASS = MPI.ERR_COUNT


class CountTypeError(MPIError, TypeError):
    """A count that is not an integer (``MPI.ERR_COUNT``)."""

    ERROR_CLASS = MPI.ERR_COUNT


class TypeMismatchError(MPIError, TypeError):
    """Buffers whose element types do not match (``MPI.ERR_TYPE``)."""

    ERROR_CLASS = MPI.ERR_TYPE


class DatatypeError(MPIError, ValueError):
    """An invalid datatype (``MPI.ERR_TYPE``)."""

    ERROR_CLASS = MPI.ERR_TYPE


class TopologyError(MPIError, ValueError):
    """A neighbourhood collective on a communicator without a virtual topology (``MPI.ERR_TOPOLOGY``)."""

    ERROR_CLASS = MPI.ERR_TOPOLOGY


class OpError(MPIError, ValueError):
    """An op that cannot apply here (``MPI.ERR_OP``)."""

    ERROR_CLASS = MPI.ERR_OP


class OpTypeError(MPIError, TypeError):
    """An op that does not apply to the buffer's element type (``MPI.ERR_OP``)."""

    ERROR_CLASS = MPI.ERR_OP


class BufferValueError(MPIError, ValueError):
    """An unusable buffer: read-only where data is received, overlapping, not contiguous (``MPI.ERR_BUFFER``)."""

    ERROR_CLASS = MPI.ERR_BUFFER


class BufferTypeError(MPIError, TypeError):
    """An object that is not a buffer (``MPI.ERR_BUFFER``)."""

    ERROR_CLASS = MPI.ERR_BUFFER


class TruncateError(MPIError, ValueError):
    """A receive buffer too small for the data it must receive (``MPI.ERR_TRUNCATE``)."""

    ERROR_CLASS = MPI.ERR_TRUNCATE


class ArgError(MPIError, ValueError):
    """Any other invalid argument (``MPI.ERR_ARG``)."""


class MismatchError(MPIError, ValueError):
    """Ranks made collective calls that do not agree (``MPI.ERR_ARG``): another collective, or the same one
    with another count, type signature, root or op, or one rank skipped a call.

    Raised on every rank of the communicator by the always-on check (:mod:`mpicoll.engine.mismatch`), the
    message saying what each rank called; or, with ``MPICOLL_DEBUG``, before any message, by the careful
    path's comparison of the calls' arguments.  ``collective`` is the call's name; ``fields`` maps every
    field that differs to ``{value: [ranks]}`` (the careful path's; empty for the always-on check); ``calls``
    maps ranks to what each called, as this rank learned it (the always-on check's; empty for the careful
    path's), e.g. ``{0: "Allreduce(count=4, dtype=float64, op=SUM) at train.py:12"}``.
    """

    def __init__(self, message: str, collective: str = "", fields: dict[str, dict[Any, list[int]]] | None = None,
                 calls: dict[int, str] | None = None):
        MPIError.__init__(self, message)
        self.collective, self.fields, self.calls = collective, fields or {}, calls or {}


class ArgumentError(ValueError):
    """Some rank's arguments were rejected, so this rank abandoned the call: in debug mode every rank, otherwise
    every rank whose result depends on the rejected rank's data (see :mod:`mpicoll.engine.standin`).

    ``collective`` names the call and ``errors`` maps each rank at fault to its error message.
    """

    def __init__(self, message: str, collective: str = "", errors: dict[int, str] | None = None):
        super().__init__(message)
        self.collective, self.errors = collective, errors or {}


class PeerFailure(RuntimeError):
    """A result depends on a contribution that failed on another rank (an object that would not pickle, an op
    that raised, a root's bad argument); that rank raises the original error.

    ``collective`` names the call and ``rank`` the rank where it failed.
    """

    def __init__(self, collective: str, rank: int) -> None:
        super().__init__(f"{collective}: the result depends on a contribution that failed on rank {rank} "
                         "(that rank raises the error)")
        self.collective, self.rank = collective, rank


class ProcFailedError(MPI.Exception):
    """A process of the communicator died (MPI's fault-tolerance extension, ULFM): the call cannot complete.

    Its MPI error class is ``MPI.ERR_PROC_FAILED`` where this rank saw the failure itself, ``MPI.ERR_REVOKED``
    where it learned of it because a peer revoked mpicoll's private communicator (every survivor stops so,
    whatever it was waiting for).  ``failed`` lists the ranks MPI knows to have failed (in the communicator
    of the call; may be empty where MPI does not know yet), ``collective`` names the call.  The communicator
    goes on after :meth:`~mpicoll.Comm.Shrink`.
    """

    def __init__(self, error_class: int, failed: list[int], collective: str = "") -> None:
        MPI.Exception.__init__(self, error_class)
        self.failed, self.collective = failed, collective
        self.round = -1      # the round of the call this rank was in, where known (for the flight recorder)

    def __str__(self) -> str:
        how = "a process failed" if self.Get_error_class() != MPI.ERR_REVOKED else \
            "a peer revoked the communicator after a process failed"
        who = f" (failed: rank{'s' if len(self.failed) != 1 else ''} {', '.join(map(str, self.failed))})" \
            if self.failed else ""
        call = f"{self.collective}: " if self.collective else ""
        return f"{call}{how}{who}; the survivors can go on with comm.Shrink()"

    def __repr__(self) -> str:
        return f"ProcFailedError({self.Get_error_class()}, {self.failed!r}, {self.collective!r})"

    __hash__ = MPI.Exception.__hash__


class OutOfStepError(RuntimeError):
    """A collective on a communicator whose ranks no longer agree on which call is which: an earlier call timed
    out (:class:`~mpicoll.CollectiveTimeout`), so its messages may still be in flight or never come.  Raised at
    once, before any message.  Go on with a new communicator, made on every rank: ``comm = comm.Dup()`` (MPI's
    own ``Dup`` is in step; mpicoll's private communicator is made anew), or ``comm.Shrink()`` under MPI's
    fault-tolerance extension."""
