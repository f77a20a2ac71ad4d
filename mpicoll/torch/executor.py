"""Where a process group's collectives run: on its own progress thread, or in the caller.

torch tells a backend whether the caller waits at once (``opts.asyncOp``
False: a blocking ``dist.all_reduce``) or goes on (``async_op=True``; DDP's
bucket all-reduces, issued from autograd hooks while the backward pass goes
on).  mpicoll's nonblocking requests advance only while someone waits on
them, so an overlap needs a thread: :class:`ThreadExecutor` runs the
asynchronous calls of one process group, in order, on one thread (as torch's
MPI backend does).  A blocking call gains nothing from the thread and would
pay two thread wake-ups (about 20 us on an idle machine, milliseconds on a
loaded one), so it runs in the caller, once the calls queued before it are
done: the order of calls on the communicator stays the program's order.
Sends and receives run in the caller meanwhile, which needs
MPI_THREAD_MULTIPLE.  :class:`InlineExecutor` runs every call in the caller:
no thread at all, no overlap.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from .work import CollectiveWork

__all__ = ["InlineExecutor", "ThreadExecutor"]

Job = Callable[[], None]


def _run(work: CollectiveWork, job: Job) -> None:
    """Run ``job`` and complete ``work`` with its outcome (an exception goes to whoever waits)."""
    try:
        job()
    except BaseException as exc:  # noqa: BLE001 - a failed call fails its Work, not the thread
        work.finish(exc)
    else:
        work.finish(None)


class InlineExecutor:
    """Run each call in the caller's thread, now."""

    threaded = False

    def submit(self, work: CollectiveWork, job: Job, blocking: bool = False) -> CollectiveWork:
        """Run ``job``; the returned Work is complete (with the exception, if it raised)."""
        _run(work, job)
        return work

    def shutdown(self) -> None:
        """Nothing to stop."""


class ThreadExecutor:
    """Run asynchronous calls in order on one daemon thread (started on first use), blocking ones in the caller.

    Parameters
    ----------
    name : str
        The thread's name (shows in stack dumps).
    """

    threaded = True

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._comm = threading.Lock()  # one thread at a time on the group's communicator
        self._drained = threading.Condition()
        self._pending = 0  # calls queued and not yet finished

    def submit(self, work: CollectiveWork, job: Job, blocking: bool = False) -> CollectiveWork:
        """Queue ``job`` (``work`` completes when it has run), or run it here if ``blocking``."""
        if blocking:
            self._run_here(work, job)
            return work
        if self._thread is None:
            self._start()
        with self._drained:
            self._pending += 1
        self._queue.put((work, job))
        return work

    def _run_here(self, work: CollectiveWork, job: Job) -> None:
        with self._drained:  # the calls queued before this one come first
            while self._pending:
                self._drained.wait()
        with self._comm:
            _run(work, job)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                thread.start()
                self._thread = thread

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, job = item
            with self._comm:
                _run(work, job)
            with self._drained:
                self._pending -= 1
                if not self._pending:
                    self._drained.notify_all()

    def shutdown(self) -> None:
        """Let the queued calls finish, then stop the thread."""
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()
            self._thread = None
