"""Mismatched collective calls, caught on every rank: the always-on check.

MPI requires every rank of a communicator to make the same collective calls in the same order, with the
same root, op, count and type signature.  A program that breaks the rule (a rank that takes another
branch, skips a call, or passes another count, root or op) hangs, or returns different data on different
ranks.  mpicoll catches it as it happens, without a message or a wait more in a correct program:

- **The call's signature travels in its tag.**  Every collective call draws the next number of its
  communicator's one sequence (:meth:`mpicoll.program.state.CommState.next_tag`); its messages carry the
  tag ``kind * per_kind + number * SIGS + sig``, where ``sig`` is a hash of what MPI requires to match (the
  collective, count and type signature, root, op: :func:`signature`) and ``kind`` its form (blocking,
  ``I*``, ``*_init``, which MPI does not match with each other).  Messages of mismatched calls never match:
  no rank returns with another call's data; the ranks wait instead.
- **A watcher notices the wait.**  One thread per process (:class:`_Watcher`) wakes every :data:`TICK`
  seconds.  A call that has been under way for :data:`STALL` seconds sends a *note* (its number, form,
  signature, and where the program called it) to the peers its schedule exchanges messages with, on a tag
  of its own (``MPI.TAG_UB``), and again every :data:`STALL` seconds while it waits.  A rank that made a
  different call with that number (the flight recorder of :mod:`mpicoll.engine.recorder` keeps each
  communicator's last calls, numbered) has found a mismatch: it tells every rank of the communicator.  A
  rank that is only late has not made the call yet: it says nothing, however late it is.
- **Every rank raises.**  A rank told of the mismatch flags the communicator (:mod:`mpicoll.engine.flags`
  keeps the error, a :class:`mpicoll.MismatchError` naming what each rank called), then asks the peers of
  each call it has under way to end its waits (a message of no data with the call's tag); the engine tests
  the flag before it posts each round and after each wait (one test of an empty list), and raises.  A rank
  whose own part of the call had completed raises at its next collective call on that communicator.  The
  communicator stays unusable: every later call raises the same error.
- **A rank that exits says goodbye.**  It tells the ranks of each communicator its last :data:`MOST_BYES` calls
  (a *bye*); a peer that makes, or waits in, a call of one of those numbers compares its own.  Only a peer can
  end a wait, so a rank whose peers have gone raises where its wait is watched (``MPICOLL_TIMEOUT``) and
  otherwise says on stderr that its wait cannot end.

Where ``MPI.TAG_UB`` is too small to hold a 12-bit signature beside enough call numbers, the tag holds fewer
bits (:func:`signature_bits`: one at MPI's least, ``2**15 - 1``): two mismatched calls whose signatures agree in those
bits exchange their messages as before (a count, op or root mismatch may then return different data), but
a mismatch that makes a rank wait is still caught, since the notes compare whole signatures.  Without the
flight recorder (``MPICOLL_TRACE_CALLS=0``) or ``MPI_THREAD_MULTIPLE`` the watcher does not run: the tags
still keep mismatched calls' messages apart.
"""

from __future__ import annotations

import atexit
import os
import pickle
import sys
import threading
import time
import zlib
from typing import Any, NamedTuple

from mpi4py import MPI

from mpicoll.engine import flags
from mpicoll.engine.rounds import post, probe, receive, waiting

__all__ = ["CallNote", "signature", "signature_bits", "watch", "join", "unwatch", "TICK", "STALL"]

TICK = 0.1      # seconds between the watcher's looks at its communicators
LINGER = 1.5    # seconds a communicator found mismatched is still served after it is freed, or at exit (its
                # peers may still ask this rank to end their waits)
STALL = 0.5     # seconds a call waits before its peers are asked what they called (and between asks)
MOST_BYES = 4   # calls a rank tells its peers of as it exits
MOST_LINGERING = 16   # released communicators served LINGER seconds more, at most
MOST_BITS = 12  # signature bits a tag holds where TAG_UB allows


class CallNote(NamedTuple):
    """What a plan's calls are noted as in the flight recorder, and compared by across ranks."""

    collective: str
    algorithm: str
    nbytes: int
    signature: str       # what MPI requires to match, readable: ``Allreduce(count=4, dtype=float64, op=SUM)``
    sig: int             # its hash, as the tag carries it (0 .. SIGS - 1 of the communicator)
    peers: tuple[int, ...]   # the ranks this rank's schedule exchanges messages with


def signature(fields: dict[str, Any] | None, collective: str) -> str:
    """A call's signature, readable: its collective and the fields every rank must agree on (the fields a
    collective's ``prepare`` records, :func:`mpicoll.calls.debug_check`; the algorithm too, which every
    rank must choose alike)."""
    if not fields:
        return collective
    name = fields.get("collective", collective)
    inner = ", ".join(f"{k}={v}" for k, v in fields.items() if k != "collective")
    return f"{name}({inner})"


def sig_of(text: str, sigs: int) -> int:
    """``text``'s hash in ``0 .. sigs - 1`` (the same on every rank and every run)."""
    return zlib.crc32(text.encode()) % sigs if sigs > 1 else 0


def signature_bits(tag_ub: int) -> int:
    """How many signature values (a power of two) a tag holds: :data:`MOST_BITS` bits where the tag's range
    leaves at least 2**12 call numbers per form beside them, fewer bits down to none."""
    bits = MOST_BITS
    while bits > 0 and (tag_ub // 3) >> bits < 4096:
        bits -= 1
    return 1 << bits


# -- the communicators watched -----------------------------------------------------------------------------

_WATCHED: dict[int, _Watched] = {}      # private communicator's handle -> what the watcher keeps of it
#: guards _WATCHED (the watcher reads it, communicators come and go); reentrant, as the locks below: a garbage
#: collection in the watcher's thread may free a communicator (CommState.release calls unwatch) while it holds them
_LOCK = threading.RLock()


class _Watched:
    """One communicator's part in the check: its private duplicate, its recorder, its tag layout, the notes
    sent for its waiting calls (the error, once a mismatch is found, is :mod:`mpicoll.engine.flags`')."""

    __slots__ = ("private", "rank", "size", "recorder", "tags", "per_kind", "sigs", "note_tag", "noted", "byes",
                 "stuck", "closed", "lock", "sent", "until", "free", "seen", "open", "joined", "names")

    def __init__(self, private: MPI.Comm, recorder: Any, tags: list[int], note_tag: int) -> None:
        self.private, self.recorder, self.tags = private, recorder, tags
        self.per_kind, self.sigs = tags[0], tags[2]
        self.note_tag = note_tag              # the largest tag the communicator uses: the notes' own
        self.rank, self.size = private.Get_rank(), private.Get_size()
        self.noted: dict[Any, float] = {}     # a waiting call's (kind, seq) -> when its peers were last asked
        self.seen = 0                         # the recorder's request starts when the watcher last looked
        self.open: set[int] = set()           # the recorder's request slots running then
        #: communicators that carry stages of this one's calls (an intercommunicator's group: :func:`join`), and
        #: each rank's rank there (-1: not there)
        self.joined: list[tuple[MPI.Comm, list[int]]] = []
        #: how a found mismatch names each rank: "rank r", or, on an intercommunicator's merged groups
        #: (:func:`join`), "rank r (rank i of this group)" / "(rank j of the remote group)"
        self.names: list[str] | None = None
        self.byes: dict[int, dict] = {}       # call number -> a peer's call of that number, told as it exited
        self.stuck: set = set()               # waiting calls said on stderr to be stuck (peers gone)
        self.closed = False
        self.lock = threading.RLock()         # held while the watcher uses the communicator
        self.sent: list[MPI.Request] = []     # notes and releases in flight
        self.until: float | None = None       # freed: served until then (a mismatched one), then dropped
        self.free = False                     # released: whether the watcher frees it once it is dropped

    @property
    def error(self) -> str | None:
        """The mismatch found on the communicator, or None."""
        return flags.found(self.private)

    # the watcher's side (it holds self.lock) ---------------------------------------------------------------

    def under_way(self) -> list[list]:
        """The recorder's slots of this rank's calls under way, found without a scan of its rings (the
        watcher looks at every communicator every :data:`TICK`): the blocking call of the number drawn last,
        if it is still running (a blocking call under way is the newest call: no call of a correct program
        starts before it returns), and the requests that ran at the last look or started since."""
        recorder = self.recorder
        calls, requests, number = recorder.calls, recorder.requests, self.tags[1]
        slot = calls[number % len(calls)]
        slots = [slot] if slot[1] == number and slot[4] is None else []
        started, n = recorder.next_request, len(requests)
        if started == self.seen and not self.open:      # (the common case: no request of this communicator)
            return slots
        fresh = {i % n for i in range(max(self.seen, started - n), started)}
        self.seen = started
        self.open = {i for i in self.open | fresh if requests[i][4] is None}
        return slots + [requests[i] for i in self.open]

    def look(self, now: float, status: MPI.Status, final: bool = False) -> None:
        """Read what peers sent; ask about calls waiting too long (or, once flagged, end their waits); see
        whether a message of another call waits unreceived (``final``: at exit, at once)."""
        if self.sent:
            self.sent = [r for r in self.sent if not r.Test()]
        seen = None
        while True:      # notes; once flagged, every message (a peer's send to an abandoned call completes)
            tag = self.note_tag if self.error is None else MPI.ANY_TAG
            message = probe(self.private, MPI.ANY_SOURCE, tag, status)
            if message is None:
                break
            data = bytearray(status.Get_count(MPI.BYTE))
            receive(message, [data, MPI.BYTE])
            if status.Get_tag() == self.note_tag:
                self.read(pickle.loads(data), status.Get_source())
        if (self.error is None and waiting(self.private, status)
                and status.Get_tag() != self.note_tag):
            seen = (status.Get_source(), status.Get_tag())      # (acted on once it waited STALL seconds, or at
            first = self.noted.setdefault(seen, now)            # exit: a waiting call's note says more)
            if now - first >= STALL or final:
                self.unmatched(*seen, final)
        running = {}
        for slot in self.under_way():
            kind, numbered, what, start = slot[0], slot[1], slot[2], slot[3]
            if type(what) is CallNote and start and now - start > STALL:
                running[(kind, numbered)] = (kind, numbered[0] if type(numbered) is tuple else numbered, what)
        if self.noted:
            self.noted = {key: when for key, when in self.noted.items()
                          if key in running or (key == seen and self.error is None) or key[0] == "asked"}
        for key, (kind, seq, what) in running.items():
            if seq in self.byes and self.error is None:     # a peer that exited said what its call was
                self.compare(self.byes[seq])
            before = self.noted.get(key)
            if before is not None and now - before < STALL:
                continue
            self.noted[key] = now
            if self.error is not None and before is not None and key not in self.stuck:
                self.stuck.add(key)     # asked to end its wait before, in vain: its peers may have exited
                print(f"mpicoll: {self.error} (a wait of this rank's call #{seq} cannot end: its peers do not "
                      "answer; MPICOLL_TIMEOUT makes it raise)", file=sys.stderr, flush=True)
            if self.error is None:
                note = {"note": "waiting", "rank": self.rank, "seq": seq, "kind": kind,
                        "call": what.signature, "where": _where()}
            else:
                note = {"note": "release", "tag": kind * self.per_kind + seq * self.sigs + what.sig}
            self.post(note, what.peers)

    def post(self, note: dict, peers: Any) -> None:
        data = [pickle.dumps(note), MPI.BYTE]
        self.sent += post(self.private, self.note_tag, [(data, peer) for peer in peers if peer != self.rank], [])

    def unmatched(self, source: int, tag: int, final: bool) -> None:
        """A message waits unreceived: if it belongs to a call this rank made otherwise (its tag's form or
        signature differ from this rank's call of that number), the calls mismatched, though perhaps no rank
        waits (a root that only sends).  Its sender is asked what it called (its answer is compared as a
        waiting call's note is); at exit, when no answer can come, the mismatch is found at once.  An early
        message of a call made alike is nothing."""
        kind, number, sig = tag // self.per_kind, (tag % self.per_kind) // self.sigs, tag % self.sigs
        mine = self.made(number)
        if mine is None or (mine[0], mine[1].sig) == (kind, sig):
            return
        if not final:
            if ("asked", source, number) not in self.noted:
                self.noted[("asked", source, number)] = time.time()
                self.post({"note": "query", "seq": number}, (source,))
            return
        self.found(number, {self.rank: _called(*mine),
                            source: _called(kind, "another call (its message to this rank matched none here)", "")})

    def read(self, note: dict, source: int) -> None:
        kind = note["note"]
        if kind == "query":       # a peer holds a message of this rank's call that matched none of its own
            mine = self.made(note["seq"])
            if mine is not None:
                self.post({"note": "waiting", "rank": self.rank, "seq": note["seq"], "kind": mine[0],
                           "call": mine[1].signature, "where": mine[2]}, (source,))
        elif kind == "waiting" and self.error is None:
            self.compare(note)
        elif kind == "bye":          # the peer exits: its last calls, for a call of this rank still to come
            for call in note["calls"]:
                self.byes[call["seq"]] = call
            while len(self.byes) > 4 * MOST_BYES:
                del self.byes[next(iter(self.byes))]
        elif kind == "found" and self.error is None:
            self.flag(note)
        elif kind == "release":      # the peer's error is set: end its wait on this rank's message
            self.sent += post(self.private, note["tag"], [([b"", MPI.BYTE], source)], [])
            for other, ranks in self.joined:       # (or on a communicator of its call's stages)
                if ranks[source] >= 0:
                    self.sent += post(other, note["tag"], [([b"", MPI.BYTE], ranks[source])], [])

    def compare(self, theirs: dict) -> None:
        """A peer's call (its rank, number, form, signature and where) against this rank's of that number: a
        mismatch found if they differ (nothing if this rank has not made it)."""
        mine = self.made(theirs["seq"])
        if mine is not None and (mine[0], mine[1].signature) != (theirs["kind"], theirs["call"]):
            self.found(theirs["seq"], {self.rank: _called(*mine),
                                       theirs["rank"]: _called(theirs["kind"], theirs["call"], theirs["where"])})

    def found(self, seq: int, calls: dict[int, str]) -> None:
        """Calls ``seq`` mismatched (``calls``: what the ranks this rank knows of called): every rank told, and
        this one flagged."""
        note = {"note": "found", "seq": seq, "calls": calls}
        self.post(note, range(self.size))
        self.flag(note)

    def bye(self) -> None:
        """At exit: tell the peers what this rank's last calls were (a peer still to make one, or waiting in it,
        compares its own when it does: this rank will not answer its notes)."""
        last = [slot for slot in self.recorder.calls + self.recorder.requests if type(slot[2]) is CallNote]
        last = sorted(last, key=lambda slot: slot[3] or 0.0)[-MOST_BYES:]      # (by when they started)
        calls = [{"rank": self.rank, "seq": numbered[0] if type(numbered) is tuple else numbered, "kind": kind,
                  "call": what.signature, "where": ""} for kind, numbered, what, *_ in last]
        if calls:      # (every rank where that is few; else the ranks those calls exchange messages with)
            peers = range(self.size) if self.size <= 64 else {peer for slot in last for peer in slot[2].peers}
            self.post({"note": "bye", "calls": calls}, peers)

    def made(self, seq: int) -> tuple[int, CallNote, str] | None:
        """This rank's call ``seq``, as its recorder noted it: ``(kind, note, where)``, where being the program's
        ``file:line`` while the call is under way and the program waits in mpicoll (:func:`_where`; else ""), or
        None (not made yet, or too long ago)."""
        for slot in self.recorder.calls + self.recorder.requests:
            numbered = slot[1]
            if (numbered[0] if type(numbered) is tuple else numbered) == seq and type(slot[2]) is CallNote:
                return slot[0], slot[2], _where() if slot[4] is None else ""
        return None

    def flag(self, found: dict) -> None:
        """A mismatch: the error kept first (the engine raises it once a wait ends), then the peers of this
        rank's waiting calls asked to end those waits (at the next look: every call's note time is reset)."""
        calls = {int(r): c for r, c in found["calls"].items()}
        mine = self.made(found["seq"])
        if mine is not None and not (mine[2] == "" and self.rank in calls):
            calls[self.rank] = _called(*mine)
        calls = dict(sorted(calls.items()))
        names = self.names or [f"rank {r}" for r in range(self.size)]
        told = "; ".join(f"{names[r]} called {c}" for r, c in calls.items())
        self.noted = {}
        where = (f"an intercommunicator (its two groups: {self.size} ranks)" if self.names
                 else f"a communicator of {self.size} ranks")
        error = f"{names[self.rank]}: mismatched collective calls on {where} (its call #{found['seq']}): {told}"
        for comm in (self.private, *(other for other, _ in self.joined)):
            flags.flag(comm, error, mine[1].collective if mine is not None else "", calls)


def _called(kind: int, call: str | CallNote, where: str) -> str:
    """A rank's call as the error names it: ``nonblocking Allreduce(count=4, ...) at train.py:12``."""
    call = call.signature if isinstance(call, CallNote) else call
    form = ("", "nonblocking ", "persistent ")[kind] if 0 <= kind < 3 else ""
    return f"{form}{call}" + (f" at {where}" if where else "")


_SKIP = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(MPI.__file__),
         os.path.dirname(threading.__file__))


def _where() -> str:
    """``file:line`` where the main thread's program is (its innermost frame outside mpicoll, mpi4py, the
    standard library and torch, when torch is imported: where a torch program called ``dist.all_reduce``), or
    ""."""
    torch = sys.modules.get("torch")
    skip = _SKIP + ((os.path.dirname(torch.__file__),) if getattr(torch, "__file__", None) else ())
    frame = sys._current_frames().get(threading.main_thread().ident)
    inside = False       # whether the main thread is in mpicoll now (else the call is not its)
    while frame is not None:
        name = frame.f_code.co_filename
        inside = inside or name.startswith(_SKIP[0])
        if not name.startswith(skip) and not name.startswith("<"):
            return f"{name}:{frame.f_lineno}" if inside else ""
        frame = frame.f_back
    return ""


# -- the watcher thread ------------------------------------------------------------------------------------

class _Watcher:
    """The one thread that looks at every watched communicator every :data:`TICK` seconds."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="mpicoll-mismatch", daemon=True)
        self.thread.start()
        atexit.register(self.close)   # (after mpi4py's: it runs first, before MPI is finalized)

    def run(self) -> None:
        status = MPI.Status()
        while not self.stop.wait(TICK):
            self.look(status)

    def look(self, status: MPI.Status, final: bool = False) -> None:
        now = time.time()
        with _LOCK:
            watched = list(_WATCHED.values())
            for w in watched:
                if w.until is not None and now > w.until:
                    del _WATCHED[MPI._handleof(w.private)]
                    _drop(w)
        for w in watched:
            with w.lock:
                if w.closed:
                    continue
                try:
                    w.look(now, status, final)
                except MPI.Exception:      # e.g. a communicator revoked after a process failed
                    w.closed = True

    def close(self) -> None:
        """At exit, before MPI is finalized: the thread stopped; a communicator found mismatched is served
        :data:`LINGER` seconds more (its peers' waits on this rank end)."""
        self.stop.set()
        self.thread.join(timeout=2 * TICK + 1)
        if not MPI.Is_initialized() or MPI.Is_finalized():
            return
        end = time.time() + LINGER
        status = MPI.Status()
        self.look(status, final=True)   # a message of a mismatched call may wait unreceived: the last look
        for w in list(_WATCHED.values()):
            with w.lock:
                if w.error is None and not w.closed:
                    try:
                        w.bye()
                        for _ in range(100):     # (small messages: sent at once where MPI buffers them)
                            if MPI.Request.Testall(w.sent):
                                break
                            time.sleep(0.002)
                    except MPI.Exception:
                        pass
        while time.time() < end and any(w.error is not None for w in list(_WATCHED.values())):
            time.sleep(TICK)
            self.look(status)
        for w in list(_WATCHED.values()):
            if w.error is not None and not flags.raised(w.private):    # no call of this rank noticed: said here
                print(f"mpicoll: {w.error}", file=sys.stderr, flush=True)


_WATCHER: list[_Watcher] = []


def watch(private: MPI.Comm, recorder: Any, tags: list[int], note_tag: int) -> None:
    """Watch a new communicator's calls (``private``: its duplicate; ``recorder``: its flight recorder; ``tags``:
    its calls' tag layout and last number, :meth:`mpicoll.program.state.CommState.next_tag`, all below
    ``note_tag``, the notes' tag)."""
    if recorder is None or MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        return
    with _LOCK:
        _WATCHED[MPI._handleof(private)] = _Watched(private, recorder, tags, note_tag)
        if not _WATCHER:
            _WATCHER.append(_Watcher())


def join(private: MPI.Comm, other: MPI.Comm, ranks: list[int], remote: tuple[int, ...] = ()) -> None:
    """``other`` (a private communicator of some of ``private``'s ranks: an intercommunicator's group, whose
    calls' stages travel on both) is flagged with ``private``, and a peer's wait on it ended with one on
    ``private`` (``ranks``: each rank of ``private``'s rank in ``other``, or -1).  With ``remote`` (the ranks
    of ``private`` in the other group, in that group's order), a mismatch names each rank by its group too,
    as the program knows it."""
    with _LOCK:
        watched = _WATCHED.get(MPI._handleof(private))
        if watched is not None:
            watched.joined.append((other, ranks))
            if remote:
                watched.names = [f"rank {r} (rank {ranks[r]} of this group)" if ranks[r] >= 0
                                 else f"rank {r} (rank {remote.index(r)} of the remote group)"
                                 for r in range(len(ranks))]


def mismatched(private: MPI.Comm) -> bool:
    """Whether a mismatch was found on ``private`` (messages of the mismatched calls may wait in it)."""
    watched = _WATCHED.get(MPI._handleof(private))
    return watched is not None and watched.error is not None


def unwatch(private: MPI.Comm, free: bool) -> None:
    """``private``'s communicator is released (``free``: it is to be freed).  A peer may not have noticed yet
    that its last calls mismatched: a communicator with a call that ended less than :data:`LINGER` seconds ago,
    or found mismatched, is served that long more (its peers' notes answered), then freed by the watcher if
    ``free``; any other is freed now if ``free``.  At most :data:`MOST_LINGERING` correct ones are served so
    (a program that makes and frees communicators in a loop would run out of MPI's), the oldest freed first."""
    now = time.time()
    dropped: list[_Watched] = []
    with _LOCK:
        watched = _WATCHED.pop(MPI._handleof(private), None)
        if watched is not None:
            flags.unflag(private)
            recent = any(slot[4] is None or now - slot[4] < LINGER
                         for slot in watched.recorder.calls + watched.recorder.requests if type(slot[2]) is CallNote)
            if watched.error is not None or recent:
                watched.until, watched.free, free = now + LINGER, free, False    # (freed when dropped)
                _WATCHED[MPI._handleof(private)] = watched
                lingering = sorted((w for w in _WATCHED.values() if w.until is not None and w.error is None),
                                   key=lambda w: w.until)
                for w in lingering[:max(0, len(lingering) - MOST_LINGERING)]:
                    dropped.append(_WATCHED.pop(MPI._handleof(w.private)))
            else:
                dropped.append(watched)
    for w in dropped:
        _drop(w)         # (frees w.private where it was left to the watcher)
    if free:
        private.Free()


def _drop(watched: _Watched) -> None:
    with watched.lock:
        watched.closed = True
        flags.forget(watched.private)
        for request in watched.sent:
            try:
                request.Cancel()
                request.Free()
            except MPI.Exception:
                pass
        if watched.free and not MPI.Is_finalized():
            watched.private.Free()
