"""reproducible=True on the nonblocking (I*) and persistent (*_init) forms: the bits of the blocking form.

The blocking form is tested against a one-process reference in ``tests/mpi/test_reproducible.py``; here each
request form is compared with it bit for bit, on the same data (with zeros of both signs, infinities and
NaN), on a fresh communicator, with several requests in flight, after a rank's bad arguments, and under
``MPICOLL_REPRODUCIBLE=1``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from mpi4py import MPI
from test_reproducible import bits, permutation, table

import mpicoll

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
SIZES = [0, 5, 3000]       # 5: the small Allreduce's gather; 3000: auto's scattered one (2 ranks), others' two steps


def _calls(count: int):
    """(method, blocking arguments given the contribution, what to compare) for each summing collective."""
    block = max(count // P, 1)
    counts = [(j * 7) % 3 * 5 for j in range(P)]
    return [
        ("Allreduce", lambda x: (x, np.full(count, 7.0))),
        ("Reduce", lambda x: (x, np.full(count, 7.0), MPI.SUM, P - 1)),
        ("Reduce_scatter_block", lambda x: (np.resize(x, block * P), np.full(block, 7.0))),
        ("Reduce_scatter", lambda x: (np.resize(x, sum(counts)), np.full(counts[R], 7.0), counts)),
        ("Scan", lambda x: (x, np.full(count, 7.0))),
        ("Exscan", lambda x: (x, np.full(count, 7.0))),
    ]


def _nonblocking(method: str) -> str:
    return "I" + method[0].lower() + method[1:]


@pytest.mark.parametrize("count", SIZES)
def test_every_request_form_gives_the_blocking_bits(count):
    comm = mpicoll.Comm(WORLD.Dup())          # a fresh communicator: its first calls are these
    try:
        rows = table(P, count, np.float64, 11, special=True)
        mine = rows[permutation(11)[R]].copy()
        for method, arguments in _calls(count):
            expected = arguments(mine)
            getattr(comm, method)(*expected, reproducible=True)
            started = arguments(mine)
            getattr(comm, _nonblocking(method))(*started, reproducible=True).Wait()
            check(bits(started[1]) == bits(expected[1]), f"{_nonblocking(method)} count {count}")
            bound = arguments(np.zeros_like(mine))   # contents changed before each Start
            req = getattr(comm, method + "_init")(*bound, reproducible=True)
            for scale in (1.0, -3.0):
                again = arguments(mine * scale)
                bound[0][...] = again[0]
                getattr(comm, method)(*again, reproducible=True)
                req.Start()
                req.Wait()
                check(bits(bound[1]) == bits(again[1]), f"{method}_init count {count} scale {scale}")
            req.Free()
    finally:
        comm.Free()


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("allreduce"))
def test_iallreduce_every_algorithm_and_float32(comm, algorithm):
    rows = table(P, 777, np.float32, 12, special=True)
    expected = np.empty(777, np.float32)
    comm.Allreduce(rows[R], expected, algorithm="linear", reproducible=True)
    out = np.full(777, 7, np.float32)
    comm.Iallreduce(rows[permutation(12)[R]], out, algorithm=algorithm, reproducible=True).Wait()
    check(bits(out) == bits(expected), algorithm)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, ml_dtypes.bfloat16])
def test_iallreduce_auto_scattered_in_place_and_other_types(comm, dtype):
    """auto above GATHER_BYTES (the blocks' Alltoallv, sums, Allgatherv as rounds), in place too, and persistent
    on another communicator: the bits of the linear two steps (every algorithm's)."""
    count = 9001      # (past GATHER_BYTES from 2 ranks for each dtype)
    rows = table(P, 2 * count, np.float64, 13, special=True).view(np.complex128) if dtype is np.complex128 \
        else table(P, count, dtype, 13, special=True)
    mine = rows[permutation(13)[R]].copy()
    expected = np.empty_like(mine)
    comm.Allreduce(mine, expected, algorithm="linear", reproducible=True)
    out = np.full_like(mine, 7)
    comm.Iallreduce(mine, out, reproducible=True).Wait()
    check(bits(out) == bits(expected), f"{np.dtype(dtype)} Iallreduce")
    inplace = mine.copy()
    comm.Iallreduce(MPI.IN_PLACE, inplace, reproducible=True).Wait()
    check(bits(inplace) == bits(expected), f"{np.dtype(dtype)} Iallreduce in place")
    dup = mpicoll.Comm(WORLD.Dup())
    bound = np.zeros_like(mine)
    req = dup.Allreduce_init(mine, bound, reproducible=True)
    for _ in range(2):
        req.Start()
        req.Wait()
        check(bits(bound) == bits(expected), f"{np.dtype(dtype)} Allreduce_init")
    req.Free()
    dup.Free()


def test_requests_in_flight_together_and_with_ordinary_ones(comm):
    rows = table(P, 2000, np.float64, 13)
    expected = np.empty(2000)
    comm.Allreduce(rows[R], expected, reproducible=True)
    outs = [np.empty(2000) for _ in range(3)]
    plain_in, plain_out = np.full(10, float(R)), np.empty(10)
    reqs = [comm.Iallreduce(rows[R], outs[0], reproducible=True),
            comm.Iallreduce(plain_in, plain_out),
            comm.Iallreduce(rows[R], outs[1], algorithm="ring", reproducible=True),
            comm.Iscan(rows[R], outs[2], reproducible=True)]
    MPI.Request.Waitall(reqs)
    check(bits(outs[0]) == bits(expected) and bits(outs[1]) == bits(expected), "concurrent Iallreduce")
    check(np.all(plain_out == P * (P - 1) / 2), "the ordinary request among them")
    scan = np.empty(2000)
    comm.Scan(rows[R], scan, reproducible=True)
    check(bits(outs[2]) == bits(scan), "Iscan among them")


@pytest.mark.parametrize("count", [3, 3000])
def test_a_rank_with_bad_arguments_fails_every_rank_at_wait(comm, count):
    out = np.empty(count)
    if R == P - 1:
        out.flags.writeable = False
    req = comm.Iallreduce(np.ones(count), out, reproducible=True) if R != P - 1 or P == 1 else None
    if req is None:                         # the bad rank: its own error, at the call or at Wait
        with pytest.raises((ValueError, TypeError)):
            comm.Iallreduce(np.ones(count), out, reproducible=True).Wait()
    else:
        with pytest.raises((ValueError, TypeError)):
            req.Wait()
    out = np.empty(count)                     # and the communicator still works
    comm.Iallreduce(np.ones(count), out, reproducible=True).Wait()
    check(np.all(out == P), "after a failed request")


def test_environment_variable_turns_the_request_forms_on(comm, monkeypatch):
    from mpicoll import config

    rows = table(P, 100, np.float64, 14)
    expected = np.empty(100)
    comm.Allreduce(rows[permutation(14)[R]], expected, reproducible=True)
    out, bound = np.empty(100), np.empty(100)
    monkeypatch.setenv("MPICOLL_REPRODUCIBLE", "1")
    config.reload()
    try:
        comm.Iallreduce(rows[permutation(14)[R]], out, algorithm="ring").Wait()
        req = comm.Allreduce_init(rows[permutation(14)[R]], bound, algorithm="recursive_doubling")
    finally:
        monkeypatch.delenv("MPICOLL_REPRODUCIBLE")
        config.reload()
    req.Start()
    req.Wait()
    req.Free()
    check(bits(out) == bits(expected) and bits(bound) == bits(expected), "MPICOLL_REPRODUCIBLE=1")


@pytest.mark.parametrize("count", [5, 3000])      # gathered (kept by dtype and length); scattered (by address)
def test_iallreduce_stages_are_kept_and_lent_to_one_request_at_a_time(comm, count, monkeypatch):
    """Requests of one plain Iallreduce reuse the stages an earlier one left once the engine is done with it
    (counted by their constructions); requests in flight together each get their own; fresh arrays of a small
    call reuse them too; every result has the blocking call's bits, waited by ``Wait`` or by mpi4py's
    ``MPI.Request.Waitall``."""
    from mpicoll.comm import reproducible_requests as rr

    made = []

    class Counted(rr.RequestStages):
        def __init__(self, *args, **kwargs):
            made.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(rr, "RequestStages", Counted)
    dup = mpicoll.Comm(WORLD.Dup())
    try:
        rows = table(P, count, np.float64, 21, special=True)
        mine = rows[permutation(21)[R]].copy()
        expected = np.empty(count)
        dup.Allreduce(mine, expected, reproducible=True)      # (the scattered one composes its stages too)
        first = len(made)
        again = np.empty(count)
        dup.Allreduce(mine, again, reproducible=True)
        dup.Allreduce(mine, again, reproducible=True)         # (its kept stages, lent to it again)
        check(bits(again) == bits(expected) and len(made) - first == 1 - (count * 8 * P <= rr.blocking.GATHER_BYTES),
              f"count {count}: the blocking call on other arrays, twice: {len(made) - first} stages made")
        first = len(made)
        out = np.full(count, 7.0)
        for _ in range(3):                                    # one construction, then the kept stages
            out[:] = 7
            dup.Iallreduce(mine, out, reproducible=True).Wait()
            check(bits(out) == bits(expected), f"count {count}: Wait")
        check(len(made) - first == 1, f"count {count}: {len(made) - first} stages made for three requests in turn")
        sends = [mine * (j - 1.5) for j in range(3)]           # (each its own result: stages lent twice would mix)
        wanted = [np.empty(count) for _ in range(3)]
        for j in range(3):
            dup.Allreduce(sends[j], wanted[j], reproducible=True)
        outs = [np.full(count, 7.0) for _ in range(3)]       # (the same arrays each time)
        small = count * 8 * P <= rr.blocking.GATHER_BYTES
        for _ in range(1 if small else 2):                # (a larger call's stages: one per pair of arrays)
            before = len(made)
            for out in outs:
                out[:] = 7
            reqs = [dup.Iallreduce(sends[j], outs[j], reproducible=True) for j in range(3)]
            MPI.Request.Waitall(reqs)
            check(all(bits(outs[j]) == bits(wanted[j]) for j in range(3)), f"count {count}: three in flight")
        if not small:
            check(len(made) == before, f"count {count}: the same arrays again made new stages")
        else:
            check(len(made) <= 4, f"count {count}: {len(made)} made (the blocking calls' one, and at most one for "
                                  "each of two lent at once)")
            before = len(made)
            for _ in range(2):                                # fresh arrays each call
                fresh = np.full(count, 7.0)
                dup.Iallreduce(mine.copy(), fresh, reproducible=True).Wait()
                check(bits(fresh) == bits(expected), f"count {count}: fresh arrays")
            check(len(made) == before, f"count {count}: fresh arrays made new stages")
        inplace = mine.copy()                                 # in place: the result's array is the contribution
        for form in ("Iallreduce", "Iallreduce", "Allreduce", "Allreduce"):
            inplace[...] = mine
            done = getattr(dup, form)(MPI.IN_PLACE, inplace, reproducible=True)
            if done is not None:
                done.Wait()
            check(bits(inplace) == bits(expected), f"count {count}: {form} in place")
        plan, before = dup._state.reproducible_plans.get(("d", count)), len(made)
        dup.Allreduce(MPI.IN_PLACE, inplace, reproducible=True)
        if small:       # the gathered plan of its dtype and length
            check(plan is not None and dup._state.reproducible_plans.get(("d", count)) is plan,
                  f"count {count}: a blocking call in place made a new plan")
        else:           # the composed plan kept for its arrays
            check(len(made) == before, f"count {count}: a blocking call in place made new stages")
    finally:
        dup.Free()
