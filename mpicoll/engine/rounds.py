"""How a round runs, written once: post its messages, complete them, then run its local steps.

This module is the only one of mpicoll's engine, data and device layers that posts point-to-point messages
(:func:`post`, :func:`exchange`, :func:`send_receive`, :func:`post_persistent`, :func:`probe` and
:func:`receive`, :func:`to_self`): a transport or a safety net on messages is written here once.  (The object
collectives' transport, :mod:`mpicoll.calls.objects.engine`, and torch's own send and receive,
:mod:`mpicoll.torch.process_group`, post theirs; the compiled engine, :mod:`mpicoll.engine.direct`, posts
the same rounds from C.)

A call's bound rounds (:func:`mpicoll.engine.blocking.bind`) are ``(sends, recvs, steps)``: messages as
``(buffer, peer)`` and the local steps (reductions, copies) that run once the round's messages are complete.
Every blocking way a call runs is :func:`run` with an :class:`Exchange`, the *policy* that says how a round's
messages are posted and completed and what a failure means:

===============================================  ====================================================
policy                                           used by
===============================================  ====================================================
:data:`mpicoll.engine.blocking.PLAIN`           every blocking call
                                                 (:func:`mpicoll.engine.blocking.execute` is the
                                                 compiled fast form of ``run(..., PLAIN)``)
:class:`mpicoll.engine.watchdog.Watched`        a communicator with a timeout or ``MPICOLL_DEBUG`` (a
                                                 deadline on every wait, every received size checked)
:class:`mpicoll.engine.standin.Marked`          a rejected rank's stand-in (every message marked, no
                                                 local steps)
:class:`mpicoll.calls.objects.engine.Probed`     the object collectives (sizes known by matched probe)
:class:`mpicoll.gpu.ipc.Pull`                   the CUDA IPC transport (device copies from the peers'
                                                 windows, MPI messages as tokens)
:class:`mpicoll.gpu.staged.Pipelined`           the staged transport (each send posted once its segment
                                                 is copied to the host, results copied back as they arrive)
===============================================  ====================================================

Requests (``I*``, ``*_init``) advance the same rounds one at a time as a state machine
(:mod:`mpicoll.engine.nonblocking`): each round is posted by :func:`post` (or started, for persistent ones),
completed by MPI's test and wait, and followed by its steps there.  Rounds that travel on several
communicators (a composed plan's, :func:`mpicoll.program.plan.composed`) carry their communicator
(:data:`CommRound`); blocking, consecutive rounds of one communicator run together
(:meth:`mpicoll.program.plan.Plan.stretches`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpi4py import MPI

from mpicoll import config
from mpicoll.engine.flags import FLAGGED, check
from mpicoll.errors import ProcFailedError

__all__ = ["Exchange", "run", "post", "exchange", "send_receive", "post_persistent", "probe", "waiting", "receive",
           "to_self", "waitall", "testall", "Round", "CommRound", "is_fault", "fault", "revoke_together",
           "keep_active"]

#: one bound round: its sends and receives ``(buffer, peer)``, its local steps
Round = tuple[list, list, list]
#: one round that names its communicator: ``(comm, sends, recvs, steps)``
CommRound = tuple[MPI.Comm, list, list, list]


def _post_all(comm: MPI.Comm, tag: int, sends: Sequence[tuple[Any, int]],
              recvs: Sequence[tuple[Any, int]]) -> list[MPI.Request]:
    irecv, isend = comm.Irecv, comm.Isend
    return [irecv(buf, peer, tag) for buf, peer in recvs] + [isend(buf, peer, tag) for buf, peer in sends]


def _post_each(comm: MPI.Comm, tag: int, sends: Sequence[tuple[Any, int]],
               recvs: Sequence[tuple[Any, int]]) -> list[MPI.Request]:
    irecv, isend = comm.Irecv, comm.Isend
    requests: list[MPI.Request] = []
    try:
        for buf, peer in recvs:
            requests.append(irecv(buf, peer, tag))
        for buf, peer in sends:
            requests.append(isend(buf, peer, tag))
    except MPI.Exception as exc:
        if is_fault(exc, comm):
            raise fault(comm, exc, requests) from exc
        raise
    return requests


def _wait_each(requests: Sequence[MPI.Request]) -> None:
    for request in requests:
        request.Wait()


def _test_each(requests: Sequence[MPI.Request]) -> bool:
    return all([request.Test() for request in requests])    # (every one tested: a list, not a generator)


#: ``waitall(requests)`` and ``testall(requests)``: MPI's, or, where the job runs with MPI's fault-tolerance
#: extension, one request at a time: Open MPI's ``MPI_Waitall`` that meets a failed process frees the send
#: requests it has not completed, and aborts the job when one of them then completes in error (seen with
#: Open MPI 5.0); a request waited for alone is completed or left active, never freed under the caller
waitall, testall = ((_wait_each, _test_each) if config.fault_tolerant()
                    else (MPI.Request.Waitall, MPI.Request.Testall))

#: ``post(comm, tag, sends, recvs)``: start a round's messages, every receive first, then every send (so a
#: message never waits for its receive to be posted by this rank).  Where the job runs with MPI's
#: fault-tolerance extension, a process failure met on the way raises :class:`~mpicoll.ProcFailedError`
#: once the messages already posted are kept (:func:`fault`): an MPI request dropped while active would be
#: freed with its object, and MPI aborts the job when a freed request completes in error
post = _post_each if config.fault_tolerant() else _post_all


def exchange(sends: list[tuple[Any, int]], recvs: list[tuple[Any, int]], comm: MPI.Comm, tag: int) -> None:
    """A round of several messages, blocking: every one posted (:func:`post`), then all waited for."""
    requests = post(comm, tag, sends, recvs)
    try:
        waitall(requests)
    except MPI.Exception as exc:
        if is_fault(exc, comm):
            raise fault(comm, exc, requests) from exc
        raise


def send_receive(comm: MPI.Comm, tag: int, sends: list[tuple[Any, int]], recvs: list[tuple[Any, int]]) -> None:
    """A round's messages, blocking, in as few MPI calls as carry them: one send and one receive as
    ``Sendrecv``, a lone send or receive as ``Send``/``Recv``, anything else by :func:`exchange`."""
    if sends:
        if len(sends) == 1 and not recvs:
            comm.Send(sends[0][0], sends[0][1], tag)
        elif len(sends) == 1 and len(recvs) == 1:
            (sbuf, dest), (rbuf, source) = sends[0], recvs[0]
            comm.Sendrecv(sbuf, dest, tag, rbuf, source, tag)
        else:
            exchange(sends, recvs, comm, tag)
    elif recvs:
        if len(recvs) == 1:
            comm.Recv(recvs[0][0], recvs[0][1], tag)
        else:
            exchange(sends, recvs, comm, tag)


def post_persistent(comm: MPI.Comm, tag: int, sends: Sequence[tuple[Any, int]],
                    recvs: Sequence[tuple[Any, int]]) -> list[MPI.Prequest]:
    """A round's messages as MPI persistent requests, not started: every receive first, as :func:`post`."""
    return ([comm.Recv_init(buf, peer, tag) for buf, peer in recvs]
            + [comm.Send_init(buf, peer, tag) for buf, peer in sends])


def probe(comm: MPI.Comm, peer: int, tag: int, status: MPI.Status, block: bool = False) -> MPI.Message | None:
    """The next message from ``peer`` (or ``MPI.ANY_SOURCE``) with ``tag``, matched (``Mprobe``; ``Improbe``
    unless ``block``: None where none has arrived); its size in ``status``.  :func:`receive` takes it."""
    return comm.Mprobe(peer, tag, status) if block else comm.Improbe(peer, tag, status)


def waiting(comm: MPI.Comm, status: MPI.Status) -> bool:
    """Whether a message of any tag from any peer waits unreceived on ``comm`` (``Iprobe``; its source and tag
    in ``status``)."""
    return comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)


def receive(message: MPI.Message, buf: Any) -> None:
    """Receive a message :func:`probe` matched into ``buf``."""
    message.Recv(buf)


_SELF: list[MPI.Intracomm] = []   # to_self's duplicate of MPI.COMM_SELF, made by its first call


def to_self(send: Any, recv: Any) -> None:
    """A message from this rank to itself, on a duplicate of ``MPI.COMM_SELF`` of its own: how a datatype at
    absolute addresses is packed or unpacked (:class:`mpicoll.data.datatypes.AbsoluteBlock`)."""
    if not _SELF:
        _SELF.append(MPI.COMM_SELF.Dup())
    _SELF[0].Sendrecv(send, 0, 0, recv, 0, 0)


# -- a process failed (MPI's fault-tolerance extension, ULFM) ---------------------------------------------

#: requests a process failure left active: mpi4py frees a request object's handle when the object goes, and MPI
#: aborts the job when a freed request later completes in error, so they are kept (the newest MAX_ORPHANS)
ORPHANS: list[MPI.Request] = []
MAX_ORPHANS = 4096

#: the error classes of a process failure: the call cannot complete
_FAULTS = frozenset({MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING, MPI.ERR_REVOKED})


def is_fault(exc: BaseException, comm: MPI.Comm | None = None) -> bool:
    """Whether ``exc`` says a process failed, or that a peer revoked the communicator after one did.

    A wait on several requests raises ``MPI_ERR_IN_STATUS`` whatever failed: with ``comm``, that is a fault
    where ``comm`` is revoked or MPI knows one of its processes to have failed.
    """
    if not isinstance(exc, MPI.Exception):
        return False
    error = exc.Get_error_class()
    if error in _FAULTS:
        return True
    if error != MPI.ERR_IN_STATUS or comm is None:
        return False
    try:
        if comm.Is_revoked():
            return True
    except (MPI.Exception, NotImplementedError, AttributeError):
        return False
    return bool(failed_ranks(comm))


def fault(comm: MPI.Comm, exc: MPI.Exception, pending: Sequence[MPI.Request] = (),
          rnd: int = -1) -> ProcFailedError:
    """What a rank does when round ``rnd``'s messages say a process failed: revoke ``comm`` (mpicoll's private
    communicator), so that every rank further along the schedule stops too instead of waiting for a peer that
    stopped, keep the round's ``pending`` requests that are still active (:data:`ORPHANS`), and return the
    error to raise (its ``round``: ``rnd``).
    """
    if isinstance(exc, ProcFailedError):
        if exc.round < 0:
            exc.round = rnd
        return exc
    for revoked in (comm, *_together(comm)):
        try:
            revoked.Revoke()
        except (MPI.Exception, NotImplementedError):   # revoked already, or an MPI without the extension
            pass
    keep_active(pending)
    revoked = exc.Get_error_class() == MPI.ERR_REVOKED
    error = ProcFailedError(MPI.ERR_REVOKED if revoked else MPI.ERR_PROC_FAILED, failed_ranks(comm))
    error.round = rnd
    return error


_TOGETHER: list[int] = []    # the keyval of the attribute revoke_together sets


def revoke_together(comms: Sequence[MPI.Comm]) -> None:
    """Make a process failure seen on any of ``comms`` revoke all of them (an intercommunicator's private
    communicators: a failure met in one group's stage must stop the ranks waiting between the groups, and
    those ranks then stop their own group's stage).  Kept as an attribute of each communicator, so it goes
    when they are freed."""
    if not _TOGETHER:
        _TOGETHER.append(MPI.Comm.Create_keyval())
    for comm in comms:
        comm.Set_attr(_TOGETHER[0], [other for other in comms if other is not comm])


def _together(comm: MPI.Comm) -> list[MPI.Comm]:
    return (comm.Get_attr(_TOGETHER[0]) or []) if _TOGETHER else []


def keep_active(requests: Sequence[MPI.Request]) -> None:
    """Keep the requests of an abandoned round that are still active (with their buffers) in :data:`ORPHANS`,
    never freed and never waited for (a revocation may end them only when someone progresses them)."""
    for request in requests:
        try:
            request.Test()
        except MPI.Exception:
            pass
        if request:
            ORPHANS.append(request)
    del ORPHANS[:-MAX_ORPHANS]


def failed_ranks(comm: MPI.Comm) -> list[int]:
    """The ranks of ``comm`` that MPI knows to have failed (empty where it cannot say)."""
    try:
        failed = comm.Get_failed()
    except (MPI.Exception, NotImplementedError, AttributeError):
        return []
    try:
        group = comm.Get_group()
        ranks = MPI.Group.Translate_ranks(failed, list(range(failed.Get_size())), group)
        group.Free()
    except MPI.Exception:
        ranks = []
    failed.Free()
    return sorted(r for r in ranks if r != MPI.UNDEFINED)


class Exchange:
    """How a round's messages are posted and completed, and what a failure means (a policy of :func:`run`).

    ``steps``: whether the rounds' local steps run (a stand-in's data are scratch: they do not).
    """

    steps = True

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        """Post and complete round ``t``'s messages."""
        raise NotImplementedError

    def failed(self, rounds: Sequence[Round], comm: MPI.Comm, tag: int, t: int, exc: MPI.Exception) -> None:
        """Round ``t``'s messages raised ``exc`` (an MPI error): raise, or finish the call another way.

        By default a process failure is raised as :class:`~mpicoll.ProcFailedError` after revoking ``comm``
        (:func:`fault`), any other error as it is.
        """
        if is_fault(exc, comm):
            raise fault(comm, exc, rnd=t) from exc
        raise exc


def run(rounds: Sequence[Round], comm: MPI.Comm, tag: int, policy: Exchange, start: int = 0) -> None:
    """Run rounds ``start ..`` on ``comm`` with ``tag``, in order: each round's messages by ``policy``, then
    its local steps."""
    steps_run = policy.steps
    for t in range(start, len(rounds)):
        sends, recvs, steps = rounds[t]
        if FLAGGED:
            check(comm)
        try:
            policy(comm, tag, t, sends, recvs)
        except MPI.Exception as exc:
            policy.failed(rounds, comm, tag, t, exc)
            return
        if FLAGGED:
            check(comm)
        if steps_run:
            for step in steps:
                step()

