"""The reproducible sums of an intercommunicator, and the entry of the four summing calls both kinds have.

On an intercommunicator, ``Allreduce``, ``Reduce``, ``Reduce_scatter_block`` and ``Reduce_scatter`` give
each receiving group the reduction of the *other* group's contributions.  mpicoll writes them as stages
(:mod:`mpicoll.comm.inter_stages`): the sending group reduces its contributions at its leader, the leader
sends the result across, and the receiving group spreads it (Bcast, Scatter(v), or nothing for a root).
With ``reproducible=True`` (or ``MPICOLL_REPRODUCIBLE=1``) on floats with ``MPI.SUM``, the first stage is
the sending group's reproducible ``Reduce`` to its leader (the rounds and steps of
:class:`mpicoll.comm.reproducible_requests.RequestStages` on the group's private communicator): its
result is, bit for bit, what an intracommunicator's reproducible call gives for the same contributions
(it depends only on their multiset), and the stages after it move that float result unchanged.  So
the receiving group gets the same bits as ``Allreduce(..., reproducible=True)`` on an intracommunicator
of the remote group's ranks, whatever the group sizes or the order of the ranks.

A group of one rank runs the reproducible ``Reduce`` too (its value, with -0.0, infinities and NaN as the
mode gives them).  Other ops and element types go through :func:`~mpicoll.comm.inter_stages.group_reduce`,
as without the option; the intercommunicator's agreement comes first, so a rank whose arguments fail
(found while the stages are built) makes every rank of both groups raise before any other message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.comm import inter
from mpicoll.comm import reproducible as blocking
from mpicoll.comm import reproducible_requests as requests
from mpicoll.comm.inter import InterState
from mpicoll.comm.inter_build import Stages
from mpicoll.comm.inter_stages import STAGES, group_reduce
from mpicoll.data.buffers import Buffer, is_in_place, parse
from mpicoll.data.datatypes import packing
from mpicoll.engine.forms import BLOCKING
from mpicoll.engine.requests import Prequest, Request

__all__ = ["run", "start", "init", "group_sum", "REPRODUCIBLE_STAGES"]


def group_sum(st: Stages, send: Buffer, op: Any) -> np.ndarray | None:
    """This group's contributions ``send`` reduced at its leader (None elsewhere), as rounds and steps added to
    ``st``: for ``MPI.SUM`` of floats, the reproducible ``Reduce`` of the group (the codes of ``send`` are
    computed now and again before every ``Start`` of a persistent call); else :func:`group_reduce`.

    Raises
    ------
    ValueError, TypeError
        This rank's arguments failed a check of the reproducible mode (the agreement then tells every rank).
    """
    local = st.state.local
    out = np.empty(send.count, send.dtype) if st.state.rank == 0 else None
    args = (send.array, out, op, 0)
    accepted = blocking.accept(local, "Reduce", True, args)
    if accepted is None:          # not a sum of floats: exact already, or not a sum
        return group_reduce(st, send, op)
    call, failure = accepted
    if failure is not None:
        raise failure
    stages = requests.RequestStages(local, "Reduce", "auto", args, call, None)
    stages.fill()
    st.before.append(stages.fill)
    st.rounds.extend(stages.rounds)
    return out


def _checked(method: str) -> Callable[..., None]:
    """``STAGES[method]`` with :func:`group_sum` as its group's reduction; a call that receives and sends
    (all but ``Reduce``) first checks, as an intracommunicator's reproducible call does, that with
    ``MPI.SUM`` its ``recvbuf`` holds the floats of its ``sendbuf``: the float result received from the
    other group must land in the type it was summed in."""
    stages = functools.partial(STAGES[method], reduced=group_sum)
    if method == "Reduce":
        return stages
    op_at = blocking.METHODS[method]

    def checked(st: Stages, *args: Any) -> None:
        if args[op_at] == MPI.SUM and not is_in_place(args[0]):     # (the stages refuse MPI.IN_PLACE)
            with packing():     # a parse thrown away (a non-contiguous datatype's packing too): types only
                send, recv = parse(args[0], "sendbuf").dtype, parse(args[1], "recvbuf").dtype
            if send != recv and blocking.real_format(send) is not None:
                raise errors.TypeMismatchError(f"{method}(reproducible=True): sendbuf holds {send}, recvbuf {recv}")
        stages(st, *args)

    return checked


#: the stages of the four reducing calls with :func:`group_sum` as their group's reduction
REPRODUCIBLE_STAGES = {method: _checked(method)
                       for method in ("Allreduce", "Reduce", "Reduce_scatter_block", "Reduce_scatter")}


def _inter(comm: Any, reproducible: bool | None) -> InterState | None:
    """``comm``'s state where it is an intercommunicator and the call runs in the reproducible mode, else None."""
    state = comm._state
    return state if type(state) is InterState and blocking.wanted(reproducible) else None


def run(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> None:
    """The blocking ``method`` (Allreduce, Reduce, Reduce_scatter_block or Reduce_scatter) of ``comm`` with
    ``reproducible`` (true, or None with ``MPICOLL_REPRODUCIBLE`` set): an intercommunicator's as stages,
    with the blocking call's tag; an intracommunicator's by :func:`mpicoll.comm.reproducible_requests.run`."""
    if type(comm._state) is not InterState:
        return requests.run(comm, method, algorithm, reproducible, *args)
    state = _inter(comm, reproducible)
    if state is None:
        return getattr(comm, method)(*args, algorithm=algorithm, reproducible=False)
    tag = state.merged._state.next_tag(BLOCKING)
    with inter.noted(state, method, tag):
        inter.run(state, method, args, algorithm, tag, None, REPRODUCIBLE_STAGES)
    return None


def start(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> Request:
    """The nonblocking form of ``method`` (see :func:`run`)."""
    if type(comm._state) is not InterState:
        return requests.start(comm, method, algorithm, reproducible, *args)
    state = _inter(comm, reproducible)
    if state is None:
        return getattr(comm, requests.nonblocking_name(method))(*args, algorithm=algorithm, reproducible=False)
    return inter.start(state, method, args, algorithm, REPRODUCIBLE_STAGES)


def init(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> Prequest:
    """The persistent form of ``method`` (see :func:`run`): every ``Start()`` sums the buffers' current contents."""
    if type(comm._state) is not InterState:
        return requests.init(comm, method, algorithm, reproducible, *args)
    state = _inter(comm, reproducible)
    if state is None:
        return getattr(comm, method + "_init")(*args, algorithm=algorithm, reproducible=False)
    return inter.init(state, method, args, algorithm, REPRODUCIBLE_STAGES)
