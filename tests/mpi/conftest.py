"""MPI tests run under mpirun with pytest-mpi: ``mpirun -n N python -m pytest tests/mpi --with-mpi``.

Every test runs on all ranks.  Assertions go through :func:`check`, which
agrees on the outcome across ranks first, so a failure on one rank fails the
test everywhere instead of leaving the others waiting in the next collective.
Only rank 0 prints pytest's report unless ``MPICOLL_TEST_ALL_RANKS`` is set;
each rank writes a JUnit report when the test driver asks for one.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.calls.table import TABLE

WORLD = MPI.COMM_WORLD


def pytest_configure(config):
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


@pytest.fixture
def comm():
    c = mpicoll.Comm(WORLD)
    yield c


def same_bits_everywhere(array: np.ndarray) -> bool:
    """True when every rank holds bitwise-identical data."""
    mine = np.ascontiguousarray(array).view(np.uint8).tobytes()
    return all(other == mine for other in WORLD.allgather(mine))


def counting_prepare(monkeypatch, comm: mpicoll.Comm, method: str) -> list:
    """A list that grows by one each time ``method`` is prepared (checked and bound) on ``comm``."""
    calls: list = []
    collective = TABLE[method]

    def prepare(*args, **kwargs):
        calls.append(1)
        return collective.prepare(*args, **kwargs)

    monkeypatch.setitem(TABLE, method, dataclasses.replace(collective, prepare=prepare))
    return calls
