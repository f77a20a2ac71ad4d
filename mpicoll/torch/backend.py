"""The ``"mpicoll"`` backend's entry in torch: the creator torch calls for every process group."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist
from mpi4py import MPI

from mpicoll import config

from .elastic import survivors_communicator
from .process_group import BACKEND_NAME, Options, ProcessGroupMpicoll
from .rendezvous import check_world, group_communicator

__all__ = ["create_process_group", "register"]


def create_process_group(backend_opts: Any, options: Options | None = None) -> ProcessGroupMpicoll:
    """torch's creator for ``"mpicoll"`` (extended API): one process group over an MPI communicator.

    Parameters
    ----------
    backend_opts : torch._C._distributed_c10d._DistributedBackendOptions
        The group's rank and size, timeout and global ranks (empty for the default group).
    options : Options, optional
        ``pg_options`` of ``init_process_group`` or ``new_group``.

    Raises
    ------
    LaunchError
        torch's ranks are not MPI's (the job was not started by an MPI launcher).
    TypeError
        ``options`` is not an :class:`Options`.
    ValueError
        A malformed ``MPICOLL_*`` variable (see :mod:`mpicoll.config`).
    """
    config.current()   # a malformed MPICOLL_* variable raises here, on every rank, before any message
    if options is not None and not isinstance(options, Options):
        raise TypeError(f"mpicoll backend: pg_options must be mpicoll.torch.Options, got {type(options).__name__}")
    global_ranks = list(backend_opts.global_ranks_in_group)
    if not global_ranks:
        check_world(backend_opts.group_rank, backend_opts.group_size)
    comm = survivors_communicator(global_ranks) or group_communicator(global_ranks)   # (after a death: elastic)
    pg = ProcessGroupMpicoll(comm, backend_opts.timeout, options)
    if comm is not MPI.COMM_WORLD:
        comm.Free()  # the group made its own duplicates
    return pg


def register() -> None:
    """Register ``"mpicoll"`` with torch (CPU tensors), once."""
    if BACKEND_NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND_NAME, create_process_group, extended_api=True, devices=["cpu"])
