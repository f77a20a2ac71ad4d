"""Play a rejected call's part on scratch memory, so that no peer waits forever.

Some argument checks can only fail on one rank: the root's receive buffer of a
``Gather`` is too small, one rank's ``Bcast`` buffer is read-only.  The other
ranks passed their checks and started the schedule; if the rank at fault just
raised, they would wait for it forever (or leave a message behind).  So before
raising, the rank at fault runs the same schedule with the faulty buffer
replaced by scratch memory of the size the call implies: a writable copy of a
read-only buffer, or a receive (send) buffer sized from the send (receive)
buffer as the collective relates them (Gather's root receives p blocks of the
send count, Scatter's root sends p blocks of the receive count, ...).  The user's
buffers are never written.  Then the original error is raised.

Only the argument the error names (``"recvbuf: ..."``) is replaced; the buffer
may be of any kind mpi4py takes for host memory (NumPy, bytes-like, DLPack,
CUDA array interface over host memory), alone or first in an mpi4py buffer
specification.  Where no stand-in can be derived (a v-collective's too-small
buffer, a root that differs between ranks, a non-root's ``MPI.IN_PLACE`` with no
receive buffer to size it from) the rank raises at once; ``MPICOLL_DEBUG=1``
catches those cases before any message, and ``MPICOLL_TIMEOUT`` ends any wait
that remains.

**Marks.**  A stand-in's data are scratch, so no rank may return a result made
from them.  Every message a stand-in sends is *marked*: one byte longer than
the schedule says.  A correct rank receives exactly the length its schedule
says, so a marked message ends its receive with ``MPI_ERR_TRUNCATE``; nothing
is checked on the way of a correct call, which therefore costs nothing more.
The executor hands that error to :func:`continue_marked`: the rank finishes its
schedule with every later message marked too (and every receive one byte
longer, taking marked and plain messages alike), then raises
:class:`~mpicoll.ArgumentError`.  So the mark spreads along the schedule: every
rank whose result depends on the stand-in's data raises, after playing its part;
a rank whose result does not depend on it returns normally.  (Marks travel
through the blocking host executor; a nonblocking request or a GPU transport
that receives a marked message raises MPI's truncation error instead.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.data.buffers import host_view
from mpicoll.engine.rounds import Exchange, fault, is_fault, post, probe, receive, run, testall
from mpicoll.engine.watchdog import CollectiveTimeout

__all__ = ["stand_in_args", "play", "TIMEOUT", "Marked", "run_marked", "continue_marked", "is_mark", "Agreeing",
           "drain"]

# seconds a stand-in may wait without progress when the communicator has no timeout of its own:
# a stand-in that does not match what the peers do (their arguments are wrong too) gives up
TIMEOUT = 10.0

# recvbuf's element count over sendbuf's, for the collectives where they differ (p: the size)
_RECV_OVER_SEND: dict[str, Callable[[int], float]] = {
    "Gather": lambda p: p, "Allgather": lambda p: p,
    "Scatter": lambda p: 1 / p, "Reduce_scatter_block": lambda p: 1 / p,
}
_BUFFERS = ("buf", "sendbuf", "recvbuf")


def _host_view(obj: Any) -> np.ndarray | None:
    """A NumPy view of a host buffer of any kind mpi4py takes, or None (device memory, not a buffer)."""
    if isinstance(obj, np.ndarray):
        return obj
    if obj is None or obj is MPI.IN_PLACE or isinstance(obj, (int, float, str)):
        return None
    return host_view(obj)


def _array(spec: Any) -> np.ndarray | None:
    """The host array of a buffer argument (alone or first in a list/tuple spec), or None."""
    if isinstance(spec, (list, tuple)):
        return _host_view(spec[0]) if spec else None
    return _host_view(spec)


def _with_array(spec: Any, array: np.ndarray) -> Any:
    """``spec`` with its buffer replaced by ``array``."""
    if isinstance(spec, (list, tuple)):
        return type(spec)([array, *spec[1:]])
    return array


def stand_in_args(method: str, args: tuple, error: BaseException, size: int) -> list[tuple]:
    """Argument tuples, most likely first, with the buffer ``error`` names replaced by scratch."""
    name = str(error).split(":", 1)[0].strip()
    if name not in _BUFFERS:
        return []
    index = 0 if name in ("buf", "sendbuf") else 1
    if index >= len(args):
        return []
    spec, bad = args[index], _array(args[index])
    candidates: list[Any] = []
    if bad is not None:   # read-only, not contiguous, ...: a writable copy of the same elements
        candidates.append(_with_array(spec, np.array(bad.reshape(-1), order="C")))
    other = _array(args[1 - index]) if method != "Bcast" and len(args) > 1 else None
    if other is not None and not isinstance(args[1 - index], (list, tuple)):
        ratio = _RECV_OVER_SEND.get(method, lambda p: 1)(size)
        count = other.size * ratio if index == 1 else other.size / ratio
        if count == int(count):
            candidates.append(np.zeros(int(count), other.dtype))
    return [args[:index] + (c,) + args[index + 1:] for c in candidates]


def play(comm: Any, method: str, args: tuple, algorithm: str, error: BaseException,
         prepare: Callable[..., Any], run: Callable[[Any], None]) -> bool:
    """Run this rank's part of the call on scratch (when one can be derived); True if it ran to its end
    (False: messages the peers sent this rank may be left unreceived).

    ``prepare(method, *args, algorithm=...)`` builds a plan without
    communicating; ``run(plan)`` runs it as the failed call would have.
    Anything going wrong here is swallowed: the caller raises ``error`` next.
    """
    if comm.size == 1:
        return True     # no peer to play for
    for candidate in stand_in_args(method, tuple(args), error, comm.size):
        try:
            plan = prepare(method, *candidate, algorithm=algorithm)
        except Exception:
            continue
        try:
            run(plan)
        except Exception:
            return False
        return True
    return False


# -- marks: a stand-in's messages are one byte longer, and so is every message that depends on them ------

#: the byte that makes a message marked (its value is never read: the length is the mark)
MARK = np.uint8(0x4D)


def is_mark(exc: BaseException) -> bool:
    """Whether ``exc`` (raised by a round's receive) is a marked message arriving: MPI's truncation error
    (``MPI_ERR_IN_STATUS`` from a round of several messages, where each completed)."""
    return isinstance(exc, MPI.Exception) and not isinstance(exc, errors.MPIError) and \
        exc.Get_error_class() in (MPI.ERR_TRUNCATE, MPI.ERR_IN_STATUS)


def _marked_copy(buf: Any) -> np.ndarray:
    """The bytes of message ``buf`` (a host array or ``[MPI.buffer, MPI.BYTE]``) with the mark appended."""
    data = np.frombuffer(buf[0], np.uint8) if isinstance(buf, list) else np.asarray(buf).view(np.uint8)
    out = np.empty(data.size + 1, np.uint8)
    out[:-1] = data.reshape(-1)
    out[-1] = MARK
    return out


def _length(buf: Any) -> int:
    return len(buf[0]) if isinstance(buf, list) else np.asarray(buf).nbytes


class Marked(Exchange):
    """A stand-in's policy of :func:`mpicoll.engine.rounds.run`: every send one byte longer, every receive
    into scratch one byte longer (a plain or a marked message fits), no local steps (the data are scratch),
    and :class:`~mpicoll.CollectiveTimeout` after ``limit`` seconds without progress (the peers did
    something else)."""

    steps = False

    def __init__(self, limit: float, what: str, rank: int) -> None:
        self.limit, self.what, self.rank = limit, what, rank

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        requests = post(comm, tag, [(_marked_copy(buf), peer) for buf, peer in sends],
                        [(np.empty(_length(buf) + 1, np.uint8), peer) for buf, peer in recvs])
        last, spins = time.monotonic(), 0
        while not testall(requests):
            spins += 1
            if time.monotonic() - last > self.limit:
                for req in requests:
                    if req != MPI.REQUEST_NULL:
                        req.Cancel()
                peers = sorted({p for _, p in recvs} | {p for _, p in sends})
                raise CollectiveTimeout(self.what, t, peers, self.limit, self.rank)
            if spins > 64:
                time.sleep(0 if spins < 4096 else 0.0002)


def drain(comm: MPI.Comm, tag: int) -> None:
    """Receive, into scratch, every message with ``tag`` that has arrived on ``comm`` (what peers sent to a rank
    whose call was refused, so that their sends complete)."""
    status = MPI.Status()
    while (arrived := probe(comm, MPI.ANY_SOURCE, tag, status)) is not None:
        receive(arrived, [np.empty(status.Get_count(MPI.BYTE), np.uint8), MPI.BYTE])


def run_marked(bound: list, comm: MPI.Comm, tag: int, start: int = 0, limit: float = TIMEOUT,
               what: str = "a call") -> None:
    """Play rounds ``start ..`` of bound rounds (see :func:`mpicoll.engine.blocking.bind`) marked
    (:class:`Marked`)."""
    run(bound, comm, tag, Marked(limit, what, comm.Get_rank()), start)


class Agreeing(list):
    """Bound rounds whose first ``agreed`` rounds are an agreement (an intercommunicator's blocking call, see
    :class:`mpicoll.comm.inter.Agreement`): a marked message arriving in one of them is played marked to the
    agreement's end only (the rank at fault knows no more of the call than that), then ``refused(tag, exc)``
    finishes the call, which every rank then does alike (it raises)."""

    __slots__ = ("agreed", "refused")

    def __init__(self, rounds: list, agreed: int, refused: Callable[[int, BaseException], None]) -> None:
        super().__init__(rounds)
        self.agreed, self.refused = agreed, refused


def continue_marked(bound: list, comm: MPI.Comm, tag: int, index: int, exc: BaseException) -> None:
    """What a blocking executor does when round ``index`` of ``bound`` raised ``exc``: re-raise it, unless
    it is a marked message arriving (:func:`is_mark`); then the round's messages are complete (MPI
    completes every request of a failed ``Waitall``), the rest of the schedule is played marked, and
    :class:`~mpicoll.ArgumentError` is raised (in an agreement, :class:`Agreeing` says how the call ends)."""
    if is_fault(exc, comm):     # a process failed: every survivor stops (see mpicoll.engine.rounds.fault)
        raise fault(comm, exc, rnd=index) from exc
    if not is_mark(exc):
        raise exc
    if type(bound) is Agreeing and index < bound.agreed:
        run_marked(bound[:bound.agreed], comm, tag, index + 1)
        bound.refused(tag, exc)
    run_marked(bound, comm, tag, index + 1)
    raise errors.ArgumentError(
        f"rank {comm.Get_rank()}: a message was longer than this rank expected (MPI_ERR_TRUNCATE): a peer's "
        "arguments were rejected (it raised, after playing its part on scratch memory, with its messages "
        "marked), or the ranks' calls do not match; this rank's result depends on that peer's data, so it "
        "played its part and abandoned the call") from exc
