"""Requests in flight: each thread's started, unfinished mpicoll requests (its queue), advanced together.

Every ``Test`` or ``Wait`` on *any* mpicoll request of a thread moves *every* started request of that thread
(its *queue*): rank 0 may wait on request B while rank 1 waits on request A, and if a Wait moved only its own
request both would hang.  Each thread has its own queue, so threads that call collectives on their own
communicators never run each other's steps; a request waited on by another thread still advances with the
requests of the thread that made it.  Each queue has a lock (its *guard*): whoever advances its requests
holds it, so the messages of one request are only ever tested or waited for by one thread at a time, as MPI
requires; the progress thread (:mod:`mpicoll.engine.progress`) only takes a guard that is free
(:func:`advance_unowned`).

The requests themselves are :class:`mpicoll.engine.nonblocking._Collective` objects; what the functions here
use of them is their state (:data:`RUNNING`...), round, guard, ``_advance(block)``, and ``_waitable()`` (their
current round's MPI requests).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mpi4py import MPI

from mpicoll.engine import direct

__all__ = ["ACTIVE", "ELSEWHERE", "INACTIVE", "RUNNING", "COMPLETE", "FREED", "queue_of_this_thread", "guard",
           "new_guard", "outstanding", "requests_outstanding", "progress", "poke", "advance_unowned",
           "advance_waiting", "wait_until", "block_once"]

#: a request's states
INACTIVE, RUNNING, COMPLETE, FREED = 0, 1, 2, 3

#: the started, unfinished mpicoll requests of the main thread (its queue), and those of every other thread:
#: the blocking hot path (mpicoll.comm.dispatch) reads both without a call, and takes the slow path while either
#: is not empty; the progress thread advances both
ACTIVE: list[Any] = []
ELSEWHERE: list[Any] = []
_THREAD = threading.local()   # .queue: this thread's started, unfinished requests; .guard: its lock
#: a queue's guard: where the compiled engine runs requests, its lock (``Guard``, used as a ``threading.Lock``),
#: which its Wait and the progress hook take and give back without calling Python
new_guard: Callable[[], Any] = direct.MODULE.Guard if direct.MODULE is not None else threading.Lock
_MAIN_GUARD = new_guard()
_waitany = MPI.Request.Waitany


def queue_of_this_thread() -> tuple[list[Any], Any]:
    """This thread's started, unfinished requests, and its guard (see the module's text)."""
    queue = getattr(_THREAD, "queue", None)
    if queue is None:   # the main thread's is ACTIVE: a program without threads keeps one list
        main = threading.current_thread() is threading.main_thread()
        queue = _THREAD.queue = ACTIVE if main else []
        _THREAD.guard = _MAIN_GUARD if main else new_guard()
    return queue, _THREAD.guard


def guard() -> Any:
    """This thread's queue's lock."""
    return queue_of_this_thread()[1]


def outstanding() -> bool:
    """Whether any mpicoll request started by this thread is not finished."""
    return bool(queue_of_this_thread()[0])


def requests_outstanding() -> list[Any]:
    """Every thread's started, unfinished requests (a snapshot)."""
    return ACTIVE + ELSEWHERE


def progress(queue: list[Any] | None = None) -> None:
    """Move every outstanding request of ``queue`` (this thread's) as far as its messages allow, without blocking.

    The caller holds the queue's guard: the progress thread advances any queue whose guard is free
    (:func:`advance_unowned`), and two threads testing one request's messages corrupt the MPI library's state.
    Without it, call :func:`poke`.
    """
    for req in list(queue_of_this_thread()[0] if queue is None else queue):
        if req._state == RUNNING:
            req._advance(False)


def poke() -> None:
    """Advance this thread's requests unless some thread is driving them already (its guard is taken)."""
    lock = guard()
    if lock.acquire(blocking=False):
        try:
            progress()
        finally:
            lock.release()


def advance_unowned(requests: Iterable[Any]) -> bool:
    """Advance each of ``requests`` whose queue no one is driving now (its guard is free); True if any moved.

    What the progress thread runs: it never waits for a guard, so a thread that
    blocks in ``Wait`` keeps its queue to itself.
    """
    moved = False
    for req in requests:
        lock = getattr(req, "_guard", None)
        if lock is None:   # (a test's stand-in that makes the hot path take its slow path)
            continue
        if not lock.acquire(blocking=False):
            continue
        try:
            if req._state == RUNNING:
                before = req._round
                req._advance(False)      # (an error of its messages or steps ends the request: see _fail)
                moved = moved or req._state != RUNNING or req._round != before
        finally:
            lock.release()
    return moved


def advance_waiting() -> None:
    """Every outstanding request that no thread is driving, moved along: what the MPI library's progress loop
    calls where mpicoll could hook it (:func:`mpicoll.engine.direct.hook_progress`)."""
    advance_unowned(ACTIVE + ELSEWHERE)


def wait_until(done: Callable[[], bool], queue: list[Any]) -> None:
    """Progress ``queue`` until ``done()``, sleeping inside MPI (Waitany) rather than polling in Python; the
    caller holds the queue's guard."""
    progress(queue)
    while not done():
        block_once((), queue=queue)
        progress(queue)


def block_once(extra: Sequence[MPI.Request], status: MPI.Status | None = None,
                queue: list[Any] | None = None) -> int | None:
    """Block until one message of some outstanding request, or one of ``extra``, completes.

    The caller holds the queue's guard.  Returns the index in ``extra`` of the
    request that completed (MPI has then completed it, as ``Waitany`` does,
    filling ``status``), or None.
    """
    internal: list[MPI.Request] = []
    owners: list[Any] = []
    for req in queue_of_this_thread()[0] if queue is None else queue:
        waitable = req._waitable()
        internal += waitable
        owners += [req] * len(waitable)
    if not internal and not any(extra):
        return None
    handles = [request.handle for request in internal]
    i = _waitany(internal + list(extra), status)
    if i == MPI.UNDEFINED:
        return None
    if i < len(internal):
        if owners[i]._direct is not None:    # MPI freed a request C posted: C forgets it
            owners[i]._direct.drop(handles[i])
        return None
    return i - len(internal)
