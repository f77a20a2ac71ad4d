"""The careful path of a collective call: debug agreement, the watchdog, stand-ins, call logging.

``mpicoll.Comm`` takes this path only when a call has a timeout
(``MPICOLL_TIMEOUT=seconds`` or ``mpicoll.Comm(comm, timeout=seconds)``) or
``MPICOLL_DEBUG`` is set (see :mod:`mpicoll.runtime.debug`); the default path never
imports it.  Here a blocking call

1. checks its arguments (``prepare``); with ``MPICOLL_DEBUG`` every rank then
   agrees on the outcome before any message (:func:`mpicoll.runtime.debug.agree`);
   without it, a rank whose checks failed plays its part on scratch memory
   (:mod:`mpicoll.runtime.standin`) and raises;
2. runs its schedule with :func:`mpicoll.runtime.watchdog.execute`: a deadline on
   every wait and every received message's size checked;
3. with ``MPICOLL_DEBUG=2``, logs algorithm, sizes and time.

Nonblocking calls are checked the same way and their requests carry the
timeout into ``Wait`` (:func:`mpicoll.runtime.watchdog.wait`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from mpi4py import MPI

from mpicoll.runtime import debug, nonblocking, standin, watchdog

__all__ = ["active", "env_timeout", "run", "start", "stand_in"]

_ENV = getattr(os.environ, "_data", None)


def env_timeout() -> float | None:
    """``MPICOLL_TIMEOUT`` in seconds, or None when unset, empty or 0."""
    value = os.environ.get("MPICOLL_TIMEOUT", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"MPICOLL_TIMEOUT must be a number of seconds, got {value!r}") from None
    return seconds if seconds > 0 else None


def active(comm: Any) -> bool:
    """Whether calls on ``comm`` take the careful path (a timeout, or ``MPICOLL_DEBUG`` set)."""
    return comm.timeout is not None or debugging()


def debugging() -> bool:
    """Whether ``MPICOLL_DEBUG`` is set (to anything but 0)."""
    value = _ENV.get(b"MPICOLL_DEBUG") if isinstance(_ENV, dict) else os.environ.get("MPICOLL_DEBUG")
    return bool(value) and value not in (b"0", "0")


def _ensure_private(comm: Any, method: str) -> None:
    """Create the private duplicate (a collective) without blocking past the timeout."""
    if "_private" in comm.__dict__ or comm.timeout is None:
        return
    dup, request = MPI.Intracomm.Idup(comm)
    others = [r for r in range(comm.Get_size()) if r != comm.Get_rank()]
    watchdog.wait_mpi(request, f"{method} (creating mpicoll's private communicator)", comm.timeout, others,
                      comm.Get_rank())
    comm.__dict__["_private"] = MPI.Intracomm(dup)


def _checked(comm: Any, method: str, args: tuple, algorithm: str, tag: int, nonblocking_call: bool = False) -> Any:
    """The call's plan: agreed on by every rank (debug), or stood in for on scratch before raising."""
    _ensure_private(comm, method)
    if (algorithm is None or (isinstance(algorithm, str) and algorithm.lower() == "auto")) and comm.Get_size() > 1:
        # before any argument check, so that a rank whose checks fail takes part too
        from mpicoll.selection.choose import agree  # noqa: PLC0415

        agree(comm, comm.timeout)
    if debug.level():
        return debug.agree(comm, method, lambda: comm._prepare(method, *args, algorithm=algorithm), comm.timeout)
    try:
        return comm._prepare(method, *args, algorithm=algorithm)
    except Exception as exc:
        stand_in(comm, method, args, algorithm, exc, tag, nonblocking_call)
        raise


def stand_in(comm: Any, method: str, args: tuple, algorithm: str, error: BaseException, tag: int,
             nonblocking_call: bool = False) -> None:
    """Play this rank's part of a call whose checks failed on scratch memory (see :mod:`mpicoll.runtime.standin`).

    It runs under the watchdog with the communicator's timeout, or
    ``standin.TIMEOUT`` seconds without one: a stand-in that does not match what
    the peers do (their arguments disagree too) gives up instead of hanging.
    """
    timeout = comm.timeout or standin.TIMEOUT

    def run_blocking(plan: Any) -> None:
        _run_plan(comm, method, plan, timeout, tag)

    def run_request(plan: Any) -> None:
        req = nonblocking.start(plan, comm, tag)
        req.watch = (method, timeout, comm.Get_rank())
        req.Wait()

    standin.play(comm, method, args, algorithm, error, comm._prepare,
                 run_request if nonblocking_call else run_blocking)


def _run_plan(comm: Any, method: str, plan: Any, timeout: float | None, tag: int) -> None:
    if nonblocking.outstanding():       # keep outstanding requests moving, as Comm._run_prepared does
        req = nonblocking.start(plan, comm, tag)
        req.watch = (method, timeout, comm.Get_rank()) if timeout is not None else None
        req.Wait()
        return
    if plan is None:
        return
    watchdog.execute(plan.rounds(), comm.private, tag, method, timeout)
    if plan.finish is not None:
        plan.finish()


def run(comm: Any, method: str, args: tuple, algorithm: str, tag: int) -> None:
    """A blocking collective on the careful path (``tag``: the call's, drawn by ``Comm``)."""
    t0 = time.perf_counter()
    plan = _checked(comm, method, args, algorithm, tag)
    _run_plan(comm, method, plan, comm.timeout, tag)
    if debug.level() >= 2:
        debug.log(comm, plan, method, time.perf_counter() - t0)


def start(comm: Any, method: str, args: tuple, algorithm: str, tag: int) -> Any:
    """A nonblocking collective on the careful path: its request carries the timeout into ``Wait``."""
    plan = _checked(comm, method, args, algorithm, tag, nonblocking_call=True)
    req = nonblocking.start(plan, comm, tag)
    if comm.timeout is not None:
        req.watch = (method, comm.timeout, comm.Get_rank())
    if debug.level() >= 2:
        debug.log(comm, plan, "I" + method[0].lower() + method[1:] + " (started)", 0.0)
    return req
