"""Requests whose rounds travel on more than one communicator: an intercommunicator's collectives.

An intercommunicator collective is a sequence of *stages*: collectives of one
group (prepared as ordinary plans on that group's private communicator) and
exchanges between the groups (on a private communicator of both groups).  Its
rounds are the stages' rounds one after another, each round with the
communicator its messages travel on: ``(comm, sends, recvs, steps)``, sends and
receives as ``(buffer, peer)``, steps run once the round's messages are complete.

:func:`run` runs them blocking (a :class:`Built` call), each stretch of rounds on one communicator by
the blocking executor (:func:`mpicoll.runtime.blocking.execute`).
:class:`StagedRequest` and :class:`StagedPrequest` run such rounds on the
engine of :mod:`mpicoll.runtime.nonblocking` exactly as :class:`~mpicoll.runtime.requests.Request`
and :class:`~mpicoll.runtime.requests.Prequest` run a plan's: they are ``MPI.Request``
and ``MPI.Prequest`` objects to mpi4py, and every ``Test``/``Wait`` advances them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll.runtime.blocking import execute
from mpicoll.runtime.requests import Prequest, Request

__all__ = ["StagedRequest", "StagedPrequest", "StagedRound", "Built", "run"]

#: one round of a staged call: the communicator, its sends and receives ``(buffer, peer)``, its local steps
StagedRound = tuple[MPI.Comm, list, list, list]


class Built:
    """A staged call's rounds, and the same rounds as the blocking path runs them: consecutive rounds on one
    communicator together, ``(comm, [(sends, recvs, steps), ...])`` (grouped once, when the call is built)."""

    __slots__ = ("rounds", "stretches")

    def __init__(self, rounds: list[StagedRound]) -> None:
        self.rounds = rounds
        self.stretches: list[tuple[MPI.Comm, list]] = []
        for comm, sends, recvs, steps in rounds:
            if not self.stretches or self.stretches[-1][0] is not comm:
                self.stretches.append((comm, []))
            self.stretches[-1][1].append((sends, recvs, steps))


def run(stretches: list[tuple[MPI.Comm, list]], tag: int) -> None:
    """Run a built call's stretches blocking, in order, each by the blocking executor on its communicator."""
    for comm, rounds in stretches:
        execute(rounds, comm, tag)


class StagedRequest(Request):
    """A nonblocking collective whose rounds are posted each on its own communicator."""

    __slots__ = ("_comms",)

    def __init__(self, rounds: list[StagedRound], tag: int, keep: Any = None) -> None:
        super().__init__([(sends, recvs, steps) for _, sends, recvs, steps in rounds], None, tag, None, keep=keep)
        self._comms = [comm for comm, _, _, _ in rounds]

    def _post(self, t: int) -> list[MPI.Request]:
        sends, recvs, _ = self._rounds[t]
        comm, tag = self._comms[t], self.tag
        return [comm.Irecv(buf, peer, tag) for buf, peer in recvs] + [comm.Isend(buf, peer, tag) for buf, peer in sends]


class StagedPrequest(Prequest):
    """A persistent collective over staged rounds: one MPI persistent request per message, bound once.

    ``before`` (when given) runs at every ``Start``: it packs the buffers of non-contiguous datatypes again.
    """

    __slots__ = ()

    def __init__(self, rounds: list[StagedRound], tag: int, before: Callable[[], None] | None = None,
                 keep: Any = None) -> None:
        def rebuild() -> None:
            before()
            return None

        super().__init__(rounds, None, tag, rebuild if before is not None else None, keep)  # type: ignore[arg-type]

    def _bind(self, rounds: list[StagedRound] | None) -> None:   # type: ignore[override]
        self._free_requests()
        rounds = rounds or []
        tag = self.tag
        self._requests = [[comm.Recv_init(buf, peer, tag) for buf, peer in recvs]
                          + [comm.Send_init(buf, peer, tag) for buf, peer in sends]
                          for comm, sends, recvs, _ in rounds]
        self._steps = [steps for _, _, _, steps in rounds]
        self._nrounds = len(rounds)
        self._finish = None
