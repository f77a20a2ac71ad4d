"""How a round runs, written once: post its messages, complete them, then run its local steps.

A call's bound rounds (:func:`mpicoll.runtime.blocking.bind`) are ``(sends, recvs, steps)``: messages as
``(buffer, peer)`` and the local steps (reductions, copies) that run once the round's messages are complete.
Every blocking way a call runs is :func:`run` with an :class:`Exchange`, the *policy* that says how a round's
messages are posted and completed and what a failure means:

===============================================  ====================================================
policy                                           used by
===============================================  ====================================================
:data:`mpicoll.runtime.blocking.PLAIN`           every blocking call
                                                 (:func:`mpicoll.runtime.blocking.execute` is the
                                                 compiled fast form of ``run(..., PLAIN)``)
:class:`mpicoll.runtime.watchdog.Watched`        a communicator with a timeout or ``MPICOLL_DEBUG`` (a
                                                 deadline on every wait, every received size checked)
:class:`mpicoll.runtime.standin.Marked`          a rejected rank's stand-in (every message marked, no
                                                 local steps)
:class:`mpicoll.calls.objects.engine.Probed`     the object collectives (sizes known by matched probe)
:class:`mpicoll.runtime.gpu.ipc.Pull`            the CUDA IPC transport (device copies from the peers'
                                                 windows, MPI messages as tokens)
===============================================  ====================================================

Requests (``I*``, ``*_init``) advance the same rounds one at a time as a state machine
(:mod:`mpicoll.runtime.nonblocking`): each round is posted by :func:`post` (or started, for persistent ones),
completed by MPI's test and wait, and followed by its steps there.  Rounds that travel on several
communicators (an intercommunicator's stages) carry their communicator: :class:`Built` groups consecutive
rounds of one communicator, and :func:`run_stretches` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mpi4py import MPI

__all__ = ["Exchange", "run", "post", "exchange", "Built", "run_stretches", "Round", "CommRound"]

#: one bound round: its sends and receives ``(buffer, peer)``, its local steps
Round = tuple[list, list, list]
#: one round that names its communicator: ``(comm, sends, recvs, steps)``
CommRound = tuple[MPI.Comm, list, list, list]


def post(comm: MPI.Comm, tag: int, sends: Sequence[tuple[Any, int]],
         recvs: Sequence[tuple[Any, int]]) -> list[MPI.Request]:
    """Start a round's messages: every receive first, then every send (so a message never waits for its
    receive to be posted by this rank)."""
    irecv, isend = comm.Irecv, comm.Isend
    return [irecv(buf, peer, tag) for buf, peer in recvs] + [isend(buf, peer, tag) for buf, peer in sends]


def exchange(sends: list[tuple[Any, int]], recvs: list[tuple[Any, int]], comm: MPI.Comm, tag: int) -> None:
    """A round of several messages, blocking: every one posted (:func:`post`), then all waited for."""
    MPI.Request.Waitall(post(comm, tag, sends, recvs))


class Exchange:
    """How a round's messages are posted and completed, and what a failure means (a policy of :func:`run`).

    ``steps``: whether the rounds' local steps run (a stand-in's data are scratch: they do not).
    """

    steps = True

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        """Post and complete round ``t``'s messages."""
        raise NotImplementedError

    def failed(self, rounds: Sequence[Round], comm: MPI.Comm, tag: int, t: int, exc: MPI.Exception) -> None:
        """Round ``t``'s messages raised ``exc`` (an MPI error): raise, or finish the call another way."""
        raise exc


def run(rounds: Sequence[Round], comm: MPI.Comm, tag: int, policy: Exchange, start: int = 0) -> None:
    """Run rounds ``start ..`` on ``comm`` with ``tag``, in order: each round's messages by ``policy``, then
    its local steps."""
    steps_run = policy.steps
    for t in range(start, len(rounds)):
        sends, recvs, steps = rounds[t]
        try:
            policy(comm, tag, t, sends, recvs)
        except MPI.Exception as exc:
            policy.failed(rounds, comm, tag, t, exc)
            return
        if steps_run:
            for step in steps:
                step()


class Built:
    """A staged call's rounds, and the same rounds as the blocking path runs them: consecutive rounds on one
    communicator together, ``(comm, [(sends, recvs, steps), ...])`` (grouped once, when the call is built)."""

    __slots__ = ("rounds", "stretches")

    def __init__(self, rounds: list[CommRound]) -> None:
        self.rounds = rounds
        self.stretches: list[tuple[MPI.Comm, list]] = []
        for comm, sends, recvs, steps in rounds:
            if not self.stretches or self.stretches[-1][0] is not comm:
                self.stretches.append((comm, []))
            self.stretches[-1][1].append((sends, recvs, steps))


def run_stretches(stretches: list[tuple[MPI.Comm, list]], tag: int,
                  execute: Callable[[list, MPI.Comm, int], None]) -> None:
    """Run a built call's stretches blocking, in order, each by ``execute`` (the blocking executor) on its
    communicator."""
    for comm, rounds in stretches:
        execute(rounds, comm, tag)
