"""The nonblocking and persistent executor (the engine): a schedule advanced round by round by Test and Wait.

A collective's bound rounds (see :func:`mpicoll.runtime.blocking.bind`) become a
small state machine.  Starting it posts round 0's receives and sends; from then
on, every ``Test`` or ``Wait`` on *any* mpicoll request of this process moves
*every* started one forward as far as its messages allow: when all of a round's
messages are complete, its local steps (reductions, copies) run and the next
round is posted.  There is no thread: progress happens inside mpicoll's calls,
the weak-progress model of MPI itself (see ``docs/nonblocking.md``).

The requests themselves (:class:`~mpicoll.runtime.requests.Request`,
:class:`~mpicoll.runtime.requests.Prequest`) are in :mod:`mpicoll.runtime.requests`;
this module holds their common state machine and the engine that advances them.

Why every request advances every other: rank 0 may wait on request B while
rank 1 waits on request A; if a Wait moved only its own request, A would never
finish on rank 0 and both would hang.  Likewise a blocking mpicoll collective
called while requests are outstanding keeps them moving (see :func:`mpicoll.comm.dispatch.run_plan`).
Each thread has its own engine: threads that use their own communicators never
run each other's steps.

Each request carries the tag ``mpicoll.Comm`` drew for its call from the
communicator's sequences (blocking, nonblocking and persistent calls have
ranges of their own), so the messages of different calls never match one
another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mpi4py import MPI

from mpicoll.runtime import watchdog

if TYPE_CHECKING:
    pass

__all__ = ["ACTIVE", "ELSEWHERE", "outstanding", "wait_mpi", "progress"]

# request states
_INACTIVE, _RUNNING, _COMPLETE, _FREED = 0, 1, 2, 3

#: the started, unfinished mpicoll requests of the main thread (its engine, see _engine), and those of every
#: other thread: the blocking hot path (mpicoll.comm.dispatch) reads both without a call, and takes the slow
#: path while either is not empty
ACTIVE: list[_Collective] = []
ELSEWHERE: list[_Collective] = []
_THREAD = threading.local()   # .engine: this thread's started, unfinished requests (see _engine)
_testall = MPI.Request.Testall
_waitall = MPI.Request.Waitall
_waitany = MPI.Request.Waitany
_startall = MPI.Prequest.Startall


class _Collective:
    """One rank's share of one collective call, advanced round by round.

    ``_steps[t]`` are round t's local steps; ``_post(t)`` starts round t's
    messages and returns their MPI requests (``_pending``).  ``finish`` runs when
    the collective completes; ``release`` when the engine is done with it,
    completed or dropped by an error (a cached plan is given back).
    """

    __slots__ = ("_steps", "_nrounds", "_round", "_pending", "_finish", "_release", "_state", "tag", "watch",
                 "_engine")

    def __init__(self, steps: list[list[Callable[[], None]]], finish: Callable[[], None] | None, tag: int,
                 release: Callable[[], None] | None = None) -> None:
        self._steps = steps
        self._nrounds = len(steps)
        self._round = 0
        self._pending: list[MPI.Request] = []
        self._finish = finish
        self._release = release
        self._state = _INACTIVE
        self.tag = tag
        self.watch: tuple[str, float, int] | None = None   # (collective, timeout, rank): Wait under the watchdog
        # the requests advanced together with this one: those of the thread that made it (see _engine)
        self._engine: list[_Collective] = _engine()

    def _post(self, t: int) -> list[MPI.Request]:
        raise NotImplementedError

    # -- the state machine ----------------------------------------------------

    def _launch(self) -> None:
        """Post round 0 (or finish at once when there is nothing to send)."""
        self._state = _RUNNING
        self._round = 0
        if self._nrounds == 0:
            self._complete()
            return
        self._enter()
        self._pending = self._post(0)
        if not self._pending:
            self._advance(False)

    def _advance(self, block: bool) -> bool:
        """Run rounds while their messages are complete (waiting for them if ``block``); True when done."""
        steps, t = self._steps, self._round
        while True:
            pending = self._pending
            if pending:
                if block:
                    _waitall(pending)
                elif not _testall(pending):
                    return False
            try:
                for step in steps[t]:
                    step()
            except BaseException:      # e.g. a user op raised: drop the request rather than retry it forever
                self._leave()          # (this round's messages are complete: nothing of it is left in flight)
                self._state, self._pending = _INACTIVE, []
                if self._release is not None:
                    self._release()
                raise
            t += 1
            if t == self._nrounds:
                engine = self._engine   # self._leave(), inline: the end of every run of a persistent request
                engine.remove(self)
                if engine is not ACTIVE:
                    ELSEWHERE.remove(self)
                self._complete()
                return True
            self._round = t
            self._pending = self._post(t)

    def _enter(self) -> None:
        """Join the engine (another thread's also joins the list the hot path reads)."""
        engine = self._engine
        engine.append(self)
        if engine is not ACTIVE:
            ELSEWHERE.append(self)

    def _leave(self) -> None:
        engine = self._engine
        engine.remove(self)
        if engine is not ACTIVE:
            ELSEWHERE.remove(self)

    def _complete(self) -> None:
        self._pending = []
        self._state = _COMPLETE
        if self._finish is not None:
            self._finish()
        if self._release is not None:
            self._release()

    def _done(self) -> bool:
        """Whether the engine has finished (progressing everything first); raise if freed."""
        if self._state == _FREED:
            raise RuntimeError(f"{self!r} was freed")
        if self._state == _RUNNING:
            progress(self._engine)
        return self._state != _RUNNING

    # -- mpi4py's names ---------------------------------------------------------

    def Wait(self, status: MPI.Status | None = None) -> bool:
        """Block until the collective is complete, moving every outstanding mpicoll request along.

        Parameters
        ----------
        status : MPI.Status, optional
            Set empty, as MPI does for collectives.

        Returns
        -------
        bool
            Always True (mpi4py's convention).

        Raises
        ------
        RuntimeError
            The request was freed.
        CollectiveTimeout
            The communicator has a timeout and the collective made no progress for that long.
        """
        state = self._state
        if state == _FREED:
            raise RuntimeError(f"{self!r} was freed: it cannot be waited on")
        if state == _RUNNING:
            if self.watch is not None:      # a timeout was set: poll under the watchdog
                watchdog.wait(self._done, lambda: list(self._engine), *self.watch)
            elif len(self._engine) == 1:      # alone: block in MPI round by round, no polling
                self._advance(True)
            else:
                _wait_until(lambda: self._state != _RUNNING, self._engine)
        self._state = _INACTIVE
        if status is not None:
            _empty(status)
        return True

    def Test(self, status: MPI.Status | None = None) -> bool:
        """Move every outstanding mpicoll request along, without blocking.

        Parameters
        ----------
        status : MPI.Status, optional
            Set empty when complete.

        Returns
        -------
        bool
            True when this request is complete (it is then done, as after ``Wait()``).

        Raises
        ------
        RuntimeError
            The request was freed.
        """
        if not self._done():
            return False
        self._state = _INACTIVE
        _empty(status)
        return True

    def Free(self) -> None:
        """Release the request.

        Raises
        ------
        RuntimeError
            The request is active: MPI forbids freeing an active collective request.
        """
        if self._state in (_RUNNING, _COMPLETE):
            raise RuntimeError(f"{self!r} is active: complete it with Wait() or Test() before Free()")
        self._state = _FREED

    def __bool__(self) -> bool:
        """As for ``MPI.Request``: false once completed (a null request) or freed."""
        return self._state in (_RUNNING, _COMPLETE)

    # class-level helpers, as MPI.Request has them; they accept MPI.Request objects too

    @staticmethod
    def Waitall(requests: Sequence[Any], statuses: list[MPI.Status] | None = None) -> bool:
        """Wait for every request (mpicoll's or MPI's) in ``requests``.

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
        progress()
        if not all(_is_complete(req) for req in requests):
            return False
        return _Collective.Waitall(requests, statuses)

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
            index, flag = _Collective.Testany(requests, status)
            if flag:
                return index
            mine = [i for i, r in enumerate(requests) if isinstance(r, MPI.Request)]
            k = _block_once([requests[i] for i in mine], status)
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
        progress()
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
        """Start every persistent request in ``requests``.

        Parameters
        ----------
        requests : iterable of Prequest

        Raises
        ------
        RuntimeError
            A request is freed or still active (see :meth:`Prequest.Start`).
        """
        for req in requests:
            req.Start()


def _engine() -> list[_Collective]:
    """This thread's started, unfinished requests: they advance together (a Wait on one moves them all).

    Each thread has its own, so threads that call collectives on their own
    communicators never run each other's steps; a request waited on by another
    thread still advances with the requests of the thread that made it.
    """
    engine = getattr(_THREAD, "engine", None)
    if engine is None:   # the main thread's is ACTIVE: a program without threads keeps one list
        engine = _THREAD.engine = ACTIVE if threading.current_thread() is threading.main_thread() else []
    return engine


def outstanding() -> bool:
    """Whether any mpicoll request started by this thread is not finished."""
    return bool(_engine())


def progress(engine: list[_Collective] | None = None) -> None:
    """Move every outstanding request of ``engine`` (this thread's) as far as its messages allow, without blocking."""
    for req in list(_engine() if engine is None else engine):
        req._advance(False)


def wait_mpi(request: MPI.Request) -> None:
    """Wait for an MPI request while keeping mpicoll's outstanding requests moving."""
    _wait_one(request, None)


# -- helpers ---------------------------------------------------------------------------

def _wait_until(done: Callable[[], bool], engine: list[_Collective]) -> None:
    """Progress ``engine`` until ``done()``, sleeping inside MPI (Waitany) rather than polling in Python."""
    progress(engine)
    while not done():
        _block_once((), engine=engine)
        progress(engine)


def _block_once(extra: Sequence[MPI.Request], status: MPI.Status | None = None,
                engine: list[_Collective] | None = None) -> int | None:
    """Block until one message of some outstanding request, or one of ``extra``, completes.

    Returns the index in ``extra`` of the request that completed (MPI has then
    completed it, as ``Waitany`` does, filling ``status``), or None.
    """
    internal = [q for req in (_engine() if engine is None else engine) for q in req._pending]
    if not internal and not any(extra):
        return None
    i = _waitany(internal + list(extra), status)
    return i - len(internal) if i != MPI.UNDEFINED and i >= len(internal) else None


def _wait_one(req: Any, status: MPI.Status | None) -> None:
    if isinstance(req, _Collective):
        req.Wait(status)
    elif isinstance(req, MPI.Request):
        while _engine():      # keep this thread's mpicoll requests moving while the MPI request is not done
            progress()
            if req.Get_status():
                break
            if _block_once((req,), status) == 0:
                return        # Waitany completed it
        req.Wait(status)
    else:
        raise TypeError(f"expected a request, got {type(req).__name__}")


def _is_active(req: Any) -> bool:
    if isinstance(req, _Collective):
        if req._state == _FREED:
            raise RuntimeError(f"{req!r} was freed")
        return req._state in (_RUNNING, _COMPLETE)
    return req != MPI.REQUEST_NULL


def _is_complete(req: Any) -> bool:
    if isinstance(req, _Collective):
        return req._done()
    if isinstance(req, MPI.Request):
        return req.Get_status()    # true for a null or inactive request too, as MPI_Request_get_status says
    raise TypeError(f"expected a request, got {type(req).__name__}")


def _empty(status: MPI.Status | None) -> None:
    """A collective's status is empty (MPI-4 §3.7.3): any source, any tag, no error, 0 elements."""
    if status is not None:
        status.Set_source(MPI.ANY_SOURCE)
        status.Set_tag(MPI.ANY_TAG)
        status.Set_error(MPI.SUCCESS)
        status.Set_elements(MPI.BYTE, 0)
