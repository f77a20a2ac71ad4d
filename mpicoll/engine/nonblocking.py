"""Requests, advanced round by round: the request form of :mod:`mpicoll.engine.rounds`.

A collective's bound rounds become a small state machine: starting it posts round 0's messages; whoever
advances it moves it as far as its messages allow (when a round's messages are complete, its local steps
run and the next round is posted); an error of its messages or steps ends it, and its ``Wait`` raises the
error.  Two kinds of callers advance requests:

- the caller's own mpicoll calls: every ``Test`` or ``Wait`` on *any* mpicoll request of a thread moves
  *every* started request of that thread (the thread's *queue*, :mod:`mpicoll.engine.inflight`).  A
  blocking mpicoll call made while requests are outstanding keeps them moving too
  (:func:`mpicoll.comm.preparing.run_plan`);
- the progress thread (:mod:`mpicoll.engine.progress`), while requests are outstanding, so that they also
  complete while the program is inside another library's call (an mpi4py ``Recv``) or computing.

Where the optional extension is built (:mod:`mpicoll.engine.direct`), a request's rounds are posted and
completed from C (``self._direct``), and a persistent request's ``Start`` and ``Wait`` run from C in their
common case.

Every request is an ``MPI.Request`` whose handle is an MPI generalized request (``MPI.Grequest``), started
when the collective starts and completed when the engine finishes it: mpi4py's own functions
(``MPI.Request.Waitall``, ``Testany``, ``Get_status``...) see mpicoll's requests as the MPI library's.  Each
carries the tag its call drew (one range per kind of call), so different calls' messages never match.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll.engine import direct, watchdog
from mpicoll.engine.flags import FLAGGED, check
from mpicoll.engine.inflight import (
    ACTIVE,
    COMPLETE,
    ELSEWHERE,
    FREED,
    INACTIVE,
    RUNNING,
    progress,
    queue_of_this_thread,
    wait_until,
)
from mpicoll.engine.rounds import fault, is_fault, keep_active
from mpicoll.engine.rounds import testall as _testall
from mpicoll.engine.rounds import waitall as _waitall

__all__ = ["_Collective"]

_startall = MPI.Prequest.Startall
_mpi_free = MPI.Request.Free
_mpi_get_status = MPI.Request.Get_status
_mpi_bool = MPI.Request.__bool__
_grequest = MPI.Grequest.Start
_addressof = MPI._addressof
_HANDLE = MPI._sizeof(MPI.Request)
_memmove = ctypes.memmove
#: called when a request joins a queue: wakes the progress thread (set by mpicoll.engine.progress)
_WAKE: list[Callable[[], None]] = []


class _Collective(MPI.Request):
    """One rank's share of one collective call, advanced round by round; an ``MPI.Request`` to mpi4py.

    ``_steps[t]`` are round t's local steps; ``_post(t)`` starts round t's
    messages and returns their MPI requests (``_pending``).  ``finish`` runs when
    the collective completes; ``lent`` is the cached plan lent to it, given back
    (its ``lent`` flag cleared) when the engine is done with it, completed or dropped by an error.  ``_keep``
    holds the call's arguments (the user's buffers) until the collective completes.

    The MPI handle is a generalized request started with each run (:meth:`_arm`)
    and completed by the engine (:meth:`_complete`); waiting for it (here, or in any
    of mpi4py's functions) frees it, and the handle becomes ``MPI.REQUEST_NULL``.
    """

    __slots__ = ("_steps", "_nrounds", "_round", "_pending", "_finish", "_lent", "_state", "tag", "watch",
                 "_queue", "_guard", "_greq", "_keep", "_error", "_comms", "trace", "_generalized", "_direct")

    def __new__(cls, *args: Any, **kwargs: Any) -> _Collective:
        return MPI.Request.__new__(cls)   # mpi4py's constructor takes a request to copy, not ours' arguments

    def __init__(self, steps: list[list[Callable[[], None]]], finish: Callable[[], None] | None, tag: int,
                 lent: Any = None, keep: Any = None) -> None:
        self._steps = steps
        self._nrounds = len(steps)
        self._round = 0
        self._pending: list[MPI.Request] = []
        self._finish = finish
        self._lent = lent
        self._state = INACTIVE
        self.tag = tag
        # (collective, timeout, rank[, on_timeout]): Wait under the watchdog; on_timeout(exc) is told of a timeout
        self.watch: tuple | None = None
        # the requests advanced together with this one: those of the thread that made it (see _queue)
        self._queue, self._guard = queue_of_this_thread()
        self._greq: MPI.Grequest | None = None
        self._keep = keep
        self._error: BaseException | None = None
        self._comms: list[MPI.Comm] = []     # round t's communicator (set by the subclass that posts them)
        self.trace: Any = None   # its flight record (a mpicoll.engine.recorder.Traced), or None
        # the generalized request started and completed from C (mpicoll.engine.direct), or None: mpi4py's
        self._generalized = direct.generalized(self)
        # the rounds posted and completed from C (mpicoll.engine.direct), or None: by _post and mpi4py
        self._direct: Any = None

    def _post(self, t: int) -> list[MPI.Request]:
        raise NotImplementedError

    # -- the generalized request behind the handle ------------------------------------------------------

    def _arm(self) -> None:
        """Start this run's generalized request and make it this object's MPI handle."""
        self._error = None      # (a run that MPI's own wait completed in error never reached _settle)
        if self._generalized is not None:
            self._generalized.start()
            return
        greq = self._greq = _grequest(self._query, None, self._cancelled)
        _memmove(_addressof(self), _addressof(greq), _HANDLE)

    def _query(self, status: MPI.Status) -> None:
        """MPI asks for the status of the completed collective: empty, with an error if a step raised, raised too
        (Open MPI 5.0's ``MPI_Waitall`` without statuses reads only the code the query function returns)."""
        _empty(status)
        if self._error is not None:
            status.Set_error(_error_class(self._error))
            raise MPI.Exception(status.Get_error()) from None    # (mpi4py prints it, and returns its code to MPI)

    @staticmethod
    def _cancelled(completed: bool) -> None:
        raise RuntimeError("MPI_Cancel on a collective request is erroneous (MPI-4.1 section 6.12)")

    # -- the state machine (the caller holds self._guard) -------------------------------------------

    def _launch(self) -> None:
        """Post round 0 (or finish at once when there is nothing to send)."""
        rounds = self._direct
        if rounds is not None and self._nrounds:     # posted from C before the request joins its queue: no
            self._arm()                              # other thread can see it before, so no guard is needed
            self._state, self._round = RUNNING, 0
            try:
                rounds.start(self.tag)
            except MPI.Exception as exc:
                self._start_failed(exc)
                return
            self._enter()
            return
        with self._guard:
            self._arm()
            self._state = RUNNING
            self._round = 0
            if self._nrounds == 0:
                self._complete()
                return
            self._enter()
            try:
                if FLAGGED:
                    check(self._comms[0])
                self._pending = self._post(0)
            except MPI.Exception as exc:     # e.g. the communicator was revoked: the request ends with it
                self._fail(exc, ())
                return
            if not self._pending:
                self._advance(False)

    def _start_failed(self, exc: MPI.Exception) -> None:
        """Round 0 could not be started (e.g. the communicator was revoked): the request ends with ``exc``."""
        with self._guard:
            self._enter()
            self._fail(exc, self._waitable())

    def _advance(self, block: bool) -> bool:
        """Run rounds while their messages are complete (waiting for them if ``block``); True when done.

        A step that raises (a user op) ends the request: it is completed with
        the error, which its ``Wait`` or ``Test`` raises (the round's messages are
        complete then, so nothing of it is left in flight).
        """
        if self._direct is not None:
            return self._advance_direct(block)
        steps, t = self._steps, self._round
        while True:
            pending = self._pending
            if pending:
                try:
                    if block:
                        _waitall(pending)
                    elif not _testall(pending):
                        return False
                    if FLAGGED:
                        check(self._comms[t])
                except MPI.Exception as exc:   # a marked message, or a process failed: the request ends with it
                    return self._fail(exc, pending)
            try:
                for step in steps[t]:
                    step()
            except BaseException as exc:      # e.g. a user op raised: drop the request rather than retry it
                self._leave()
                self._error = exc
                self._complete()
                return True
            t += 1
            if t == self._nrounds:
                queue = self._queue   # self._leave(), inline: the end of every run of a persistent request
                queue.remove(self)
                if queue is not ACTIVE:
                    ELSEWHERE.remove(self)
                self._complete()
                return True
            self._round = t
            try:
                if FLAGGED:
                    check(self._comms[t])
                self._pending = self._post(t)
            except MPI.Exception as exc:
                return self._fail(exc, ())

    def _advance_direct(self, block: bool) -> bool:
        """:meth:`_advance` for rounds that C posts and completes (``self._direct``)."""
        rounds = self._direct
        try:
            done = rounds.advance(block)
        except BaseException as exc:
            self._round = rounds.current
            return self._advance_failed(exc)
        self._round = rounds.current
        if not done:
            return False
        self._leave()
        self._complete()
        return True

    def _advance_failed(self, exc: BaseException) -> bool:
        """Round ``self._round`` of the rounds C runs raised ``exc``: its messages (the request ends as
        :meth:`_fail` says) or a local step (a user op: the request ends with the error)."""
        if isinstance(exc, MPI.Exception) and not self._direct.in_steps:
            return self._fail(exc, self._direct.pending())
        self._leave()
        self._error = exc
        self._complete()
        return True

    def _waitable(self) -> list[MPI.Request]:
        """The current round's MPI requests (for a wait on several requests' messages at once)."""
        return self._pending if self._direct is None else self._direct.pending()

    def _fail(self, exc: BaseException, pending: list[MPI.Request]) -> bool:
        """Round ``self._round``'s messages raised ``exc``: the request is completed with the error its ``Wait``
        raises (a process failure as :class:`~mpicoll.ProcFailedError`, after revoking the round's
        communicator: see :func:`mpicoll.engine.rounds.fault`)."""
        comm = self._comms[self._round] if self._round < len(self._comms) else None
        self._leave()
        self._pending = []
        if comm is not None and is_fault(exc, comm):
            self._error = fault(comm, exc, pending, self._round)
        else:
            self._error = exc
            keep_active(pending)
        self._complete()
        return True

    def _enter(self) -> None:
        """Note the start in the flight recorder; join its queue (another thread's also joins the list the hot
        path reads); wake the progress thread."""
        if self.trace is not None:    # (first: once in the queue, another thread may complete the request)
            self.trace.started(self)
        queue = self._queue
        queue.append(self)
        if queue is not ACTIVE:
            ELSEWHERE.append(self)
        if _WAKE:
            _WAKE[0]()

    def _leave(self) -> None:
        queue = self._queue
        queue.remove(self)
        if queue is not ACTIVE:
            ELSEWHERE.remove(self)

    def _complete(self) -> None:
        """The collective is done: finish it, let go of its buffers, and complete the MPI handle (last: another
        thread that sees the state complete may wait on the handle at once)."""
        self._pending = []
        try:
            if self._finish is not None and self._error is None:
                self._finish()
        except BaseException as exc:
            self._error = exc
        finally:
            if self._lent is not None:
                self._lent.lent = False     # (the cached plan may serve the next call)
            self._keep = None          # the buffers are no longer read or written
            if self.trace is not None:
                self.trace.ended(self._error, self._round)
            self._state = COMPLETE
            if self._generalized is None:
                self._greq.Complete()
            else:
                self._generalized.complete(_error_class(self._error))

    def _settle(self, status: MPI.Status | None) -> None:
        """The engine has completed the collective: free its handle (if no MPI call did), raise its error.

        The completed generalized request is freed (``MPI_Request_free``), not waited on: a wait would call
        back into Python for the status, which a collective's is empty anyway.
        """
        error, self._error = self._error, None
        if _mpi_bool(self):
            _mpi_free(self)
        if status is not None:
            _empty(status)
        self._state = INACTIVE
        if error is not None:
            raise error

    def _done(self) -> bool:
        """Whether the engine has finished, progressing this thread's requests first (if no one else is)."""
        if self._state == RUNNING:
            guard = self._guard
            if guard.acquire(blocking=False):
                try:
                    progress(self._queue)
                finally:
                    guard.release()
        return self._state != RUNNING

    def _check_not_freed(self, doing: str) -> None:
        if self._state == FREED:
            raise RuntimeError(f"{self!r} was freed: it cannot be {doing}")

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
        self._check_not_freed("waited on")
        if self._state == RUNNING:
            with self._guard:       # the progress thread keeps off this queue while the waiting thread drives it
                if self._state == RUNNING:
                    self._wait_locked()
        if self._state == COMPLETE:
            self._settle(status)
        elif status is not None:
            _empty(status)
        return True

    def _wait_locked(self) -> None:
        queue = self._queue
        if self.watch is not None:      # a timeout was set: poll under the watchdog
            try:
                watchdog.wait(lambda: _progressed(self, queue), lambda: list(queue), *self.watch[:3])
            except watchdog.CollectiveTimeout as exc:   # the request ends with it (Wait raises it), its
                for told in self.watch[3:]:             # messages kept (rounds.ORPHANS)
                    told(exc)
                if self._state != RUNNING:
                    raise
                self._fail(exc, self._pending)
        elif len(queue) == 1:          # alone: block in MPI round by round, no polling
            self._advance(True)
        else:
            wait_until(lambda: self._state != RUNNING, queue)

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
        self._check_not_freed("tested")
        if not self._done():
            return False
        if self._state == COMPLETE:
            self._settle(status)
        elif status is not None:
            _empty(status)
        return True

    def Get_status(self, status: MPI.Status | None = None) -> bool:
        """Whether the collective is complete, without completing the request (``MPI_Request_get_status``).

        Moves this thread's outstanding requests along first.  An inactive or null request is complete.
        """
        self._check_not_freed("queried")
        if not self._done():
            return False
        if self._state == COMPLETE and self._error is None and _mpi_bool(self):
            return _mpi_get_status(self, status)
        _empty(status)
        if status is not None and self._state == COMPLETE and self._error is not None:   # (Wait raises it)
            status.Set_error(_error_class(self._error))
        return True

    def wait(self, status: MPI.Status | None = None) -> None:
        """``Wait()``; a collective delivers no object, so None (mpi4py's lowercase form)."""
        self.Wait(status)
        return None

    def test(self, status: MPI.Status | None = None) -> tuple[bool, None]:
        """``(Test(), None)``: mpi4py's lowercase form (a collective delivers no object)."""
        return self.Test(status), None

    def Cancel(self) -> None:
        """Refused (RuntimeError, always): MPI makes cancelling a collective request erroneous (MPI-4.1
        section 6.12); complete the request with ``Wait()`` instead."""
        raise RuntimeError(f"{self!r}: a collective request cannot be cancelled (MPI makes MPI_Cancel on it "
                           "erroneous); complete it with Wait()")

    def Free(self) -> None:
        """Release the request (RuntimeError if it is active: MPI forbids freeing an active collective
        request)."""
        if self._state == RUNNING or (self._state == COMPLETE and _mpi_bool(self)):
            raise RuntimeError(f"{self!r} is active: complete it with Wait() or Test() before Free()")
        self._state = FREED

    def free(self) -> None:
        """``Free()`` unless freed already (mpi4py's lowercase form)."""
        if self._state != FREED:
            self.Free()

def _error_class(error: BaseException | None) -> int:
    """The error class a collective's status carries: an MPI error keeps its own (a process failure, ...),
    another error is ``MPI.ERR_OTHER``."""
    if error is None:
        return MPI.SUCCESS
    return error.Get_error_class() if isinstance(error, MPI.Exception) else MPI.ERR_OTHER


def _empty(status: MPI.Status | None) -> None:
    """A collective's status is empty (MPI-4 §3.7.3): any source, any tag, no error, 0 elements."""
    if status is not None:
        status.Set_source(MPI.ANY_SOURCE)
        status.Set_tag(MPI.ANY_TAG)
        status.Set_error(MPI.SUCCESS)
        status.Set_elements(MPI.BYTE, 0)


def _progressed(req: _Collective, queue: list[_Collective]) -> bool:
    progress(queue)
    return req._state != RUNNING
