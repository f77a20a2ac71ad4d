"""A composed call's program, built part after part: the plans of other collectives, rounds of messages, local steps.

Some calls are not one schedule but several, one after another, with local passes between them: an
intercommunicator's collective (a collective of each group, an exchange between the groups, another collective
of each group: :mod:`mpicoll.comm.inter_stages`), a reproducible sum's request (a collective on the codes, a
pass that encodes, a collective on the limbs, a pass that decodes: :mod:`mpicoll.comm.reproducible_requests`).
A :class:`Composer` collects one rank's rounds of such a call, each with the communicator it travels on, and
makes them one :class:`~mpicoll.program.plan.Plan` (:meth:`Composer.program`), which every engine entry runs as
it runs any plan: blocking stretch by stretch, or as one request whose rounds follow one another with the
call's one tag (MPI keeps the order of two messages between the same ranks on the same tag and communicator,
so a part's messages never match another part's receives).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from mpi4py import MPI

from mpicoll.engine.mismatch import CallNote
from mpicoll.engine.rounds import CommRound
from mpicoll.program.plan import Plan, composed

__all__ = ["Composer"]


class Composer:
    """One rank's rounds of a composed call, ``(comm, sends, recvs, steps)`` each, in the order they run.

    Attributes
    ----------
    rounds : list
        The rounds so far.
    before : list of callables
        What runs at every start, before the first round (packing a non-contiguous datatype, computing codes).
    spans : list of (address, nbytes), or None
        The call's buffers, for a program that is kept for later calls: the parts' rounds then view them by
        address, holding none of the caller's objects (as a cached plan does, see :meth:`Plan.detach`).
    peers : set of int
        The ranks the parts' schedules exchange messages with (what the mismatch check asks, see
        :class:`~mpicoll.engine.mismatch.CallNote`).
    """

    def __init__(self, spans: list[tuple[int, int]] | None = None) -> None:
        self.rounds: list[CommRound] = []
        self.before: list[Callable[[], None]] = []
        self.spans = spans
        self.peers: set[int] = set()

    def part(self, plan: Plan | None, comm: MPI.Comm) -> None:
        """The rounds of another collective's ``plan`` (None: nothing to do), on ``comm`` (the private
        communicator it was prepared for), then its ``finish`` (a result staged for a datatype, unpacked)."""
        if plan is None:
            return
        self.peers.update(plan.what().peers)
        if self.spans is not None:
            plan.detach(self.spans)
        self.rounds.extend((comm, sends, recvs, list(steps)) for sends, recvs, steps in plan.bound())
        if plan.finish is not None:
            self.step(plan.finish)

    def messages(self, comm: MPI.Comm, sends: Sequence[tuple[Any, int]] = (),
                 recvs: Sequence[tuple[Any, int]] = ()) -> None:
        """One round of messages on ``comm``: ``(buffer, peer)`` pairs."""
        self.rounds.append((comm, list(sends), list(recvs), []))

    def step(self, step: Callable[[], None]) -> None:
        """A local step, run once the rounds so far are complete on this rank (a round of no message where
        there is none yet)."""
        if not self.rounds:
            self.rounds.append((MPI.COMM_NULL, [], [], []))
        self.rounds[-1][3].append(step)

    def program(self, what: CallNote | None = None, rounds: list[CommRound] | None = None,
                finish: Callable[[], None] | None = None) -> Plan:
        """The call's plan (:func:`~mpicoll.program.plan.composed`): ``rounds`` (default: the composed ones),
        :attr:`before` at every start, ``finish`` at every completion; ``what`` as the flight recorder notes it."""
        pack = self.before
        before = None if not pack else pack[0] if len(pack) == 1 else partial(_in_order, pack)
        return composed(self.rounds if rounds is None else rounds, what, before=before, finish=finish)


def _in_order(steps: list[Callable[[], None]]) -> None:
    for step in steps:
        step()
