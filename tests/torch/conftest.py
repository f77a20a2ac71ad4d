"""torch.distributed on mpicoll, under MPI: ``mpirun -n N python -m pytest tests/torch --with-mpi``.

Skipped as a whole where torch is not installed.  The session initialises the
default process group on ``"mpicoll"`` (from MPI, with no other setup) and one
Gloo group over the same ranks, so that a test can run a call on both and
compare each with the right answer (computed here from every rank's input,
which every rank can rebuild: Gloo is wrong on some calls, so it is never the
only reference).  Assertions go through :func:`check`, which agrees on the
outcome across ranks, so a failure on one rank fails the test everywhere.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/: ranks.py
from ranks import WORLD, check, configure  # noqa: E402, F401  (check: the test modules take it from here)

try:
    import torch  # noqa: F401
except ImportError:  # every test module skips itself (pytest.importorskip): nothing here runs without torch
    torch = None


def pytest_configure(config):
    configure(config)


def raises_everywhere(exc_type: type[BaseException], fn, match: str = "") -> None:
    """Call ``fn``; check that it raised ``exc_type`` (with ``match`` in the message) on every rank."""
    try:
        fn()
    except exc_type as exc:
        check(match in str(exc), f"raised {exc!r}, expected {match!r} in the message")
    except Exception as exc:  # noqa: BLE001 - reported on every rank
        check(False, f"raised {type(exc).__name__}: {exc}, expected {exc_type.__name__}")
    else:
        check(False, f"no {exc_type.__name__} raised")


if torch is not None:
    import torch.distributed as dist

    import mpicoll.torch  # noqa: F401  (registers "mpicoll", fills RANK/WORLD_SIZE/MASTER_* from MPI)

    @pytest.fixture(scope="session", autouse=True)
    def default_group():
        """The default group on mpicoll, for the whole session."""
        dist.init_process_group("mpicoll")
        yield dist.group.WORLD
        WORLD.Barrier()
        dist.destroy_process_group()

    @pytest.fixture(scope="session")
    def gloo(default_group):
        """A Gloo group over every rank (for side-by-side checks)."""
        return dist.new_group(backend="gloo")

    @pytest.fixture
    def rank():
        return dist.get_rank()

    @pytest.fixture
    def size():
        return dist.get_world_size()
