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
Barrier                     the agreement alone (a dissemination over both groups: nobody leaves early)
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

Each function below adds one call's stages to a :class:`~mpicoll.comm.inter_build.Stages`; the agreement that
comes first, and running the stages, are :mod:`mpicoll.comm.inter`'s.

Buffers are host memory (NumPy, bytes-like, ``MPI.memory``, DLPack or CUDA array
interface over host memory, any datatype mpicoll takes); ``MPI.IN_PLACE`` is
erroneous on an intercommunicator, as in MPI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls.alltoallw import as_bytes, parse_w
from mpicoll.comm.preparing import exchanged
from mpicoll.data.buffers import Buffer, is_in_place, parse, parse_blocks, parse_v

if TYPE_CHECKING:
    from mpicoll.comm.inter_build import Stages

__all__ = ["STAGES", "ROOT", "IDLE", "role_of", "group_reduce", "Reducer"]

#: how a reducing call's group reduces its contributions at its leader: ``(stages, send, op) -> the leader's
#: result (None elsewhere)``; :func:`group_reduce` by default
Reducer = Callable[["Stages", Buffer, Any], Any]


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
    """The agreement alone: a dissemination over both groups returns on no rank before every rank has entered."""


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


def reduce(st: Stages, sendbuf: Any, recvbuf: Any, op: Any, root: Any, *, reduced: Reducer | None = None) -> None:
    state = st.state
    role = role_of(root, state.remote_size, "Reduce")
    if role is ROOT:
        st.exchange(recvs=[(_host(parse(recvbuf, "recvbuf", writable=True), "recvbuf").array, 0)])
    elif role is not IDLE:
        partial = (reduced or group_reduce)(st, _send(sendbuf, "Reduce"), op)
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


def group_reduce(st: Stages, send: Buffer, op: Any) -> Any:
    """``op`` over this group's ``send`` buffers, in rank order, at its leader (None elsewhere): the
    reducing calls' default ``reduced`` (:mod:`mpicoll.comm.reproducible_inter` passes its own)."""
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


def _reduce_and_swap(st: Stages, send: Buffer, op: Any, into: Any, reduced: Reducer | None) -> None:
    """Reduce this group's ``send`` at its leader (``reduced``, default :func:`group_reduce`); the leaders swap
    results, the remote group's landing in ``into``."""
    partial = (reduced or group_reduce)(st, send, op)
    if partial is not None:
        st.exchange(sends=[(partial, 0)], recvs=[(into, 0)])


def allreduce(st: Stages, sendbuf: Any, recvbuf: Any, op: Any, *, reduced: Reducer | None = None) -> None:
    send = _send(sendbuf, "Allreduce")
    recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
    _reduce_and_swap(st, send, op, recv.array, reduced)
    st.local("Bcast", _spec(recv), 0)


def reduce_scatter_block(st: Stages, sendbuf: Any, recvbuf: Any, op: Any, *, reduced: Reducer | None = None) -> None:
    send = _send(sendbuf, "Reduce_scatter_block")
    recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
    whole = _whole(st, recv, st.state.size * recv.count)
    _reduce_and_swap(st, send, op, whole, reduced)
    _scatter(st, whole, recv, [recv.count // recv.unit] * st.state.size)


def reduce_scatter(st: Stages, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any, *,
                   reduced: Reducer | None = None) -> None:
    if recvcounts is None:   # each rank's own count, gathered in its group first (as on an intracommunicator)
        recvcounts = exchanged(st.state.local._state, "Reduce_scatter", (sendbuf, recvbuf, None, op))[2]
    send = _send(sendbuf, "Reduce_scatter")
    recv = _host(parse(recvbuf, "recvbuf", writable=True), "recvbuf")
    counts = [int(c) for c in recvcounts]
    if len(counts) != st.state.size:
        raise errors.CountError(f"recvcounts: Reduce_scatter needs {st.state.size} counts (one per rank of the "
                                f"local group), got {len(counts)}")
    whole = _whole(st, recv, sum(counts) * recv.unit)
    _reduce_and_swap(st, send, op, whole, reduced)
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
