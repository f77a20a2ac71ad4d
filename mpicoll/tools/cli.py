"""One way for every command line of mpicoll to answer a mistake: a usage line and one error line, once.

``python -m mpicoll`` and its subcommands (``bench``, ``osu``, ``autocheck``, ...) may run on
many ranks at once.  Every rank parses the same arguments, so a usage error is found by every
rank at the same point, before any message: :class:`Parser` prints one line on rank 0 only,
without a traceback, and raises :class:`UsageError`; :func:`run` ends every rank with exit
status 2, finalizing MPI as usual: ``python -m mpi4py`` (which :mod:`mpicoll.launch` runs
programs under) would otherwise turn the exit status into ``MPI_Abort`` and its banner.  Open
MPI's launcher still reports, in a box, that a process exited with a non-zero status.

Errors that are not usage errors keep their traceback (and, under ``python -m mpi4py``,
``MPI_Abort``): an error one rank meets must not leave the others waiting.
"""

from __future__ import annotations

import argparse
import atexit
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["UsageError", "usage_error", "Parser", "run", "guarded", "rank", "mpi_running"]


class UsageError(SystemExit):
    """A mistake in a command line, already reported: exit status 2, like argparse's own.

    A ``SystemExit``, so that code calling a command's ``main()`` sees what argparse would do.
    """

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def usage_error(prog: str, message: str) -> UsageError:
    """Print ``PROG: error: MESSAGE (PROG --help ...)`` on rank 0 and return the exception to raise."""
    line = f"{prog}: error: {message}  ({prog} --help lists the options)"
    if rank() == 0:
        print(line, file=sys.stderr, flush=True)
    return UsageError(line)


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one line printed on rank 0 (then :class:`UsageError`)."""

    def error(self, message: str) -> Any:   # argparse calls this for every bad argument
        raise usage_error(self.prog, message)


def mpi_running() -> Any:
    """mpi4py's ``MPI`` module if this process already initialized MPI (and has not finalized it), else None.

    Never imports mpi4py: the tools that need no MPI stay free of it.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized():
        return None
    return mpi


def rank() -> int:
    """This process's rank in ``MPI.COMM_WORLD``; 0 without MPI."""
    mpi = mpi_running()
    return mpi.COMM_WORLD.Get_rank() if mpi is not None else 0


def run(main: Callable[[Sequence[str] | None], Any], argv: Sequence[str] | None = None) -> int:
    """Run a command's ``main(argv)``; after a usage error (or any non-zero status) every rank leaves quietly.

    Returns ``main``'s integer status (0 for anything else it returns) where it can.
    """
    try:
        status = main(argv)
    except UsageError:
        status = 2
    status = status if isinstance(status, int) else 0
    if status:
        _leave(status)
    return status


def guarded(main: Callable[[Sequence[str] | None], Any], argv: Sequence[str] | None = None) -> int:
    """:func:`run` for a command that uses MPI: any other uncaught error prints its traceback and aborts the job.

    An error only one rank meets would otherwise leave the other ranks waiting forever.
    """
    try:
        return run(main, argv)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        mpi = mpi_running()
        if mpi is not None:
            mpi.COMM_WORLD.Abort(1)
        raise


def _leave(status: int) -> None:
    """End this rank with ``status``; under MPI, finalized as usual rather than by ``MPI_Abort``.

    ``python -m mpi4py`` turns a non-zero ``SystemExit`` into ``MPI_Abort`` at exit; every rank
    leaves here together, so nobody is waiting and the abort (and its banner) is not needed.
    """
    mpi = mpi_running()
    if mpi is not None:
        atexit.register(mpi._set_abort_status, 0)   # runs before mpi4py's own exit handler (last in, first out)
    raise SystemExit(status)
