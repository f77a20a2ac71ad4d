"""Scratch memory: each plan allocates exactly the declared scratch buffers its rank uses, at their sizes."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.comm import preparing
from mpicoll.families.binomial import subtree

from conftest import WORLD, check

P, R = WORLD.size, WORLD.rank


def _scratch(plan) -> dict[str, int]:
    """Elements of each scratch array of a plan."""
    return {name: plan.arrays[name].size for name in plan.schedule.declared if name in plan.arrays}


@pytest.mark.skipif(P < 2, reason="one rank needs no scratch (the registry's one-rank schedule)")
def test_scratch_sizes_and_roles():
    comm = mpicoll.Comm(WORLD)
    n = 10
    x, y = np.arange(n, dtype=np.float64), np.empty(n)
    # the ring all-reduce: one "incoming" buffer as large as recv
    plan = preparing.prepare(comm._state, "Allreduce", (x, y, MPI.SUM,), "ring")
    check(_scratch(plan) == {"incoming": n}, f"ring allreduce scratch {_scratch(plan)}")
    check(plan.scratch_bytes == n * 8, f"ring allreduce scratch bytes {plan.scratch_bytes}")
    # reduce-scatter (pairwise): scratch laid out as send, p blocks of 3
    send, recv = np.ones(3 * P), np.empty(3)
    plan = preparing.prepare(comm._state, "Reduce_scatter_block", (send, recv, MPI.SUM,), "pairwise")
    check(all(size == 3 * P for size in _scratch(plan).values()), f"pairwise scratch {_scratch(plan)}")
    # binomial gather: an inner rank's "subtree" holds only its subtree's blocks
    mine, whole = np.full(2, float(R)), np.empty(2 * P)
    plan = preparing.prepare(comm._state, "Gather", (mine, whole if R == 0 else None, 0,), "binomial")
    inner = R != 0 and subtree(R, P) > 1
    expected = {"subtree": 2 * subtree(R, P)} if inner else {}
    check(_scratch(plan) == expected, f"binomial gather scratch {_scratch(plan)}, expected {expected}")
