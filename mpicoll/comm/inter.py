"""An intercommunicator's state and how its calls run: the agreement, then stages, blocking, ``I*`` or ``*_init``.

On an intercommunicator of groups A and B, MPI's collectives move data *between* the groups; mpicoll
writes each one as *stages* (:mod:`mpicoll.comm.inter_stages`): collectives of one group, on that group's
private communicator, and exchanges between the groups, on a private communicator of both groups (the two
groups merged, never the user's).  This module holds what every call shares: the state
(:class:`InterState`), the stages being built (:class:`Stages`), and running them.

Every blocking and nonblocking call starts with an **agreement**: an all-reduce
over both groups (on the merged private communicator) of which ranks' arguments
failed their checks.  A rank whose check fails takes part in it, then raises;
every other rank raises :class:`~mpicoll.ArgumentError` naming it, so that an
error one rank detects never leaves the other group waiting.  (A persistent
request checks its arguments when it is made, as an intracommunicator's does.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls.table import VALUE_ARGS
from mpicoll.comm.inter_stages import STAGES
from mpicoll.comm.preparing import prepare
from mpicoll.errors import ProcFailedError
from mpicoll.runtime import direct, engines
from mpicoll.runtime.blocking import execute as execute_rounds
from mpicoll.runtime.callkey import held, shape_key
from mpicoll.runtime.datatypes import byte_message, packing
from mpicoll.runtime.recorder import Called, Traced, named
from mpicoll.runtime.requests import Prequest, Request, split
from mpicoll.runtime.rounds import Built, CommRound, revoke_together
from mpicoll.runtime.state import NONBLOCKING, PERSISTENT, CommState

__all__ = ["InterState", "Stages", "state_of", "run", "execute", "start", "init"]


def state_of(comm: Any) -> InterState:
    """The state of intercommunicator ``comm`` (an :class:`mpicoll.Intercomm`)."""
    state = comm._state
    if state is None:
        raise ValueError("the communicator is MPI.COMM_NULL")
    return state


class InterState:
    """mpicoll's data for one intercommunicator: the two private communicators its stages travel on.

    Attributes
    ----------
    merged : mpicoll.Comm
        Both groups merged (mpicoll's own; never the user's): the agreement and the exchanges between groups.
    local : mpicoll.Comm
        This rank's group (mpicoll's own): the local stages.
    remote : tuple of int
        The rank in ``merged`` of each rank of the remote group.
    rank, size, remote_size : int
        This rank in its group, the group's size, the remote group's size.
    """

    __slots__ = ("merged", "local", "remote", "rank", "size", "remote_size", "calls", "calls_bytes", "recorder",
                 "__weakref__")

    #: the fields the blocking hot path reads of every state (:data:`mpicoll.runtime.state.HOT_FIELDS`): no
    #: plan cache of its own (every call takes :meth:`slow_path`); its tags and its flight recorder are the
    #: merged communicator's (set in __init__)
    entries = None

    @property
    def tags(self) -> list[int]:
        """The merged communicator's tag sequences: a blocking call's messages carry the tag drawn from them."""
        return self.merged._state.tags

    @staticmethod
    def slow_path(state: InterState, method: str, algorithm: str, args: tuple, tag: int, key: Any) -> None:
        """How every blocking call runs (:func:`run`), with the tag and the key the hot path drew for it."""
        run(state, method, args, algorithm, tag, key)

    def __init__(self, merged: Any, local: Any, remote: tuple[int, ...]) -> None:
        self.merged, self.local, self.remote = merged, local, remote
        self.rank, self.size = local.Get_rank(), local.Get_size()
        self.remote_size = len(remote)
        #: blocking calls kept built: call key -> (rounds, what the key names by identity, bytes of their
        #: messages), oldest first; at most CACHED_CALLS of them, whose messages hold at most CACHED_BYTES in
        #: all (see :func:`run`)
        self.calls: OrderedDict[Any, tuple[Built, list[Any], int]] = OrderedDict()
        self.calls_bytes = 0
        revoke_together([merged._state.private, local._state.private])   # a process failure stops both
        #: the merged communicator's flight recorder notes this one's calls (numbered by the tags they draw
        #: there, as any communicator's calls are), marked with the sizes of the groups in its rank order
        self.recorder = merged._state.recorder
        if self.recorder is not None:
            self.recorder.groups = (self.remote_size, self.size) if 0 in remote else (self.size, self.remote_size)

    @property
    def timeout(self) -> float | None:
        return self.merged.timeout

    def release(self) -> None:
        """Free both private communicators (and what mpicoll keeps for them)."""
        self.calls.clear()
        self.calls_bytes = 0
        for comm in (self.local, self.merged):
            if comm != MPI.COMM_NULL and not MPI.Is_finalized():
                comm.Free()

    def __del__(self) -> None:
        # the last wrapper of an unfreed intercommunicator is gone: free mpicoll's communicators for it
        try:
            self.release()
        except Exception:   # at interpreter exit MPI may be gone: nothing is left to free
            pass


# -- the stages of one call ------------------------------------------------------------------------------


class Stages:
    """One rank's rounds of one intercommunicator call, built stage after stage (no message is sent here)."""

    def __init__(self, state: InterState, spans: list[tuple[int, int]] | None = None) -> None:
        self.state = state
        self.rounds: list[CommRound] = []
        self.before: list[Callable[[], None]] = []    # packing of non-contiguous datatypes, at every start
        #: the call's buffers ``(address, nbytes)``, for a call to be kept built: its rounds then view them by
        #: address, holding none of the caller's objects (as a cached plan does, see Plan.detach)
        self.spans = spans

    def local(self, method: str, *args: Any) -> None:
        """A collective of this rank's group (prepared now, like any mpicoll call).

        Its buffers are the call's parsed host arrays and scratch, contiguous (a non-contiguous datatype was
        packed by the parse), so its plan neither packs nor stages anything: only its rounds are taken."""
        local: CommState = self.state.local._state
        plan = prepare(local, method, args, "auto")
        if plan is None:
            return
        if self.spans is not None:
            plan.detach(self.spans)
        self.rounds.extend((local.private, sends, recvs, list(steps)) for sends, recvs, steps in plan.bound())

    def exchange(self, sends: list[tuple[Any, int]] = (), recvs: list[tuple[Any, int]] = ()) -> None:  # type: ignore[assignment]
        """One round of messages with the other group: ``(array, remote rank)`` pairs."""
        remote = self.state.remote
        spans = self.spans
        self.rounds.append((self.state.merged._state.private, [(_message(a, spans), remote[j]) for a, j in sends],
                            [(_message(a, spans), remote[j]) for a, j in recvs], []))

    def step(self, step: Callable[[], None]) -> None:
        """A local step, run once the rounds so far are complete."""
        if not self.rounds:
            self.rounds.append((MPI.COMM_NULL, [], [], []))
        self.rounds[-1][3].append(step)

    def agreement(self, method: str, error: BaseException | None) -> list[CommRound]:
        """The all-reduce over both groups of which ranks failed their checks, and its verdict step."""
        state = self.state
        merged: CommState = state.merged._state
        failed = np.zeros(merged.size, np.int32)
        failed[merged.rank] = error is not None
        total = np.zeros_like(failed)
        plan = prepare(merged, "Allreduce", (failed, total, MPI.SUM), "auto")
        rounds: list[CommRound] = [(merged.private, sends, recvs, list(steps)) for sends, recvs, steps in
                                     plan.bound()] if plan is not None else [(MPI.COMM_NULL, [], [], [])]

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

        rounds[-1][3].append(verdict)
        return rounds


def _local_rank(state: InterState, merged_rank: int) -> int:
    """The rank in this group of the rank ``merged_rank`` of the merged communicator."""
    groups = [state.merged._state.private.Get_group(), state.local.Get_group()]
    try:
        return MPI.Group.Translate_ranks(groups[0], [merged_rank], groups[1])[0]
    finally:
        for group in groups:
            group.Free()


def _message(array: Any, spans: list[tuple[int, int]] | None = None) -> Any:
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


# -- running them -----------------------------------------------------------------------------------------


def _built(state: InterState, method: str, args: tuple, algorithm: str, spans: list[tuple[int, int]] | None = None,
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


def start(state: InterState, method: str, args: tuple, algorithm: str,
          stages: dict[str, Callable[..., None]] = STAGES) -> Request:
    """A nonblocking intercommunicator call: the agreement, then the call's stages, started."""
    tag = state.merged._state.next_tag(NONBLOCKING)
    st, error = _built(state, method, args, algorithm, stages=stages)
    req = Request(*split(st.agreement(method, error) + st.rounds), tag, None, keep=args)
    req.trace = _traced(state, NONBLOCKING, tag, method)
    req._launch()
    return req


def _called(method: str) -> Called:
    """What the flight recorder notes of a call: its collective, ``intercomm`` for the algorithm (its stages'
    own differ by group), no size (a root's buffers and its group's differ)."""
    return Called(method.lower(), "intercomm", -1)


def _traced(state: InterState, kind: int, tag: int, method: str) -> Traced | None:
    """What a request of ``kind`` with ``tag`` notes in the flight recorder (None where none is kept): its
    number in its kind's tag sequence, as an intracommunicator's request (mpicoll.runtime.requests)."""
    if state.recorder is None:
        return None
    return Traced(state.recorder, kind, tag - kind * state.tags[0], _called(method))


#: per intercommunicator: the most blocking calls kept built, and the most bytes their messages hold in all
CACHED_CALLS, CACHED_BYTES = 16, 1 << 24


def run(state: InterState, method: str, args: tuple, algorithm: str, tag: int, key: Any,
        stages: dict[str, Callable[..., None]] = STAGES) -> None:
    """A blocking intercommunicator call: the agreement and the stages, run in order.

    A call made again with the same arguments (the plan cache's key: the same buffers, counts, datatypes, op
    and root) runs the rounds built the first time, so that only its messages and steps cost anything (such
    a call passed its checks when it was built).  Kept rounds view the caller's buffers by address, holding
    none of them; their scratch is their own: at most ``CACHED_CALLS`` calls, the oldest let go first, whose
    messages span at most ``CACHED_BYTES`` in all.  ``tag`` (of the merged communicator's blocking sequence)
    and ``key`` (:func:`~mpicoll.runtime.callkey.call_key`) are drawn by the hot path
    (:func:`mpicoll.comm.dispatch.run_blocking`).
    """
    values = VALUE_ARGS.get(method, ())
    named(state.recorder, tag, _called(method))
    kept = state.calls.get(key) if key is not None else None
    if kept is not None:
        state.calls.move_to_end(key)
        execute(state, method, kept[0], tag)
        return
    st, error = _built(state, method, args, algorithm, shape_key(method, args, algorithm, values)[1] if key else None,
                       stages)
    built = Built(st.agreement(method, error) + st.rounds)
    if key is not None and error is None and not st.before:   # (packed datatypes: built every time)
        _keep(state, key, (built, held(args, values), _message_bytes(built.rounds)))
    execute(state, method, built, tag)


def _keep(state: InterState, key: Any, kept: tuple[Built, list[Any], int]) -> None:
    """Keep a built call, letting the oldest go while there are too many or they hold too many bytes."""
    if kept[2] > CACHED_BYTES:
        return
    state.calls[key] = kept
    state.calls_bytes += kept[2]
    while len(state.calls) > CACHED_CALLS or state.calls_bytes > CACHED_BYTES:
        state.calls_bytes -= state.calls.popitem(last=False)[1][2]


def _message_bytes(rounds: list[CommRound]) -> int:
    """The bytes of every message of ``rounds``."""
    return sum(MPI.buffer(buf[0] if isinstance(buf, list) else buf).nbytes
               for _, sends, recvs, _ in rounds for buf, _ in (*sends, *recvs))


def execute(state: InterState, method: str, built: Built, tag: int) -> None:
    """Run a built call blocking.  With a timeout (every wait watched), or while nonblocking requests are
    outstanding (they must keep moving), it runs as a request that is waited for."""
    if state.timeout is None and not engines.outstanding():
        runners = built.runners
        if runners is None:     # each stretch's rounds posted from C where they can be, else by the executor
            runners = built.runners = [direct.blocking(rounds, comm) or partial(execute_rounds, rounds, comm)
                                       for comm, rounds in built.stretches]
        first = 0
        for (_, rounds), run_stretch in zip(built.stretches, runners):
            try:
                run_stretch(tag)
            except ProcFailedError as exc:    # its round counted over the whole call (as a request counts it)
                if exc.round >= 0:
                    exc.round += first
                raise
            first += len(rounds)
        return
    req = Request(*split(built.rounds), tag, None)
    if state.timeout is not None:
        req.watch = (method, state.timeout, state.merged._state.rank)
    req._launch()
    req.Wait()


def init(state: InterState, method: str, args: tuple, algorithm: str,
         stages: dict[str, Callable[..., None]] = STAGES) -> Prequest:
    """A persistent intercommunicator call: its arguments checked and its messages bound now."""
    tag = state.merged._state.next_tag(PERSISTENT)
    st, error = _built(state, method, args, algorithm, stages=stages)
    if error is not None:
        raise error
    pack = st.before

    def before() -> None:
        for step in pack:
            step()

    req = Prequest(*split(st.rounds), tag, None, before if pack else None, keep=args)
    req.trace = _traced(state, PERSISTENT, tag, method)
    return req
