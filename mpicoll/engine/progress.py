"""The progress thread: outstanding mpicoll requests advance while the program does something else.

MPI's own nonblocking collectives complete while the program is inside any
MPI call (an ``MPI.Comm.Recv``, ``MPI.Request.Waitall``) or computing, as far as
the library progresses them.  mpicoll's requests are Python state machines
(:mod:`mpicoll.engine.nonblocking`): between their rounds someone must run the
round's local steps and post the next round's messages.  Without this thread
that someone is only the caller's next mpicoll call; a legal program such as

    rank 0: r = comm.Iallreduce(...); world.Recv(x, source=2); r.Wait()
    rank 2: r = comm.Iallreduce(...); r.Wait(); world.Send(x, dest=0)

would hang (rank 0 never advances its request inside ``Recv``).

One thread per process, started by the first request (when ``MPICOLL_PROGRESS``
is not 0 and MPI runs at ``MPI_THREAD_MULTIPLE``; otherwise a warning says why
it is not):

- while no request is outstanding it sleeps on an event: the blocking hot path
  pays nothing (a request's start wakes it, a few dozen ns when it is awake);
- while requests are outstanding it polls: every request whose queue no thread
  is driving (its guard is free; see :func:`~mpicoll.engine.inflight.advance_unowned`)
  is tested and advanced, then the thread sleeps, from :data:`POLL_MIN` up to
  :data:`POLL_MAX` seconds, doubling while nothing moves.  A thread blocked in an
  mpicoll ``Wait`` holds its queue's guard and drives it itself, in MPI's
  blocking waits, so the thread only acts where no one else does;
- while a thread blocked in MPI advances the requests (MPI's progress loop runs mpicoll's hook:
  :func:`~mpicoll.engine.direct.hook_progress`), the thread keeps off: where the hook has advanced them since
  its last poll it does not poll, and backs off as when nothing moves, so that it does not compete with that
  thread for the interpreter and the cores (a waited ``Iallreduce`` took 1.5-1.8 times as long with it
  polling beside MPI's loop);
- it lingers :data:`LINGER` seconds after the last request finishes before it
  sleeps again, so that a loop of short requests does not wake it every time.

It never blocks inside MPI on mpicoll's messages: a blocking wait there could not
be interrupted when the caller wants the engine back (MPI has no timed wait), so
it tests.  The price is latency up to :data:`POLL_MAX` per round for a request
that only the thread advances.

At exit, requests still outstanding get :data:`EXIT_GRACE` seconds to complete
(their peers may still be completing them); those that do not are reported on
stderr, and the process ends (a request abandoned while its peers wait is the
program's error, as it would be with MPI's own collectives).
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import warnings

from mpi4py import MPI

from mpicoll import config
from mpicoll.engine import direct, inflight, nonblocking

__all__ = ["enabled", "running", "pause", "resume", "POLL_MIN", "POLL_MAX", "LINGER", "EXIT_GRACE"]

POLL_MIN = 100e-6    # seconds between polls right after something moved
POLL_MAX = 1e-3      # ... at most, while nothing moves
LINGER = 0.01        # seconds the thread keeps polling after the last request finished
EXIT_GRACE = 2.0     # seconds outstanding requests get to complete at exit

_LEVELS = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE", MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
           MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED", MPI.THREAD_MULTIPLE: "MPI_THREAD_MULTIPLE"}


class _Thread:
    """The process's progress thread and the event it sleeps on."""

    def __init__(self) -> None:
        self.wakeup = threading.Event()
        self.asleep = False
        self.stopping = False
        self.paused = False
        self.thread = threading.Thread(target=self.run, name="mpicoll-progress", daemon=True)

    def wake(self) -> None:
        """A request started: make sure the thread polls (what a start calls while the thread sleeps)."""
        if self.asleep and not self.paused:
            self.wakeup.set()

    def run(self) -> None:
        delay, last_seen = POLL_MIN, time.monotonic()
        while not self.stopping:
            if self.paused:
                self.sleep()
                continue
            requests = inflight.requests_outstanding()
            if requests:
                last_seen = time.monotonic()
                if direct.hook_age() >= delay and inflight.advance_unowned(requests):
                    delay = POLL_MIN
                else:   # nothing moved, or a thread blocked in MPI advances them (its progress hook): back off
                    delay = min(2 * delay, POLL_MAX)
                requests = None     # (not held while asleep: a request the program dropped may be started again)
            elif time.monotonic() - last_seen > LINGER:
                self.sleep()
                delay, last_seen = POLL_MIN, time.monotonic()
                continue
            time.sleep(delay)

    def sleep(self) -> None:
        """Sleep until a request starts (the flag and the wake-up first, then the check: a start in between is
        seen).  Only while it sleeps do starts call :meth:`wake` (it is in ``nonblocking._WAKE`` then)."""
        self.wakeup.clear()
        self.asleep = True
        nonblocking._WAKE.append(self.wake)
        if (self.paused or not inflight.requests_outstanding()) and not self.stopping:
            self.wakeup.wait()
        nonblocking._WAKE.remove(self.wake)
        self.asleep = False

    def stop(self) -> None:
        self.stopping = True
        self.wakeup.set()
        self.thread.join(timeout=5.0)


_STATE: dict[str, _Thread | None] = {"thread": None}


def enabled() -> bool:
    """Whether the progress thread may run: ``MPICOLL_PROGRESS`` is not 0, and MPI runs at MPI_THREAD_MULTIPLE."""
    if not config.current().progress:
        return False
    level = MPI.Query_thread()
    if level < MPI.THREAD_MULTIPLE:
        warnings.warn(f"mpicoll: MPI was initialised at {_LEVELS.get(level, level)}; the progress thread needs "
                      "MPI_THREAD_MULTIPLE, so mpicoll's requests advance only inside mpicoll's calls and, where "
                      "mpicoll hooks the MPI library's progress loop, inside MPI's own waits (else mpi4py's "
                      "MPI.Request.Waitall on them waits forever); set MPICOLL_PROGRESS=0 to say this is intended",
                      RuntimeWarning, stacklevel=4)
        return False
    return True


def running() -> bool:
    """Whether the progress thread has been started in this process."""
    return _STATE["thread"] is not None


def first_request() -> None:
    """What the first request's start calls: hook the MPI library's progress loop (thread or no thread: it runs
    in whichever thread waits inside MPI), and start the thread (or not)."""
    nonblocking._WAKE.clear()     # (the thread puts its wake-up there while it sleeps)
    direct.hook_progress(inflight.ACTIVE, inflight.ELSEWHERE, inflight.advance_waiting)
    if _STATE["thread"] is None and enabled():
        progress = _STATE["thread"] = _Thread()
        progress.thread.start()


def pause() -> None:
    """Stop advancing requests from the progress thread until :func:`resume` (for measuring what it brings:
    ``mpicoll.bench.overlap``); the thread sleeps, requests advance inside mpicoll's calls only."""
    progress = _STATE["thread"]
    if progress is not None:
        progress.paused = True
        while not progress.asleep:      # it finishes the poll it is in (a few microseconds)
            time.sleep(POLL_MIN)


def resume() -> None:
    """Undo :func:`pause`."""
    progress = _STATE["thread"]
    if progress is not None:
        progress.paused = False
        progress.wakeup.set()


def _at_exit() -> None:
    """Give outstanding requests a grace period, stop the thread, and report what never completed."""
    if MPI.Is_finalized():
        direct.unhook_progress()
        return
    progress = _STATE["thread"]
    deadline = time.monotonic() + EXIT_GRACE
    while inflight.requests_outstanding() and time.monotonic() < deadline:
        if progress is None:        # no thread: drive the requests from here
            inflight.advance_unowned(inflight.requests_outstanding())
        time.sleep(POLL_MAX)
    direct.unhook_progress()
    if progress is not None:
        progress.stop()
        _STATE["thread"] = None
    left = inflight.requests_outstanding()
    if left:
        print(f"mpicoll: rank {MPI.COMM_WORLD.Get_rank()} exits with {len(left)} collective request(s) never "
              f"completed ({', '.join(map(repr, left[:4]))}{', ...' if len(left) > 4 else ''}): their peers may "
              "be left waiting", file=sys.stderr, flush=True)


atexit.register(_at_exit)
