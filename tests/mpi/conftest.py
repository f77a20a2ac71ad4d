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

import mpicoll
from mpicoll.calls.table import TABLE

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/: ranks.py
from ranks import WORLD, check, configure  # noqa: E402, F401  (check: the test modules take it from here)


def pytest_configure(config):
    configure(config)


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
