"""Waiting on a mix of mpicoll's requests and MPI's own: the class-level helpers of ``MPI.Request``.

``MPI.Request.Waitall`` and its kin take mpicoll's requests too (each is an MPI
generalized request, completed by the request loop of :mod:`mpicoll.engine.nonblocking`
or the progress thread).  The same helpers on mpicoll's request classes
(:class:`MixedWaits`, mixed into :class:`~mpicoll.engine.requests.Request` and
:class:`~mpicoll.engine.requests.Prequest`) also drive mpicoll's requests from the
calling thread, so they work with the progress thread off (``MPICOLL_PROGRESS=0``),
and ``Startall`` starts mpicoll's persistent requests, which ``MPI_Startall`` cannot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mpi4py import MPI

from mpicoll.engine.inflight import COMPLETE, FREED, RUNNING, block_once, guard, outstanding, poke, progress
from mpicoll.engine.nonblocking import _Collective, _mpi_bool, _startall

__all__ = ["MixedWaits"]


class MixedWaits:
    """``Waitall``, ``Testall``, ``Waitany``, ``Testany`` and ``Startall`` over lists of mpicoll's and MPI's
    requests (a mixin of mpicoll's request classes)."""

    __slots__ = ()


    @staticmethod
    def Waitall(requests: Sequence[Any], statuses: list[MPI.Status] | None = None) -> bool:
        """Wait for every request (mpicoll's or MPI's) in ``requests``.

        Unlike ``MPI.Request.Waitall``, this also works when the progress thread
        is off (``MPICOLL_PROGRESS=0``): the calling thread drives mpicoll's requests.

        Parameters
        ----------
        requests : sequence of Request, Prequest or MPI.Request
            Completed in order.
        statuses : list of MPI.Status, optional
            One per request.

        Returns
        -------
        bool
            Always True.
        """
        for i, req in enumerate(requests):
            _wait_one(req, statuses[i] if statuses is not None else None)
        return True

    @staticmethod
    def Testall(requests: Sequence[Any], statuses: list[MPI.Status] | None = None) -> bool:
        """Whether every request is complete; if so, complete them all, else complete none.

        Parameters
        ----------
        requests : sequence of Request, Prequest or MPI.Request
        statuses : list of MPI.Status, optional

        Returns
        -------
        bool
        """
        poke()
        if not all(_is_complete(req) for req in requests):
            return False
        return MixedWaits.Waitall(requests, statuses)

    @staticmethod
    def Waitany(requests: Sequence[Any], status: MPI.Status | None = None) -> int:
        """Block until one request completes.

        Parameters
        ----------
        requests : sequence of Request, Prequest or MPI.Request
        status : MPI.Status, optional

        Returns
        -------
        int
            The index of the request completed now, or ``MPI.UNDEFINED`` when none is active.
        """
        while True:
            index, flag = MixedWaits.Testany(requests, status)
            if flag:
                return index
            mine = [i for i, r in enumerate(requests) if not isinstance(r, _Collective)]
            with guard():
                k = block_once([requests[i] for i in mine], status)
            if k is not None:       # one of the MPI requests completed (MPI has completed it)
                return mine[k]

    @staticmethod
    def Testany(requests: Sequence[Any], status: MPI.Status | None = None) -> tuple[int, bool]:
        """Complete one request if one is complete, without blocking.

        Parameters
        ----------
        requests : sequence of Request, Prequest or MPI.Request
        status : MPI.Status, optional

        Returns
        -------
        tuple of (int, bool)
            ``(index, True)`` for a request completed now, ``(MPI.UNDEFINED, True)`` if none is active,
            otherwise ``(MPI.UNDEFINED, False)``; every outstanding request is moved along first.
        """
        poke()
        active = False
        for i, req in enumerate(requests):
            if not _is_active(req):
                continue
            active = True
            if _is_complete(req):
                _wait_one(req, status)
                return i, True
        return (MPI.UNDEFINED, True) if not active else (MPI.UNDEFINED, False)

    @staticmethod
    def Startall(requests: Iterable[Any]) -> None:
        """Start every persistent request in ``requests``, mpicoll's or MPI's.

        ``MPI.Prequest.Startall`` starts MPI's own persistent requests only
        (``MPI_Startall`` cannot start a generalized request): pass lists that
        hold mpicoll's here.

        Parameters
        ----------
        requests : iterable of Prequest or MPI.Prequest

        Raises
        ------
        RuntimeError
            A request is freed or still active (see :meth:`Prequest.Start`).
        """
        theirs = []
        for req in requests:
            if isinstance(req, _Collective):
                req.Start()
            else:
                theirs.append(req)
        if theirs:
            _startall(theirs)


def _wait_one(req: Any, status: MPI.Status | None) -> None:
    if isinstance(req, _Collective):
        req.Wait(status)
    elif isinstance(req, MPI.Request):
        if outstanding():
            with guard():
                while outstanding():      # keep this thread's mpicoll requests moving while the MPI request is not done
                    progress()
                    if req.Get_status():
                        break
                    if block_once((req,), status) == 0:
                        return        # Waitany completed it
        req.Wait(status)
    else:
        raise TypeError(f"expected a request, got {type(req).__name__}")


def _is_active(req: Any) -> bool:
    if isinstance(req, _Collective):
        if req._state == FREED:
            raise RuntimeError(f"{req!r} was freed")
        return req._state == RUNNING or (req._state == COMPLETE and _mpi_bool(req))
    return req != MPI.REQUEST_NULL


def _is_complete(req: Any) -> bool:
    if isinstance(req, _Collective):
        return req._done()
    if isinstance(req, MPI.Request):
        return req.Get_status()    # true for a null or inactive request too, as MPI_Request_get_status says
    raise TypeError(f"expected a request, got {type(req).__name__}")
