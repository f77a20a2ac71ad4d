"""The flight recorder: each communicator's last calls, written to a file when something goes wrong.

Every communicator's state (:class:`mpicoll.program.state.CommState`) owns a :class:`Recorder` (None when
``MPICOLL_TRACE_CALLS=0``) with two rings of *slots*, each slot a list ``[kind, seq, what, start, end,
outcome]``:

- ``calls``: the blocking calls, call ``seq`` (its tag's number in the blocking sequence, the same on every
  rank of a correct program) in slot ``seq % n``.  The hot path (:func:`mpicoll.comm.dispatch.run_blocking`,
  compiled in ``mpicoll/program/_callrun.c``) writes ``seq``, ``what`` and the start time before the call
  and the end time after it: :func:`begin` and :func:`end` are the definitions of what it writes.  ``what``
  is the cached plan's :class:`~mpicoll.engine.mismatch.CallNote` (its collective, algorithm, bytes and
  signature: :meth:`mpicoll.program.plan.Plan.what`); a call
  the cache does not hold starts as its method's name, named once its plan is known (:func:`named`);
- ``requests``: the nonblocking and persistent calls, one slot per start, in turn (:class:`Traced`).

The round a call reached and the peers it waited for are written only when it fails (:func:`failed`: the
error says them) or when a record is written while a request is running (its current round).
With ``MPICOLL_TRACE=DIR`` every rank writes all its communicators' records to ``DIR/rank-R.json``
(:func:`dump`) when a call times out, meets a failed process or a message of the wrong size, or raises
:class:`~mpicoll.MismatchError`, on ``SIGUSR1``, and at exit when requests are outstanding or nothing was
written yet.
``python -m mpicoll doctor DIR`` (:mod:`mpicoll.tools.doctor`) reads them.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import threading
import time
import weakref
from collections import deque
from typing import Any

from mpi4py import MPI

from mpicoll import config
from mpicoll.engine.inflight import requests_outstanding
from mpicoll.engine.watchdog import MessageSizeError
from mpicoll.errors import MismatchError, MPIError

__all__ = ["Recorder", "Traced", "Called", "Noted", "begin", "end", "named", "failed", "dump", "KINDS"]

#: the kinds of call, as the records name them
KINDS = ("blocking", "nonblocking", "persistent")
#: the errors that make a rank write its record: a timeout, a message of the wrong size, MPI's errors (a failed
#: process: :class:`~mpicoll.ProcFailedError`) and mismatched calls, but not mpicoll's argument errors
_WRITE_ON = (TimeoutError, MessageSizeError, MPI.Exception)
_LIVE: weakref.WeakSet[Recorder] = weakref.WeakSet()   # every live communicator's recorder, for dump
#: the newest recorders made, kept past their communicators (a program's communicators are often gone, freed
#: or collected, by the time it exits and writes its record)
_RECENT: deque[Recorder] = deque(maxlen=32)
_MADE: dict[tuple[int, ...], int] = {}   # how many communicators of these world ranks this process made
_WRITTEN = [0]                           # records this process wrote


class Recorder:
    """One communicator's flight record: its last ``n`` blocking calls and its last ``n`` request starts.

    ``members``: the communicator's ranks in ``MPI.COMM_WORLD`` (its own ranks where it has none there), and
    ``ordinal``: how many communicators of the same members this process made before it; the same on every
    member, so that the doctor knows the ranks' records of one communicator for one.
    """

    __slots__ = ("calls", "requests", "next_request", "members", "ordinal", "rank", "groups", "__weakref__")

    def __init__(self, comm: MPI.Comm, n: int) -> None:
        self.calls = [[0, 0, None, 0.0, None, None] for _ in range(n)]
        self.requests = [[1, 0, None, 0.0, None, None] for _ in range(n)]
        self.next_request = 0      # the request starts so far (the next one's slot: this modulo n)
        #: an intercommunicator's record (its calls noted in its merged private communicator's recorder: their
        #: tags are drawn there): the sizes of its two groups, in the merged communicator's rank order
        self.groups: tuple[int, int] | None = None
        self.rank = comm.Get_rank()
        self.members = _world_ranks(comm)
        self.ordinal = _MADE[self.members] = _MADE.get(self.members, -1) + 1
        _LIVE.add(self)
        _RECENT.append(self)
        _install()

    def slots(self) -> list[dict]:
        """The recorded calls, oldest first, as the record file has them."""
        used = [slot for slot in self.calls + self.requests if slot[2] is not None]
        return [_entry(slot) for slot in sorted(used, key=lambda slot: slot[3])]


def _world_ranks(comm: MPI.Comm) -> tuple[int, ...]:
    size = comm.Get_size()
    try:
        group, world = comm.Get_group(), MPI.COMM_WORLD.Get_group()
        ranks = MPI.Group.Translate_ranks(group, list(range(size)), world)
        group.Free()
        world.Free()
    except MPI.Exception:
        return tuple(range(size))
    return tuple(ranks) if MPI.UNDEFINED not in ranks else tuple(range(size))


def make(comm: MPI.Comm) -> Recorder | None:
    """The recorder of a new communicator (``comm``: its private duplicate), or None where none is kept."""
    n = config.current().trace_calls
    return Recorder(comm, n) if n else None


# -- what a call writes ------------------------------------------------------------------------------------

def begin(recorder: Recorder, seq: int, what: Any) -> list:
    """Blocking call ``seq`` starts (``what``: its plan's, or its method's name): its slot, written."""
    slot = recorder.calls[seq % len(recorder.calls)]
    slot[1], slot[2], slot[3], slot[4], slot[5] = seq, what, time.time(), None, None
    return slot


def end(slot: list) -> None:
    """The call of ``slot`` returned."""
    slot[4] = time.time()


class Called:
    """What a call without a plan (an intercommunicator's stages) is noted as: ``what()``, as a plan's
    (:meth:`mpicoll.program.plan.Plan.what`), for :func:`named` and :class:`Traced`: ``noted``, its collective,
    algorithm and bytes (a :class:`~mpicoll.engine.mismatch.CallNote` where the mismatch check compares it)."""

    __slots__ = ("noted",)

    def __init__(self, noted: tuple) -> None:
        self.noted = noted

    def what(self) -> tuple:
        return self.noted


class Noted:
    """A blocking call that draws its number outside the hot path (an intercommunicator's object collectives
    and reproducible sums), noted as the hot path notes the others: a context around the whole call, whose
    entry writes slot ``seq`` (:func:`begin`) and whose exit notes the end (:func:`end`) or the failure
    (:func:`failed`).

    Parameters
    ----------
    recorder : Recorder or None
        The communicator's recorder (None: nothing is noted).
    seq : int
        The call's number in the blocking sequence (its tag's).
    what : tuple of (str, str, int)
        Its collective, algorithm and bytes, as :meth:`Called.what` gives them.
    """

    __slots__ = ("slot",)

    def __init__(self, recorder: Recorder | None, seq: int, what: tuple[str, str, int]) -> None:
        self.slot = begin(recorder, seq, what) if recorder is not None else None

    def __enter__(self) -> Noted:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: Any) -> None:
        if self.slot is not None:
            if exc is None:
                end(self.slot)
            else:
                failed(self.slot, exc)


def named(recorder: Recorder | None, seq: int, plan: Any) -> None:
    """Blocking call ``seq`` (not a cached one) has its ``plan`` (or :class:`Called`): name its algorithm and
    size."""
    if recorder is not None and plan is not None:
        slot = recorder.calls[seq % len(recorder.calls)]
        if slot[1] == seq:
            slot[2] = plan.what()


def failed(slot: list, exc: BaseException, rnd: int = -1) -> None:
    """The call of ``slot`` raised ``exc`` in round ``rnd`` (or the round the error says): noted, and the
    record written if ``MPICOLL_TRACE`` asks and the error is a timeout, a failed process or MPI's."""
    slot[4] = time.time()
    rnd = getattr(exc, "round", rnd)
    peers = getattr(exc, "peers", None)
    peer = getattr(exc, "peer", None)
    slot[5] = {"error": type(exc).__name__, "message": str(exc)[:400], "round": rnd if rnd is not None else -1,
               "peers": list(peers) if peers is not None else ([peer] if peer is not None else []),
               "failed": list(getattr(exc, "failed", []))}
    if (isinstance(exc, _WRITE_ON) and (not isinstance(exc, MPIError) or isinstance(exc, MismatchError))
            and config.current().trace):
        dump(type(exc).__name__)


_now = time.time


class Traced:
    """What a request writes in its communicator's recorder: a slot of ``requests`` at each start
    (:meth:`started`), its end or error at completion (:meth:`ended`)."""

    __slots__ = ("recorder", "kind", "seq", "what", "starts", "slot")

    def __init__(self, recorder: Recorder, kind: int, seq: int, plan: Any) -> None:
        self.recorder, self.kind, self.seq, self.starts, self.slot = recorder, kind, seq, 0, None
        self.what = (plan.what() if plan is not None else None) or ("?", "", 0)

    def started(self, request: Any) -> None:
        """A start: the next slot of ``requests``, written (a persistent request's start ``k`` is numbered
        ``(seq, k)``, written ``seq.k`` in the record); running, it names the request (its round)."""
        recorder = self.recorder
        i, slots = recorder.next_request, recorder.requests
        recorder.next_request = i + 1
        self.starts += 1
        slot = self.slot = slots[i % len(slots)]
        slot[:] = (self.kind, self.seq if self.kind == 1 else (self.seq, self.starts), self.what, _now(), None,
                   request)

    def ended(self, error: BaseException | None, rnd: int) -> None:
        slot, self.slot = self.slot, None
        if slot is None:
            return
        if error is None:
            slot[4], slot[5] = _now(), None
        else:
            failed(slot, error, rnd)


def _entry(slot: list) -> dict:
    kind, seq, what, start, finish, outcome = slot
    collective, algorithm, nbytes = what[:3] if isinstance(what, tuple) else (str(what).lower(), "", -1)
    if type(seq) is tuple:               # a persistent request's start: seq.k
        seq = f"{seq[0]}.{seq[1]}"
    entry = {"kind": KINDS[kind], "seq": seq, "collective": collective, "algorithm": algorithm, "bytes": nbytes,
             "start": start, "end": finish}
    if isinstance(what, tuple) and len(what) > 3:      # a plan's (mpicoll.engine.mismatch.CallNote)
        entry["signature"] = what[3]
    if type(outcome) is dict:
        entry.update(outcome)
    elif outcome is not None:            # a request still running: the round it is in
        entry["round"] = getattr(outcome, "_round", -1)
    return entry


# -- writing the record ------------------------------------------------------------------------------------

_DUMPING = threading.RLock()

def dump(reason: str) -> str | None:
    """Write this rank's record of every live communicator to ``MPICOLL_TRACE/rank-R.json``; its path."""
    folder = config.current().trace
    if not folder:
        return None
    rank = MPI.COMM_WORLD.Get_rank() if MPI.Is_initialized() and not MPI.Is_finalized() else _RANK[0]
    comms = [{"members": list(r.members), "ordinal": r.ordinal, "rank": r.rank, "calls": r.slots(),
              **({"groups": list(r.groups)} if r.groups else {})}
             for r in sorted(set(_LIVE) | set(_RECENT), key=lambda r: (r.members, r.ordinal))]
    record = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "reason": reason,
              "time": time.time(), "comms": comms}
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"rank-{rank}.json")
    part = f"{path}.{threading.get_ident()}.part"   # one writer per file at a time, each with its own part file:
    with _DUMPING, open(part, "w") as out:          # an error's writer and the exit's may meet (MPICH did)
        json.dump(record, out)
        out.close()
        os.replace(part, path)
        _WRITTEN[0] += 1
    return path


_RANK = [-1]
_INSTALLED: list[bool] = []


def _install() -> None:
    """With ``MPICOLL_TRACE``: write at exit, and on ``SIGUSR1`` (from a thread, so that a rank blocked in
    MPI writes too: Python's handler writes the signal's number to a socket that the thread reads).  A program
    that handles ``SIGUSR1`` itself keeps its handler (then only a timeout, a failure or the exit write)."""
    if _INSTALLED or not config.current().trace:
        return
    _INSTALLED.append(True)
    _RANK[0] = MPI.COMM_WORLD.Get_rank()
    atexit.register(_at_exit)
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL:     # (the program's own handler stays)
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:
        return
    if previous != -1:            # someone else's (an event loop's): leave it, write from the handler only
        signal.set_wakeup_fd(previous)
        signal.signal(signal.SIGUSR1, lambda signum, frame: dump("SIGUSR1"))
        return
    signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    threading.Thread(target=_on_signal, args=(reader, writer), name="mpicoll-trace", daemon=True).start()


def _on_signal(reader: socket.socket, writer: socket.socket) -> None:
    while True:
        got = reader.recv(64)
        if not got:
            return
        if signal.SIGUSR1 in got:
            dump("SIGUSR1")


def _at_exit() -> None:
    if requests_outstanding():
        dump("exit with requests outstanding")
    elif not _WRITTEN[0]:
        dump("exit")
