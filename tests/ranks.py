"""What every test folder run under mpirun shares (``tests/mpi``, ``tests/torch``).

Only rank 0 prints pytest's report unless ``MPICOLL_TEST_ALL_RANKS`` is set;
each rank writes a JUnit report when the test driver asks for one
(``MPICOLL_JUNIT_PREFIX``).  :func:`check` agrees on an assertion's outcome
across ranks first, so a failure on one rank fails the test everywhere instead
of leaving the others waiting in the next collective.
"""

from __future__ import annotations

import os
import sys

from mpi4py import MPI

__all__ = ["WORLD", "configure", "check"]

WORLD = MPI.COMM_WORLD


def configure(config) -> None:
    """pytest's ``pytest_configure`` of such a folder: a JUnit report per rank, quiet ranks but rank 0."""
    prefix = os.environ.get("MPICOLL_JUNIT_PREFIX")
    if prefix:
        config.option.xmlpath = f"{prefix}{WORLD.rank}.xml"
    if WORLD.rank != 0 and not os.environ.get("MPICOLL_TEST_ALL_RANKS"):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (quiet ranks; reports still go to their XML)


def check(ok: bool, message: str = "") -> None:
    """Assert ``ok`` on every rank; fails everywhere, naming the ranks, if any rank is not ok."""
    flags = WORLD.allgather((bool(ok), message))
    bad = [r for r, (flag, _) in enumerate(flags) if not flag]
    assert not bad, f"failed on ranks {bad}: " + "; ".join(f"rank {r}: {flags[r][1]}" for r in bad)
