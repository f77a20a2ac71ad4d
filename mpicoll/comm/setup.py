"""Making a communicator's state: the one place where mpicoll talks to the peers on its own behalf.

A communicator needs three things from its peers before its first call: a
private duplicate (so that mpicoll's messages never match a user's receive),
the tuning and calibration data of its rank 0 (so that every rank chooses the
same algorithm), and the node layout (so that every rank builds its schedule for
the same nodes).  They are obtained here, when the communicator is made, at a
point every rank reaches whatever the arguments of its later calls:

- **wrapped** (``mpicoll.Comm(comm)``, collective over ``comm``): ``Idup``,
  then one allgather of each rank's host name, with rank 0's data attached;
- **derived** (``Dup``, ``Split``, ``Create``, ... of an ``mpicoll.Comm``,
  already collective in MPI): ``Idup`` only; the data are the parent's, and the
  node layout follows from the parent's by translating ranks;
- **an intercommunicator** (``mpicoll.Intercomm(inter)`` or ``Create_intercomm``,
  collective over both groups): ``Merge`` into one communicator of both groups,
  wrapped as above, and ``Split`` of that into this rank's group, derived from it
  (:func:`intercomm`).

So preparing a call never sends a message, the first nonblocking call returns
at once, and a rank whose arguments are wrong still finds its peers in the
call's own schedule.  With a timeout every wait here is watched.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import config
from mpicoll.comm.inter import InterState
from mpicoll.ir.nodes import Nodes, normalized, restricted
from mpicoll.program.state import CommState
from mpicoll.selection import tuning

__all__ = ["wrapped", "derived", "intercomm", "check_thread_level"]


def check_thread_level() -> None:
    """A communicator made outside the main thread needs ``MPI_THREAD_MULTIPLE`` (mpi4py asks for it by default):
    a clear error where the MPI library gives less, instead of corrupted messages later."""
    if threading.current_thread() is threading.main_thread():
        return
    provided = MPI.Query_thread()
    if provided < MPI.THREAD_MULTIPLE:
        names = {MPI.THREAD_SINGLE: "SINGLE", MPI.THREAD_FUNNELED: "FUNNELED", MPI.THREAD_SERIALIZED: "SERIALIZED"}
        raise RuntimeError(f"mpicoll: a communicator used from several threads needs MPI_THREAD_MULTIPLE, but the "
                           f"MPI library provides MPI_THREAD_{names.get(provided, provided)} "
                           "(see mpi4py.rc.thread_level)")


def _tag_ub(settings: config.Config) -> int:
    """The largest tag a communicator's messages carry: ``MPI.TAG_UB`` (an attribute of ``COMM_WORLD`` only),
    or less where ``MPICOLL_TAG_UB`` says so."""
    tag_ub = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)
    return min(tag_ub, settings.tag_ub) if settings.tag_ub else tag_ub


def wrapped(comm: MPI.Intracomm, timeout: float | None) -> CommState:
    """The state of a communicator wrapped as it is (collective over ``comm``)."""
    check_thread_level()
    settings = config.current()
    private = _duplicate(comm, timeout)
    rank = private.Get_rank()
    data = ""
    if rank == 0:
        try:
            data = tuning.local().to_json()
        except (OSError, ValueError) as exc:     # every rank raises it, below
            data = json.dumps({"error": f"mpicoll on rank 0: {exc}"})
    hosts_and_data = _allgather(private, (MPI.Get_processor_name(), data), timeout)
    try:
        agreed = tuning.Shared.from_json(hosts_and_data[0][1])
    except ValueError:
        private.Free()
        raise
    nodes: Nodes = settings.node_size or normalized(tuple(host for host, _ in hosts_and_data))
    return CommState(private, agreed, nodes, timeout=timeout, debug=settings.debug, tag_ub=_tag_ub(settings))


def derived(comm: MPI.Intracomm, parent: CommState, timeout: float | None) -> CommState:
    """The state of ``comm``, made from ``parent``'s communicator by MPI: no message beyond ``Idup``."""
    check_thread_level()
    settings = config.current()
    private = _duplicate(comm, timeout)
    if settings.node_size:
        nodes: Nodes = settings.node_size
    else:
        members = comm.group.Translate_ranks(list(range(comm.Get_size())), parent.private.group)
        nodes = restricted(parent.size, parent.nodes, members)
    return CommState(private, parent.agreed, nodes, timeout=timeout, debug=settings.debug,
                     tag_ub=_tag_ub(settings))


def intercomm(comm: MPI.Intercomm, timeout: float | None, wrap: Callable[[MPI.Intracomm, float | None], Any],
              derive: Callable[[MPI.Intracomm, Any], Any]) -> InterState:
    """The state of intercommunicator ``comm`` (collective over both groups).

    The two groups merged (``wrap``: an ``mpicoll.Comm`` made as :func:`wrapped` makes one) carry the
    agreement and the messages between groups; this rank's group, split from it (``derive``: made as
    :func:`derived` makes one), the local stages.  Which group comes first in the merge does not matter:
    every rank learns where each remote rank landed.
    """
    check_thread_level()
    joined = MPI.Intercomm.Merge(comm, False)
    groups = [comm.Get_group(), comm.Get_remote_group(), joined.Get_group()]
    try:
        mine = MPI.Group.Translate_ranks(groups[0], list(range(groups[0].Get_size())), groups[2])
        remote = MPI.Group.Translate_ranks(groups[1], list(range(groups[1].Get_size())), groups[2])
    finally:
        for group in groups:
            group.Free()
    part = joined.Split(0 if min(mine) < min(remote) else 1, comm.Get_rank())
    merged = wrap(joined, timeout)
    return InterState(merged, derive(part, merged), tuple(remote))


def _duplicate(comm: MPI.Intracomm, timeout: float | None) -> MPI.Intracomm:
    """mpicoll's private duplicate of ``comm`` (``Idup``, watched under a timeout)."""
    dup, request = MPI.Intracomm.Idup(comm)
    _wait(request, comm, "making mpicoll's private communicator", timeout)
    return MPI.Intracomm(dup)


def _allgather(comm: MPI.Intracomm, obj: Any, timeout: float | None) -> list:
    """Every rank's ``obj`` (JSON-able), in rank order: lengths, then bytes, both watched under a timeout."""
    data = np.frombuffer(json.dumps(obj).encode(), np.uint8)
    sizes = np.zeros(comm.Get_size(), np.int64)
    what = "exchanging the communicator's setup data"
    _wait(comm.Iallgather(np.array([data.size], np.int64), sizes), comm, what, timeout)
    displs = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    out = np.empty(int(sizes.sum()), np.uint8)
    _wait(comm.Iallgatherv(data, [out, (sizes, displs), MPI.BYTE]), comm, what, timeout)
    return [tuple(json.loads(out[d:d + n].tobytes())) for d, n in zip(displs, sizes)]


def _wait(request: MPI.Request, comm: MPI.Intracomm, what: str, timeout: float | None) -> None:
    if timeout is None:
        request.Wait()
        return
    from mpicoll.engine.watchdog import wait_mpi  # noqa: PLC0415 (only with a timeout)

    rank = comm.Get_rank()
    wait_mpi(request, what, timeout, [r for r in range(comm.Get_size()) if r != rank], rank)
