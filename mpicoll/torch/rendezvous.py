"""Rendezvous from MPI: torch's ``env://`` variables filled in from the MPI job, and each group's communicator.

``dist.init_process_group("mpicoll")`` with no other setup reads ``env://``:
:func:`fill_environment` (run when :mod:`mpicoll.torch` is imported, on every
rank: it is collective over ``MPI.COMM_WORLD``) sets ``RANK`` and
``WORLD_SIZE`` from MPI, and ``MASTER_ADDR``/``MASTER_PORT`` to a free port of
rank 0, for the ones the user did not set.  torch then makes its TCP store
there, as with any backend (torch uses the store for its own bookkeeping;
the collectives never touch it).  :func:`group_communicator` gives a group's
MPI communicator from torch's list of its global ranks.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from mpi4py import MPI

__all__ = ["LaunchError", "fill_environment", "group_communicator"]

_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class LaunchError(RuntimeError):
    """torch's ranks do not match MPI's (the job was not started by an MPI launcher, or RANK is wrong)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _address(hosts: Sequence[str]) -> str:
    """Rank 0's address: the loopback when every rank runs on its host, else its name's address."""
    if all(h == hosts[0] for h in hosts):
        return "127.0.0.1"
    return socket.gethostbyname(hosts[0])


def fill_environment(world: MPI.Intracomm = MPI.COMM_WORLD) -> dict[str, str]:
    """Set the ``env://`` variables the user left unset, from MPI (collective over ``world``).

    Returns
    -------
    dict of str to str
        The variables this call set (empty when the user had set all four).
    """
    missing = [v for v in _VARIABLES if v not in os.environ]
    # every rank must take part in the collective calls below, so the decision is made together
    if not world.allreduce(len(missing), op=MPI.MAX):
        return {}
    hosts = world.allgather(socket.gethostname())
    port = world.bcast(_free_port() if world.Get_rank() == 0 else None, root=0)
    values = {"RANK": str(world.Get_rank()), "WORLD_SIZE": str(world.Get_size()),
              "MASTER_ADDR": _address(hosts), "MASTER_PORT": str(port)}
    chosen = {v: values[v] for v in missing}
    os.environ.update(chosen)
    return chosen


def check_world(rank: int, size: int, world: MPI.Intracomm = MPI.COMM_WORLD) -> None:
    """Raise :class:`LaunchError` unless torch's rank and size of the default group are MPI's."""
    if (rank, size) != (world.Get_rank(), world.Get_size()):
        raise LaunchError(
            f"mpicoll backend: torch says rank {rank} of {size}, MPI says rank {world.Get_rank()} of "
            f"{world.Get_size()}; start the job with mpirun, srun or python -m mpicoll.launch "
            "(not torchrun), and leave RANK and WORLD_SIZE unset or equal to MPI's")


def group_communicator(global_ranks: Sequence[int], world: MPI.Intracomm = MPI.COMM_WORLD) -> MPI.Intracomm:
    """The communicator of a group given torch's global ranks in group order ([] or all: the world).

    Collective over the group's members only (``MPI_Comm_create_group``), as torch calls a backend's
    creator on the members of a new group only.
    """
    ranks = list(global_ranks)
    if not ranks or ranks == list(range(world.Get_size())):
        return world
    group = world.Get_group().Incl(ranks)
    try:
        return world.Create_group(group)
    finally:
        group.Free()
