"""torch.distributed on mpicoll: importing this module registers the backend ``"mpicoll"``.

Under ``mpirun``, ``srun`` or ``python -m mpicoll.launch``::

    import torch.distributed as dist
    import mpicoll.torch  # registers "mpicoll"; fills RANK, WORLD_SIZE, MASTER_ADDR/PORT from MPI

    dist.init_process_group("mpicoll")
    dist.all_reduce(tensor)

Importing is collective over ``MPI.COMM_WORLD`` (every rank must import it):
rank 0 picks a free port for torch's store and every rank learns it.  Set
``MPICOLL_TORCH_NO_ENV=1`` to leave the environment alone (``init_method``
given by hand).  ``import mpicoll`` does not import this module.
"""

from __future__ import annotations

from mpi4py import MPI

from mpicoll import config
from mpicoll.errors import MismatchError

from .backend import create_process_group, register
from .elastic import failed_ranks
from .process_group import BACKEND_NAME, Options, ProcessGroupMpicoll
from .rendezvous import LaunchError, fill_environment
from .work import Desync, Timeout

__all__ = ["BACKEND_NAME", "Desync", "LaunchError", "MismatchError", "Options", "ProcessGroupMpicoll", "Timeout",
           "create_process_group", "failed_ranks", "fill_environment", "register"]

register()
if not config.current().torch_no_env:
    fill_environment(MPI.COMM_WORLD)
