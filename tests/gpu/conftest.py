"""GPU tests: CuPy buffers on a real device, run under MPI.

    python -m mpicoll.launch -n 2 -m pytest tests/gpu --with-mpi -q

Every test is skipped (cleanly, at collection) without CuPy or without a GPU.
Each rank uses GPU ``rank % device_count``.
"""

from __future__ import annotations

import os
import sys

import pytest
from mpi4py import MPI

import mpicoll

WORLD = MPI.COMM_WORLD
sys.path.insert(0, os.path.dirname(__file__))


def _gpu() -> str | None:
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no usable GPU ({exc})"
    if count < 1:
        return "no GPU"
    cupy.cuda.Device(WORLD.rank % count).use()
    return None


WHY_NOT = _gpu()


def pytest_collection_modifyitems(config, items):
    if WHY_NOT is not None:
        skip = pytest.mark.skip(reason=WHY_NOT)
        for item in items:
            item.add_marker(skip)


def check(ok: bool, message: str = "") -> None:
    """Assert ``ok`` on every rank (fails everywhere, naming the ranks, if any rank is not ok)."""
    flags = WORLD.allgather((bool(ok), message))
    bad = [r for r, (flag, _) in enumerate(flags) if not flag]
    assert not bad, f"failed on ranks {bad}: " + "; ".join(f"rank {r}: {flags[r][1]}" for r in bad)


@pytest.fixture
def comm():
    yield mpicoll.Comm(WORLD)
