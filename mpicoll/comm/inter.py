"""The buffer collectives of an intercommunicator, as stages: collectives of one group and exchanges between groups.

On an intercommunicator of groups A and B, MPI's collectives move data *between*
the groups: a rooted call goes from the root (``root=MPI.ROOT``; the other ranks
of its group pass ``MPI.PROC_NULL``) to every rank of the other group, or from
every rank of the other group to the root; an all-kind call gives each group
what the other group contributed.  mpicoll writes each one as stages, in the
textbook way (an all-reduce between groups is two reduces and an exchange):

- a **local** stage is an ordinary mpicoll collective of one group, on that
  group's private communicator, prepared like any call (so it has its own
  schedule, algorithm choice and kernels);
- an **exchange** stage is one round of messages between the groups, on a
  private communicator of both groups (the two groups merged, never the user's);
- the **leader** of a group is its rank 0.

==========================  ==============================================================================
call                        stages (group R receives, group S sends; n = local size, m = remote size)
==========================  ==============================================================================
Barrier                     the agreement alone (an all-reduce over both groups: nobody leaves early)
Bcast                       root -> R's leader; Bcast in R
Gather                      Gather in S to its leader; S's leader -> root
Gatherv                     every rank of S -> root (linear: the root alone knows the counts)
Scatter                     root -> R's leader; Scatter in R
Scatterv                    root -> every rank of R (linear)
Reduce                      Reduce in S to its leader; S's leader -> root
Allreduce                   Reduce in each group; the leaders swap; Bcast in each group
Allgather                   Gather in each group; the leaders swap; Bcast in each group
Allgatherv                  pairwise: max(n, m) rounds, every rank with every remote rank
Alltoall, Alltoallv/w       pairwise: in round k, local rank i sends to remote (i + k) mod max(n, m) and
                            receives from remote (i - k) mod max(n, m) (a peer past the group: no message)
Reduce_scatter(_block)      Reduce in each group; the leaders swap; Scatter(v) in each group
==========================  ==============================================================================

Every blocking and nonblocking call starts with an **agreement**: an all-reduce
over both groups (on the merged private communicator) of which ranks' arguments
failed their checks.  A rank whose check fails takes part in it, then raises;
every other rank raises :class:`~mpicoll.ArgumentError` naming it, so that an
error one rank detects never leaves the other group waiting.  (A persistent
request checks its arguments when it is made, as an intracommunicator's does.)

Buffers are host memory (NumPy, bytes-like, ``MPI.memory``, DLPack or CUDA array
interface over host memory, any datatype mpicoll takes); ``MPI.IN_PLACE`` is
erroneous on an intercommunicator, as in MPI.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls.alltoallw import as_bytes, parse_w
from mpicoll.calls.table import VALUE_ARGS
from mpicoll.comm.preparing import exchanged, prepare
from mpicoll.runtime import nonblocking
from mpicoll.runtime.blocking import execute as execute_rounds
from mpicoll.runtime.buffers import Buffer, is_in_place, parse, parse_blocks, parse_v
from mpicoll.runtime.callkey import held, shape_key
from mpicoll.runtime.datatypes import byte_message, packing
from mpicoll.runtime.requests import Prequest, Request, split
from mpicoll.runtime.rounds import Built, CommRound, run_stretches
from mpicoll.runtime.state import NONBLOCKING, PERSISTENT, CommState

__all__ = ["InterState", "Stages", "STAGES", "ROOT", "IDLE", "role_of", "state_of", "run", "execute", "start", "init"]


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

    __slots__ = ("merged", "local", "remote", "rank", "size", "remote_size", "calls", "calls_bytes", "__weakref__")

    #: the fields the blocking hot path reads of every state (:data:`mpicoll.runtime.state.HOT_FIELDS`): no
    #: plan cache of its own (every call takes :meth:`slow_path`); its tags are the merged communicator's
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


def _spec(buf: Buffer, array: Any = None, count: int | None = None) -> Any:
    """``array`` (default: the parsed one) as a buffer argument of ``count`` elements (default: all) of
    ``buf``'s element type, for a local stage."""
    array = buf.array if array is None else array
    if buf.datatype is None:
        return array
    units = (array.shape[0] if count is None else count) // buf.unit
    return [array, units, buf.datatype]


def _like(buf: Buffer, count: int) -> np.ndarray:
    """Scratch for ``count`` elements of ``buf``'s element type."""
    return np.empty(count, buf.dtype)


def _host(buf: Any, what: str) -> Any:
    if getattr(buf, "xp", np) is not np:
        raise errors.BufferValueError(f"{what}: intercommunicator collectives take host memory only (the buffer is "
                                      "on a GPU)")
    return buf


def _send(spec: Any, method: str) -> Buffer:
    if is_in_place(spec):
        raise errors.BufferValueError(f"sendbuf: {method} on an intercommunicator cannot be MPI.IN_PLACE (MPI "
                                      "defines no in-place form between groups)")
    return _host(parse(spec, "sendbuf"), "sendbuf")


ROOT, IDLE = "root", "idle"


def role_of(root: Any, remote_size: int, method: str) -> Any:
    """``"root"`` (``MPI.ROOT``), ``"idle"`` (``MPI.PROC_NULL``) or the root's rank in the remote group."""
    if isinstance(root, (int, np.integer)) and not isinstance(root, bool):
        if root == MPI.ROOT:
            return ROOT
        if root == MPI.PROC_NULL:
            return IDLE
        if 0 <= root < remote_size:
            return int(root)
    raise errors.RootError(f"root: {method} on an intercommunicator takes MPI.ROOT (the root), MPI.PROC_NULL (the "
                           f"root's group) or a rank of the remote group in 0 .. {remote_size - 1}, got {root!r}")


# -- the collectives: one short function each, (stages, arguments) -> rounds added ------------------------


def barrier(st: Stages) -> None:
    """The agreement alone: an all-reduce over both groups returns on no rank before every rank has entered."""


def bcast(st: Stages, buf: Any, root: Any) -> None:
    role = role_of(root, st.state.remote_size, "Bcast")
    if role is ROOT:
        st.exchange(sends=[(_host(parse(buf, "buf"), "buf").array, 0)])
    elif role is not IDLE:
        data = _host(parse(buf, "buf", writable=True), "buf")
        if st.state.rank == 0:
            st.exchange(recvs=[(data.array, role)])
        st.local("Bcast", _spec(data), 0)


def gather(st: Stages, sendbuf: Any, recvbuf: Any, root: Any) -> None:
    state = st.state
    role = role_of(root, state.remote_size, "Gather")
    if role is ROOT:
        st.exchange(recvs=[(_host(parse_blocks(recvbuf, "recvbuf", state.remote_size, writable=True),
                                  "recvbuf").array, 0)])
    elif role is not IDLE:
        gathered = _gathered(st, _send(sendbuf, "Gather"))
        if gathered is not None:
            st.exchange(sends=[(gathered, role)])


def gatherv(st: Stages, sendbuf: Any, recvbuf: Any, root: Any) -> None:
    state = st.state
    role = role_of(root, state.remote_size, "Gatherv")
    if role is ROOT:
        recv = _host(parse_v(recvbuf, "recvbuf", state.remote_size, writable=True), "recvbuf")
        st.exchange(recvs=[(recv.array[d:d + c], j) for j, (c, d) in enumerate(zip(recv.counts, recv.displs))])
    elif role is not IDLE:
        st.exchange(sends=[(_send(sendbuf, "Gatherv").array, role)])


def scatter(st: Stages, sendbuf: Any, recvbuf: Any, root: Any) -> None:
    state = st.state
    role = role_of(root, state.remote_size, "Scatter")
    if role is ROOT:
        st.exchange(sends=[(_host(parse_blocks(sendbuf, "sendbuf", state.remote_size), "sendbuf").array, 0)])
    elif role is not IDLE:
        if is_in_place(recvbuf):
            raise errors.BufferValueError("recvbuf: Scatter on an intercommunicator cannot be MPI.IN_PLACE")
        recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
        whole = _whole(st, recv, state.size * recv.count)
        if whole is not None:
            st.exchange(recvs=[(whole, role)])
        _scatter(st, whole, recv, [recv.count // recv.unit] * state.size)


def scatterv(st: Stages, sendbuf: Any, recvbuf: Any, root: Any) -> None:
    state = st.state
    role = role_of(root, state.remote_size, "Scatterv")
    if role is ROOT:
        send = _host(parse_v(sendbuf, "sendbuf", state.remote_size), "sendbuf")
        st.exchange(sends=[(send.array[d:d + c], j) for j, (c, d) in enumerate(zip(send.counts, send.displs))])
    elif role is not IDLE:
        if is_in_place(recvbuf):
            raise errors.BufferValueError("recvbuf: Scatterv on an intercommunicator cannot be MPI.IN_PLACE")
        st.exchange(recvs=[(_host(parse(recvbuf, "recvbuf", writable=True), "recvbuf").array, role)])


def reduce(st: Stages, sendbuf: Any, recvbuf: Any, op: Any, root: Any) -> None:
    state = st.state
    role = role_of(root, state.remote_size, "Reduce")
    if role is ROOT:
        st.exchange(recvs=[(_host(parse(recvbuf, "recvbuf", writable=True), "recvbuf").array, 0)])
    elif role is not IDLE:
        partial = _reduced(st, _send(sendbuf, "Reduce"), op)
        if partial is not None:
            st.exchange(sends=[(partial, role)])


# The leader's share of a group's work; a group of one rank has nothing to gather, reduce or scatter, so its
# rank sends from (and receives into) the user's own buffers.


def _gathered(st: Stages, send: Buffer) -> Any:
    """This group's blocks, gathered in rank order at its leader (None elsewhere)."""
    if st.state.size == 1:
        return send.array
    out = _like(send, st.state.size * send.count) if st.state.rank == 0 else None
    st.local("Gather", _spec(send), None if out is None else _spec(send, out, send.count), 0)
    return out


def _reduced(st: Stages, send: Buffer, op: Any) -> Any:
    """``op`` over this group's ``send`` buffers, in rank order, at its leader (None elsewhere)."""
    if st.state.size == 1:
        return send.array
    out = _like(send, send.count) if st.state.rank == 0 else None
    st.local("Reduce", _spec(send), None if out is None else _spec(send, out), op, 0)
    return out


def _whole(st: Stages, recv: Buffer, count: int) -> Any:
    """Where the leader receives the ``count`` elements it then scatters in its group (None elsewhere)."""
    if st.state.size == 1:
        return recv.array
    return _like(recv, count) if st.state.rank == 0 else None


def _scatter(st: Stages, whole: Any, recv: Buffer, counts: list[int]) -> None:
    """Scatter the leader's ``whole`` in its group, ``counts[i]`` (in the datatype's units) to rank i."""
    if st.state.size == 1:
        return
    if len(set(counts)) == 1:    # equal blocks: Scatter (a tree), not the linear Scatterv
        st.local("Scatter", None if whole is None else _spec(recv, whole, counts[0] * recv.unit), _spec(recv), 0)
        return
    spec = None if whole is None else [whole, (counts, None)] + ([recv.datatype] if recv.datatype else [])
    st.local("Scatterv", spec, _spec(recv), 0)


def _reduce_and_swap(st: Stages, send: Buffer, op: Any, into: Any) -> None:
    """Reduce this group's ``send`` at its leader; the leaders swap results, the remote group's landing in ``into``."""
    partial = _reduced(st, send, op)
    if partial is not None:
        st.exchange(sends=[(partial, 0)], recvs=[(into, 0)])


def allreduce(st: Stages, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    send = _send(sendbuf, "Allreduce")
    recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
    _reduce_and_swap(st, send, op, recv.array)
    st.local("Bcast", _spec(recv), 0)


def reduce_scatter_block(st: Stages, sendbuf: Any, recvbuf: Any, op: Any) -> None:
    send = _send(sendbuf, "Reduce_scatter_block")
    recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
    whole = _whole(st, recv, st.state.size * recv.count)
    _reduce_and_swap(st, send, op, whole)
    _scatter(st, whole, recv, [recv.count // recv.unit] * st.state.size)


def reduce_scatter(st: Stages, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any) -> None:
    if recvcounts is None:   # each rank's own count, gathered in its group first (as on an intracommunicator)
        recvcounts = exchanged(st.state.local._state, "Reduce_scatter", (sendbuf, recvbuf, None, op))[2]
    send = _send(sendbuf, "Reduce_scatter")
    recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
    counts = [int(c) for c in recvcounts]
    if len(counts) != st.state.size:
        raise errors.CountError(f"recvcounts: Reduce_scatter needs {st.state.size} counts (one per rank of the "
                                f"local group), got {len(counts)}")
    whole = _whole(st, recv, sum(counts) * recv.unit)
    _reduce_and_swap(st, send, op, whole)
    _scatter(st, whole, recv, counts)


def allgather(st: Stages, sendbuf: Any, recvbuf: Any) -> None:
    state = st.state
    send = _send(sendbuf, "Allgather")
    recv = _host(parse_blocks(recvbuf, "recvbuf", state.remote_size, writable=True), "recvbuf")
    gathered = _gathered(st, send)
    if gathered is not None:
        st.exchange(sends=[(gathered, 0)], recvs=[(recv.array, 0)])
    st.local("Bcast", _spec(recv), 0)


def _pairwise(st: Stages, send: Callable[[int], Any], recv: Callable[[int], Any]) -> None:
    """Every rank exchanges with every remote rank, max(n, m) rounds: in round k, local rank i sends block
    (i + k) mod M to that remote rank and receives block (i - k) mod M from that one (M = max(n, m)).

    Remote rank j receives from local rank (j - k) mod M in round k, which is i exactly when j = (i + k) mod M:
    both ends of every pair meet in the same round; a peer index of M > m (or > n) is no rank, no message."""
    state = st.state
    n_rounds = max(state.size, state.remote_size)
    for k in range(n_rounds):
        to, frm = (state.rank + k) % n_rounds, (state.rank - k) % n_rounds
        st.exchange(sends=[(send(to), to)] if to < state.remote_size else [],
                    recvs=[(recv(frm), frm)] if frm < state.remote_size else [])


def allgatherv(st: Stages, sendbuf: Any, recvbuf: Any) -> None:
    send = _send(sendbuf, "Allgatherv").array
    recv = _host(parse_v(recvbuf, "recvbuf", st.state.remote_size, writable=True), "recvbuf")
    _pairwise(st, lambda j: send, lambda j: recv.array[recv.displs[j]:recv.displs[j] + recv.counts[j]])


def alltoall(st: Stages, sendbuf: Any, recvbuf: Any) -> None:
    m = st.state.remote_size
    if is_in_place(sendbuf):
        _send(sendbuf, "Alltoall")
    send = _host(parse_blocks(sendbuf, "sendbuf", m), "sendbuf").array
    recv = _host(parse_blocks(recvbuf, "recvbuf", m, writable=True), "recvbuf").array
    ns, nr = send.shape[0] // max(m, 1), recv.shape[0] // max(m, 1)
    _pairwise(st, lambda j: send[j * ns:(j + 1) * ns], lambda j: recv[j * nr:(j + 1) * nr])


def alltoallv(st: Stages, sendbuf: Any, recvbuf: Any) -> None:
    m = st.state.remote_size
    if is_in_place(sendbuf):
        _send(sendbuf, "Alltoallv")
    send = _host(parse_v(sendbuf, "sendbuf", m), "sendbuf")
    recv = _host(parse_v(recvbuf, "recvbuf", m, writable=True), "recvbuf")
    _pairwise(st, lambda j: send.array[send.displs[j]:send.displs[j] + send.counts[j]],
              lambda j: recv.array[recv.displs[j]:recv.displs[j] + recv.counts[j]])


def alltoallw(st: Stages, sendbuf: Any, recvbuf: Any) -> None:
    m = st.state.remote_size
    if is_in_place(sendbuf):
        _send(sendbuf, "Alltoallw")
    send, send_layout = as_bytes(parse_w(sendbuf, "sendbuf", m), "sendbuf", writable=False)
    recv, recv_layout = as_bytes(parse_w(recvbuf, "recvbuf", m, writable=True), "recvbuf",
                                           writable=True)
    _pairwise(st, lambda j: send[slice(*send_layout.span(j, j + 1))],
              lambda j: recv[slice(*recv_layout.span(j, j + 1))])


#: every buffer collective of an intercommunicator: mpi4py's method name -> its stages
STAGES: dict[str, Callable[..., None]] = {
    "Barrier": barrier, "Bcast": bcast, "Gather": gather, "Gatherv": gatherv, "Scatter": scatter,
    "Scatterv": scatterv, "Reduce": reduce, "Allreduce": allreduce, "Allgather": allgather,
    "Allgatherv": allgatherv, "Alltoall": alltoall, "Alltoallv": alltoallv, "Alltoallw": alltoallw,
    "Reduce_scatter_block": reduce_scatter_block, "Reduce_scatter": reduce_scatter,
}


# -- running them -----------------------------------------------------------------------------------------


def _built(state: InterState, method: str, args: tuple, algorithm: str,
           spans: list[tuple[int, int]] | None = None) -> tuple[Stages, BaseException | None]:
    """The call's stages, or the error its checks raised (no message either way).  Non-contiguous datatypes are
    packed now and unpacked when the call completes.

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
            STAGES[method](st, *args)
        if packed.pack:
            st.before.extend(packed.pack)
            for unpack in packed.unpack:
                st.step(unpack)
    except Exception as exc:
        return Stages(state), exc
    return st, None


def start(state: InterState, method: str, args: tuple, algorithm: str) -> Request:
    """A nonblocking intercommunicator call: the agreement, then the call's stages, started."""
    tag = state.merged._state.next_tag(NONBLOCKING)
    st, error = _built(state, method, args, algorithm)
    req = Request(*split(st.agreement(method, error) + st.rounds), tag, None, keep=args)
    req._launch()
    return req


#: per intercommunicator: the most blocking calls kept built, and the most bytes their messages hold in all
CACHED_CALLS, CACHED_BYTES = 16, 1 << 24


def run(state: InterState, method: str, args: tuple, algorithm: str, tag: int, key: Any) -> None:
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
    kept = state.calls.get(key) if key is not None else None
    if kept is not None:
        state.calls.move_to_end(key)
        execute(state, method, kept[0], tag)
        return
    st, error = _built(state, method, args, algorithm, shape_key(method, args, algorithm, values)[1] if key else None)
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
    if state.timeout is None and not nonblocking.outstanding():
        run_stretches(built.stretches, tag, execute_rounds)
        return
    req = Request(*split(built.rounds), tag, None)
    if state.timeout is not None:
        req.watch = (method, state.timeout, state.merged._state.rank)
    req._launch()
    req.Wait()


def init(state: InterState, method: str, args: tuple, algorithm: str) -> Prequest:
    """A persistent intercommunicator call: its arguments checked and its messages bound now."""
    tag = state.merged._state.next_tag(PERSISTENT)
    st, error = _built(state, method, args, algorithm)
    if error is not None:
        raise error
    pack = st.before

    def before() -> None:
        for step in pack:
            step()

    return Prequest(*split(st.rounds), tag, None, before if pack else None, keep=args)
