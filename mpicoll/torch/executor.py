"""Where a process group's collectives run: on its own progress thread, or in the caller.

torch hands a backend every collective as an asynchronous call (``async_op``
only decides whether torch waits at once), and DDP issues bucket all-reduces
from autograd hooks while the backward pass goes on.  mpicoll's nonblocking
requests advance only while someone waits on them, so an overlap needs a
thread: :class:`ThreadExecutor` runs the calls of one process group, in order,
on one thread, on a communicator of its own (as torch's MPI backend does).
It needs MPI_THREAD_MULTIPLE, because sends and receives run in the caller's
thread meanwhile.  :class:`InlineExecutor` runs each call in the caller before
returning a completed Work: no hand-over between threads, no overlap.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from .work import CollectiveWork

__all__ = ["InlineExecutor", "ThreadExecutor"]

Job = Callable[[], None]


class InlineExecutor:
    """Run each call in the caller's thread, now."""

    threaded = False

    def submit(self, work: CollectiveWork, job: Job) -> CollectiveWork:
        """Run ``job``; the returned Work is complete (with the exception, if it raised)."""
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - handed to whoever waits, as on a thread
            work.finish(exc)
        else:
            work.finish(None)
        return work

    def shutdown(self) -> None:
        """Nothing to stop."""


class ThreadExecutor:
    """Run calls in order on one daemon thread (started on first use).

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
        self._lock = threading.Lock()

    def submit(self, work: CollectiveWork, job: Job) -> CollectiveWork:
        """Queue ``job``; ``work`` completes when it has run."""
        if self._thread is None:
            self._start()
        self._queue.put((work, job))
        return work

    def _start(self) -> None:
        with self._lock:
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
            try:
                job()
            except BaseException as exc:  # noqa: BLE001 - a failed call fails its Work, not the thread
                work.finish(exc)
            else:
                work.finish(None)

    def shutdown(self) -> None:
        """Let the queued calls finish, then stop the thread."""
        thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()
            self._thread = None
