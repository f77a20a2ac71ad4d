"""Going on without a dead process on the ``"mpicoll"`` backend: a torch group of the survivors.

Under MPI's fault-tolerance extension (``mpirun --with-ft ulfm``) a process that dies makes the survivors'
collectives raise torch's ``DistBackendError``; the survivors then make a group of themselves and go on::

    failed = mpicoll.torch.failed_ranks()             # the same list on every survivor
    survivors = [r for r in range(world_size) if r not in failed]
    group = dist.new_group(survivors, use_local_synchronization=True)

:func:`failed_ranks` runs MPI's ``Shrink`` over the group's communicator (collective over its live processes,
which agree on the failed ones) and keeps the communicator it made; ``new_group`` of exactly those survivors
is made over it (:func:`survivors_communicator`, which the backend's creator asks first), where MPI would refuse
the ``MPI_Comm_create_group`` over ``COMM_WORLD`` that a new group otherwise takes once a process of it died.

torch 2.13's own ``dist.shrink_group`` cannot shrink this backend's groups: it registers the backend's new group
as a C++ ``c10d::Backend``, which a Python backend (a ``dist.ProcessGroup`` subclass, see
:mod:`mpicoll.torch.process_group`) is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.distributed as dist
from mpi4py import MPI

from mpicoll import config

__all__ = ["failed_ranks", "survivors_communicator"]

#: the survivors' communicator that failed_ranks made, by the survivors' global (torch) ranks: at most one, taken
#: by the new group of those ranks
_KEPT: dict[tuple[int, ...], MPI.Intracomm] = {}


def failed_ranks(group: Any = None) -> list[int]:
    """The global ranks of ``group``'s processes (default: the default group's) that have failed, the same
    sorted list on every survivor.  Collective over the survivors: MPI's ``Shrink`` agrees on them, and the
    communicator of the survivors it makes is kept for the ``dist.new_group`` of the survivors that follows.

    Raises
    ------
    RuntimeError
        The job does not run with MPI's fault-tolerance extension.
    TypeError
        ``group`` is not a group of the ``"mpicoll"`` backend.
    """
    if not config.fault_tolerant():
        raise RuntimeError("mpicoll backend: failed_ranks needs MPI's fault-tolerance extension (mpirun --with-ft "
                           "ulfm); without it a process that dies ends the job")
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if getattr(pg, "getBackendName", lambda: "")() != "mpicoll":
        raise TypeError(f"mpicoll backend: {pg!r} is not a group of the \"mpicoll\" backend")
    comm = pg._p2p
    made = MPI.Intracomm(MPI.Comm.Shrink(comm))
    groups = [comm.Get_group(), made.Get_group()]
    try:
        kept = MPI.Group.Translate_ranks(groups[1], list(range(made.Get_size())), groups[0])
    finally:
        for g in groups:
            g.Free()
    ranks = dist.get_process_group_ranks(pg)       # group rank -> global rank
    for older in _KEPT.values():
        older.Free()
    _KEPT.clear()
    _KEPT[tuple(ranks[r] for r in kept)] = made
    return sorted(set(ranks) - {ranks[r] for r in kept})


def survivors_communicator(global_ranks: Sequence[int]) -> MPI.Intracomm | None:
    """The communicator :func:`failed_ranks` made, taken, where ``global_ranks`` are its survivors in order."""
    return _KEPT.pop(tuple(global_ranks), None)
