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


@pytest.mark.parametrize("nonblocking", [False, True])
@pytest.mark.parametrize("method", ["Alltoall", "Reduce_scatter_block", "Allgatherv"])
def test_an_in_place_call_hits_the_plan_cache_and_keeps_no_user_array_alive(method, nonblocking):
    """An in-place call computes into scratch and copies its result into the caller's buffer when it finishes;
    that copy reads the buffer by address (Plan.OUT), so the plan is cached like any other (it was prepared
    again on every call: 10x the out-of-place call's time at 4 and 16 processes), holds no user array, and a
    repeated call with new contents gets the new result."""
    import gc
    import weakref

    comm = mpicoll.Comm(WORLD.Dup())
    plans = comm._state.request_plans if nonblocking else comm._state.plans

    def call(name: str, *args, **kwargs) -> None:   # (the I* form waited on: its result too is the new one)
        if nonblocking:
            getattr(comm, "I" + name[0].lower() + name[1:])(*args, **kwargs).Wait()
        else:
            getattr(comm, name)(*args, **kwargs)

    n, gap = 3, 2     # Allgatherv: blocks 2 elements apart, which the hierarchical algorithm gathers in scratch
    buf = np.zeros((n + gap) * P)
    displs = [j * (n + gap) for j in range(P)]
    wrong = []
    for step in range(4):
        if method == "Alltoall":        # block j of rank r's result: block r of rank j's buffer
            buf[:n * P] = np.arange(n * P) * (R + 1) + step
            call("Alltoall", MPI.IN_PLACE, buf[:n * P])
            got, want = buf[:n * P], np.concatenate([np.arange(R * n, R * n + n) * (j + 1) + step for j in range(P)])
        elif method == "Reduce_scatter_block":
            buf[:n * P] = np.arange(n * P) * (R + 1) + step
            call("Reduce_scatter_block", MPI.IN_PLACE, buf[:n * P], MPI.SUM)
            got, want = buf[:n], np.arange(R * n, R * n + n) * sum(range(1, P + 1)) + P * step
        else:                           # every rank's own block, where it lies
            buf[displs[R]:displs[R] + n] = np.arange(n) * (R + 1) + step
            call("Allgatherv", MPI.IN_PLACE, [buf, [n] * P, displs, MPI.DOUBLE],
                 algorithm="hierarchical" if P > 1 else "auto")
            got = np.concatenate([buf[d:d + n] for d in displs])
            want = np.concatenate([np.arange(n) * (j + 1) + step for j in range(P)])
        wrong += [] if np.array_equal(got, want) else [step]
    entries = len(plans.data)
    alive = weakref.ref(buf)
    del buf, got
    gc.collect()
    check(not wrong and entries == 1 and alive() is None, f"wrong at steps {wrong}, {entries} cache entries, "
          f"user array {'kept alive' if alive() is not None else 'freed'}")
    comm.Free()
