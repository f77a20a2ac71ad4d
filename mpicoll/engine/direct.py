"""MPI called from C: a plan's messages bound to addresses once and posted with the MPI library's own functions.

The blocking executor (:func:`mpicoll.engine.blocking.execute`) and the request engine
(:mod:`mpicoll.engine.nonblocking`) call MPI through mpi4py's methods, which parse their arguments and export
a buffer for every message.  Where the optional extension ``mpicoll.engine._direct`` is built, a plan run many
times instead binds its messages once, as ``(address, bytes, peer)``, and C posts them with ``MPI_Sendrecv``,
``MPI_Isend``, ``MPI_Startall``... found in the MPI library mpi4py has loaded (nothing is linked when mpicoll is
built).  It is used where all of these hold, and the mpi4py paths everywhere else:

- the extension is built and ``MPICOLL_NO_EXTENSIONS`` is not set;
- the running MPI is Open MPI or MPICH with the handle and status sizes the extension was written for
  (:func:`available` says why not);
- the job does not run with MPI's fault-tolerance extension (there mpicoll completes a round's requests one at
  a time: :data:`mpicoll.engine.rounds.waitall`);
- every message of the plan is host memory of fewer than 2^31 bytes.

``python -m mpicoll --version`` says whether it is in use.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import config
from mpicoll.compiled import extension
from mpicoll.engine import flags
from mpicoll.engine.standin import continue_marked

__all__ = ["MODULE", "available", "messages", "blocking", "persistent", "generalized", "fast_requests",
           "hook_progress", "hook_age", "unhook_progress"]

#: the family's sizes of MPI_Request and MPI_Status, and its MPI_STATUS_IGNORE, that the extension was written for
_FAMILIES = {"Open MPI": ("openmpi", 8, 24, 0), "MPICH": ("mpich", 4, 20, 1)}
_INT_MAX = 2**31 - 1


def _library(name: str = "libmpi.so") -> str | None:
    """The path of the library ``name`` this process has loaded (Linux: from ``/proc/self/maps``)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if path.rsplit("/", 1)[-1].startswith(name):
                    return path
    except OSError:
        pass
    return None


def _status_layout() -> tuple[int, int, int]:
    """Where ``MPI_Status`` keeps ``MPI_SOURCE``, ``MPI_TAG`` and ``MPI_ERROR``: found by setting them."""
    status = MPI.Status()
    status.Set_source(0x5A5A01)
    status.Set_tag(0x5A5A02)
    status.Set_error(0x5A5A03)
    raw = ctypes.string_at(MPI._addressof(status), MPI._sizeof(MPI.Status))
    return tuple(raw.index(value.to_bytes(4, "little")) for value in (0x5A5A01, 0x5A5A02, 0x5A5A03))  # type: ignore


def _load() -> tuple[Any, str]:
    """The initialised extension, or None and why not."""
    if config.fault_tolerant():
        return None, "the job runs with MPI's fault-tolerance extension (a round's requests complete one at a time)"
    module = extension("_direct")
    if module is None:
        return None, "mpicoll.engine._direct is not built, or MPICOLL_NO_EXTENSIONS is set"
    vendor = MPI.get_vendor()[0]
    if vendor not in _FAMILIES:
        return None, f"the running MPI is {vendor}: the extension calls Open MPI and MPICH only"
    family, request_size, status_size, ignore = _FAMILIES[vendor]
    if (MPI._sizeof(MPI.Request), MPI._sizeof(MPI.Status)) != (request_size, status_size):
        return None, f"{vendor}'s handles or status have other sizes than the extension was written for"
    path = _library()
    if path is None:
        return None, "the MPI library's path is not known (/proc/self/maps)"
    source_at, tag_at, error_at = _status_layout()
    try:
        module.init(path, family, (MPI._handleof(MPI.BYTE), MPI._handleof(MPI.REQUEST_NULL), ignore, MPI.ERR_OTHER,
                                   MPI.ERR_IN_STATUS, MPI.ANY_SOURCE, MPI.ANY_TAG, status_size, source_at, tag_at,
                                   error_at),
                    MPI.Exception, MPI.Request.fromhandle)
    except ImportError as exc:
        return None, str(exc)
    module.on_failure(continue_marked)
    module.on_mismatch(flags.FLAGGED, flags.check)
    return module, f"in use ({family}, {path})"


MODULE, _WHY = _load()


def available() -> tuple[bool, str]:
    """Whether the direct path is in use, and what says so (or why it is not)."""
    return MODULE is not None, _WHY


def messages(rounds: list) -> list | None:
    """Each round's messages as ``(receives, sends)`` of ``(address, bytes, peer)``, from bound rounds (NumPy
    views, or the :func:`mpicoll.engine.blocking.for_mpi` form); None where a message is not a plain host one
    (a GPU array, a message of 2^31 bytes or more)."""
    out = []
    for sends, recvs, _ in rounds:
        pair = []
        for side in (recvs, sends):
            bound = []
            for spec, peer in side:
                if type(spec) is np.ndarray and spec.flags.c_contiguous:
                    buffer = MPI.buffer(spec)
                elif type(spec) is list and len(spec) == 2 and spec[1] is MPI.BYTE:
                    buffer = spec[0]
                else:
                    return None
                if buffer.nbytes > _INT_MAX:
                    return None
                bound.append((buffer.address, buffer.nbytes, peer))
            pair.append(bound)
        out.append(tuple(pair))
    return out


def blocking(rounds: list, comm: MPI.Comm, offset: int = 0) -> Any:
    """``run(tag)`` running ``rounds`` (the :func:`~mpicoll.engine.blocking.for_mpi` form) blocking on ``comm``
    from C, or None where the direct path does not apply; its messages carry ``tag + offset`` (a plan's
    signature: see :mod:`mpicoll.engine.mismatch`), as do those a request posts with ``start(tag)``."""
    if MODULE is None:
        return None
    bound = messages(rounds)
    return None if bound is None else MODULE.Rounds(rounds, comm, bound, keep=rounds, offset=offset)


def persistent(rounds: list, comm: MPI.Comm, requests: list[list[MPI.Prequest]]) -> Any:
    """The C side of a persistent request: bound ``rounds`` whose
    messages are ``requests`` (MPI persistent requests, each round's receives first), started and completed from
    C (``start()``, ``advance(block)``); None where the direct path does not apply."""
    if MODULE is None:
        return None
    bound = messages(rounds)
    if bound is None:
        return None
    handles = [[MPI._handleof(request) for request in round_requests] for round_requests in requests]
    return MODULE.Rounds(rounds, comm, bound, handles, keep=(rounds, requests))


def generalized(request: MPI.Request) -> Any:
    """The generalized request behind ``request``'s MPI handle, started (``start()``) and completed
    (``complete(error_class)``) from C; None where the direct path does not apply."""
    return None if MODULE is None else MODULE.Generalized(MPI._addressof(request))


def fast_requests(persistent: type, nonblocking: type, queue: list, wake: list, empty: Any, traced: type,
                  recorder: type) -> Any:
    """Give the request classes the C forms of their methods, and return ``restart``; None (and the classes
    unchanged) where the direct path does not apply.

    ``persistent.Start`` and both classes' ``Wait`` become method descriptors that run the common case from C
    and hand every other case to the Python method they replace (see ``mpicoll/engine/_requests.c``).
    ``restart(request, tag, keep, seq, recorder)`` starts a ``nonblocking`` request that ran before again, as
    if new (True), or returns False where Python must make a new one.  ``queue``: the main thread's requests;
    ``wake``: what a start calls; ``empty(status)``: a collective's status; ``traced`` and ``recorder``: the
    flight recorder's classes, whose notes C writes as they do.
    """
    if MODULE is None:
        return None
    MODULE.init_requests(persistent, nonblocking, queue, wake, empty, traced, recorder,
                         threading.main_thread().ident, persistent.Start, nonblocking.Wait)
    for cls in (nonblocking, persistent):
        start, cls.Wait = MODULE.methods(cls)
    persistent.Start = start
    return MODULE.restart


def hook_progress(active: list, elsewhere: list, advance: Any) -> bool:
    """Have the MPI library's own progress loop call ``advance()`` while ``active`` or ``elsewhere`` (the
    outstanding requests) is not empty, so that a thread blocked in any MPI call moves mpicoll's requests along;
    whether it could (Open MPI: its ``opal_progress_register``; MPICH: the poll function of the generalized
    request behind every mpicoll request, ``MPIX_Grequest_start``, so only MPI's waits on those)."""
    if MODULE is None:
        return False
    if MPI.get_vendor()[0] != "Open MPI":
        return MODULE.hook_progress(None, active, elsewhere, advance)
    path = _library("libopen-pal.so")
    return path is not None and MODULE.hook_progress(path, active, elsewhere, advance)


def hook_age() -> float:
    """Seconds since the MPI library's progress loop (:func:`hook_progress`) last advanced mpicoll's requests: a
    thread blocked in MPI does so while it waits; ``inf`` where it never did, or is not hooked."""
    return MODULE.hook_age() if MODULE is not None else float("inf")


def unhook_progress() -> None:
    """Undo :func:`hook_progress` (at exit: before MPI and Python finish)."""
    if MODULE is not None:
        MODULE.unhook_progress()
