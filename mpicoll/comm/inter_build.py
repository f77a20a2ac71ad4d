"""One intercommunicator call's program, built stage after stage (no message is sent here).

:class:`Stages` composes one rank's rounds of one call (a :class:`~mpicoll.program.composer.Composer`): the
collectives of its group (:meth:`Stages.local`) and the exchanges between the groups (:meth:`Stages.exchange`),
as the functions of :mod:`mpicoll.comm.inter_stages` add them; :meth:`Stages.agreement` is the all-reduce over
both groups of which ranks' checks failed, whose verdict names them.  :func:`build` runs a call's checks and
builds its stages; :mod:`mpicoll.comm.inter` makes them a plan and runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.comm.inter_stages import STAGES
from mpicoll.comm.preparing import prepare
from mpicoll.data.datatypes import byte_message, packing
from mpicoll.engine.rounds import CommRound
from mpicoll.program.composer import Composer
from mpicoll.program.state import CommState

if TYPE_CHECKING:
    from mpicoll.comm.inter import InterState

__all__ = ["Stages", "message", "build"]


class Stages(Composer):
    """One rank's rounds of one intercommunicator call, built stage after stage (no message is sent here);
    :attr:`before` packs non-contiguous datatypes at every start."""

    def __init__(self, state: InterState, spans: list[tuple[int, int]] | None = None) -> None:
        super().__init__(spans)
        self.state = state

    def local(self, method: str, *args: Any) -> None:
        """A collective of this rank's group (prepared now, like any mpicoll call).

        Its buffers are the call's parsed host arrays and scratch, contiguous (a non-contiguous datatype was
        packed by the parse), so its plan neither packs nor stages anything: only its rounds are taken."""
        local: CommState = self.state.local._state
        self.part(prepare(local, method, args, "auto"), local.private)

    def exchange(self, sends: list[tuple[Any, int]] = (), recvs: list[tuple[Any, int]] = ()) -> None:  # type: ignore[assignment]
        """One round of messages with the other group: ``(array, remote rank)`` pairs."""
        remote = self.state.remote
        spans = self.spans
        self.messages(self.state.merged._state.private, [(message(a, spans), remote[j]) for a, j in sends],
                      [(message(a, spans), remote[j]) for a, j in recvs])

    def agreement(self, method: str, error: BaseException | None) -> list[CommRound]:
        """The all-reduce over both groups of which ranks failed their checks, and its verdict step."""
        state = self.state
        merged: CommState = state.merged._state
        failed = np.zeros(merged.size, np.int32)
        failed[merged.rank] = error is not None
        total = np.zeros_like(failed)
        naming = Composer()
        naming.part(prepare(merged, "Allreduce", (failed, total, MPI.SUM), "auto"), merged.private)

        def verdict() -> None:
            if error is not None:
                raise error
            if total.any():
                ranks = np.flatnonzero(total).tolist()
                there = [state.remote.index(r) for r in ranks if r in state.remote]
                here = [state.local.Get_rank() if r == merged.rank else _local_rank(state, r)
                        for r in ranks if r not in state.remote]
                who = ([f"rank(s) {here} of this group"] if here else []) + (
                    [f"rank(s) {there} of the remote group"] if there else [])
                raise errors.ArgumentError(f"{method} on an intercommunicator: the arguments of {' and '.join(who)} "
                                           "were rejected, so no rank ran the call", method)

        naming.step(verdict)
        return naming.rounds


def _local_rank(state: InterState, merged_rank: int) -> int:
    """The rank in this group of the rank ``merged_rank`` of the merged communicator."""
    groups = [state.merged._state.private.Get_group(), state.local.Get_group()]
    try:
        return MPI.Group.Translate_ranks(groups[0], [merged_rank], groups[1])[0]
    finally:
        for group in groups:
            group.Free()


def message(array: Any, spans: list[tuple[int, int]] | None = None) -> Any:
    """A host array as a message of its bytes (one element of a large type from 2^31 bytes on); by address
    where it lies in one of ``spans`` (the caller's buffers)."""
    if not isinstance(array, np.ndarray):
        return array
    raw = array.view(np.uint8)
    if spans and raw.nbytes:
        address = raw.__array_interface__["data"][0]
        if any(lo <= address and address + raw.nbytes <= lo + n for lo, n in spans):
            raw = np.frombuffer(MPI.buffer.fromaddress(address, raw.nbytes), np.uint8)
    return byte_message(raw)


def build(state: InterState, method: str, args: tuple, algorithm: str, spans: list[tuple[int, int]] | None = None,
           stages: dict[str, Callable[..., None]] = STAGES) -> tuple[Stages, BaseException | None]:
    """The call's stages, or the error its checks raised (no message either way).  Non-contiguous datatypes are
    packed now and unpacked when the call completes.  ``stages``: the functions that add each call's stages
    (:data:`~mpicoll.comm.inter_stages.STAGES`, or the reproducible sums' in :mod:`mpicoll.comm.reproducible_inter`).

    Each collective has one composition of stages (its local stages choose their algorithms as any call
    does), so ``algorithm`` must be ``"auto"``; another name is refused like any bad argument, after the
    agreement, so that a rank that names one does not leave the others waiting.
    """
    st = Stages(state, spans)
    try:
        if algorithm != "auto":
            raise ValueError(f"algorithm: an intercommunicator {method} has one algorithm, 'auto' (stages of "
                             f"each group's collectives and exchanges between the groups), not {algorithm!r}")
        with packing() as packed:
            stages[method](st, *args)
        if packed.pack:
            st.before.extend(packed.pack)
            for unpack in packed.unpack:
                st.step(unpack)
    except Exception as exc:
        return Stages(state), exc
    return st, None
