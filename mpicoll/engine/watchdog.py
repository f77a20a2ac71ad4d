"""The careful executor: a deadline on every wait, and every received message's size checked.

The default executors (:mod:`mpicoll.engine.blocking`, :mod:`mpicoll.engine.nonblocking`)
block inside MPI and trust the schedule.  When a call has a timeout
(``MPICOLL_TIMEOUT`` or ``mpicoll.Comm(comm, timeout=...)``) or runs in debug
mode (``MPICOLL_DEBUG``), mpicoll runs it here instead:

- each round posts its sends (``Isend``) and then polls: ``Improbe`` for every
  receive it still expects, ``Testall`` for its sends.  A message is received
  (``Mrecv``) only once probed, so its size is known first: a message longer or
  shorter than the schedule expects raises :class:`MessageSizeError` naming the
  peer and both sizes (the message is drained into scratch memory first, so it
  cannot break a later call);
- if nothing completes for ``timeout`` seconds, :class:`CollectiveTimeout` names
  the collective, the round and the peers still awaited.

:func:`wait` does the same for ``Wait`` on an mpicoll request: it moves every
outstanding request along and raises when none of them has advanced a round
for ``timeout`` seconds.  Polling costs a little: see ``docs`` and the closing
figures in the test ``tests/fault``; nothing here runs unless asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll.engine.flags import FLAGGED, check
from mpicoll.engine.rounds import Exchange, post, probe, receive, run, testall, waitall

__all__ = ["CollectiveTimeout", "MessageSizeError", "Watched", "execute", "wait", "wait_mpi"]


class CollectiveTimeout(TimeoutError):
    """A collective made no progress for the communicator's timeout ("timed out", as torch's timeouts say).

    Attributes: ``collective``, ``round`` (0-based), ``peers`` (the ranks it was
    still waiting for) and ``timeout`` (seconds).
    """

    def __init__(self, collective: str, rnd: int, peers: list[int], timeout: float, rank: int = -1) -> None:
        self.collective, self.round, self.peers, self.timeout = collective, rnd, peers, timeout
        who = f"rank {rank}: " if rank >= 0 else ""
        super().__init__(f"{who}{collective} timed out: made no progress for {timeout:g} s in round {rnd}, waiting for "
                         f"rank{'s' if len(peers) != 1 else ''} {', '.join(map(str, peers)) or '?'} "
                         "(did every rank call it, with the same arguments?)")


class MessageSizeError(RuntimeError):
    """A received message is longer or shorter than the schedule expects.

    Attributes: ``collective``, ``peer``, ``expected`` and ``received`` (bytes), and ``round`` (0-based; -1:
    not known).
    """

    def __init__(self, collective: str, peer: int, expected: int, received: int, rank: int = -1,
                 rnd: int = -1) -> None:
        self.collective, self.peer, self.expected, self.received = collective, peer, expected, received
        self.round = rnd
        who = f"rank {rank}: " if rank >= 0 else ""
        super().__init__(f"{who}{collective}: the message from rank {peer} has {received} bytes, the schedule "
                         f"expects {expected} (do the ranks agree on count, dtype, root and algorithm?)")


def _idle(spins: int) -> None:
    """Yield the core after a while without progress (ranks may outnumber cores)."""
    if spins > 64:
        time.sleep(0 if spins < 4096 else 0.0002)


class Watched(Exchange):
    """The careful path's policy of :func:`mpicoll.engine.rounds.run`: sends posted, every receive probed
    before it is taken (its size checked), and no wait longer than ``timeout`` seconds without progress."""

    def __init__(self, collective: str, timeout: float | None, rank: int = -1) -> None:
        self.collective, self.timeout, self.rank = collective, timeout, rank
        self.status = MPI.Status()

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        collective, timeout, status = self.collective, self.timeout, self.status
        requests = post(comm, tag, sends, [])
        waiting = dict(enumerate(recvs))   # receives not yet done, by position (buffers never compared)
        last, spins = time.monotonic(), 0
        while waiting or requests:
            moved = False
            probed: set[int] = set()
            for i, (buf, peer) in list(waiting.items()):
                # messages from one peer with one tag arrive in order: only the first receive still
                # waiting for that peer may take the next one (a later one would steal it if it
                # arrived between two probes)
                if peer in probed:
                    continue
                probed.add(peer)
                msg = probe(comm, peer, tag, status)
                if msg is None:
                    continue
                got = status.Get_count(MPI.BYTE)
                if got != buf.nbytes:
                    receive(msg, bytearray(got))          # drain it, so no later call can match it
                    if FLAGGED:      # the mismatch check's release of this wait (mpicoll.engine.mismatch)
                        check(comm)
                    waitall(requests)
                    raise MessageSizeError(collective, peer, buf.nbytes, got, self.rank, t)
                receive(msg, buf)
                del waiting[i]
                moved = True
            if requests and testall(requests):
                requests, moved = [], True
            if moved:
                last, spins = time.monotonic(), 0
                continue
            spins += 1
            if FLAGGED:      # a mismatch found while this wait makes no progress (its peers may have exited)
                check(comm)
            if timeout is not None and time.monotonic() - last > timeout:
                peers = sorted({p for _, p in waiting.values()} | ({p for _, p in sends} if requests else set()))
                raise CollectiveTimeout(collective, t, peers, timeout, self.rank)
            _idle(spins)


def execute(bound: list, comm: MPI.Comm, tag: int, collective: str, timeout: float | None = None) -> None:
    """Run bound rounds (see :func:`mpicoll.engine.blocking.bind`) with size checks and an optional deadline."""
    run(bound, comm, tag, Watched(collective, timeout, comm.Get_rank()))


def wait(done: Callable[[], bool], active: Callable[[], list], collective: str, timeout: float,
         rank: int = -1) -> None:
    """Poll ``done()`` (which moves every outstanding request along) until true, or raise after ``timeout``.

    ``active()`` lists the outstanding requests: progress is any of them
    advancing a round or finishing; the error names the round and peers of the
    first one that is stuck.
    """
    def state() -> tuple:
        return tuple((id(req), req._round) for req in active())

    last, seen, spins = time.monotonic(), state(), 0
    while not done():
        now = state()
        if now != seen:
            last, seen, spins = time.monotonic(), now, 0
            continue
        spins += 1
        if time.monotonic() - last > timeout:
            stuck = active()
            req: Any = stuck[0] if stuck else None
            rnd = req._round if req is not None else -1
            raise CollectiveTimeout(collective, rnd, _pending_peers(req), timeout, rank)
        _idle(spins)


def _pending_peers(req: Any) -> list[int]:
    """The peers of a request's current round whose messages are not complete (best effort)."""
    rounds = getattr(req, "_rounds", None)
    if req is None or not rounds or req._round >= len(rounds):
        return []
    sends, recvs, _ = rounds[req._round]
    peers = [peer for _, peer in recvs] + [peer for _, peer in sends]
    pending = req._waitable()
    if len(pending) != len(peers):
        return sorted(set(peers))
    return sorted({peer for peer, r in zip(peers, pending) if not r.Get_status()})


def wait_mpi(request: MPI.Request, collective: str, timeout: float | None, peers: list[int], rank: int = -1) -> None:
    """Wait for one MPI request (a nonblocking Dup or Allgather), raising after ``timeout`` seconds."""
    if timeout is None:
        request.Wait()
        return
    start, spins = time.monotonic(), 0
    while not request.Test():
        spins += 1
        if time.monotonic() - start > timeout:
            raise CollectiveTimeout(collective, 0, peers, timeout, rank)
        _idle(spins)
