"""reproducible=True: every algorithm, size and placement of the contributions gives the bits of one process.

Every rank makes the same table of contributions (rows), with exponents far apart, cancellations, and
(where asked) zeros of both signs, infinities and NaN; rank ``i`` contributes row ``perm[i]``.  The
reference is :func:`mpicoll.data.fixedpoint.sum_rows` of the table, computed in one process; its
accuracy is tested against exact rational sums in ``tests/unit/test_reproducible.py``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.data import fixedpoint as fp
from mpicoll.data.accumulator import ReproducibleSum

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
SIZES = [0, 1, 7, 9000]   # 9000: past GATHER_BYTES (32 KiB) from 2 ranks for every dtype: scattered
DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16]


def table(rows: int, count: int, dtype, seed: int = 0, special: bool = False) -> np.ndarray:
    """The same rows on every rank: values spread over many binades, with cancelling pairs."""
    rng = np.random.default_rng(seed)
    spread = {np.dtype(np.float16): 6, np.dtype(ml_dtypes.bfloat16): 40}.get(np.dtype(dtype), 60)
    x = rng.standard_normal((rows, count)) * np.exp2(rng.integers(-spread, spread, (rows, count)))
    if rows > 1 and count:
        x[1, ::3] = -x[0, ::3]          # exact cancellations
    if special and count >= 8:
        x[:, 0] = -0.0
        x[0, 1], x[0, 2], x[-1, 2], x[0, 3] = np.inf, np.inf, -np.inf, np.nan
    return x.astype(dtype)


def permutation(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(P)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("algorithm", [*mpicoll.algorithms("allreduce"), "auto"])
def test_allreduce_every_algorithm_and_size_gives_the_one_process_bits(comm, algorithm, dtype):
    for count in SIZES:
        for seed in (1, 2):
            rows = table(P, count, dtype, seed, special=True)
            mine = rows[permutation(seed)[R]].copy()
            out = np.full(count, 7, dtype)
            comm.Allreduce(mine, out, op=MPI.SUM, algorithm=algorithm, reproducible=True)
            check(bits(out) == bits(fp.sum_rows(rows)), f"{algorithm} {np.dtype(dtype)} count {count} seed {seed}")
            check(bits(mine) == bits(rows[permutation(seed)[R]]), "sendbuf was modified")


@pytest.mark.parametrize("algorithm", [*mpicoll.algorithms("allreduce"), "auto"])
def test_allreduce_in_place_and_complex(comm, algorithm):
    rows = table(P, 2 * 101, np.float64, 3)
    mine = rows[permutation(3)[R]].view(np.complex128).copy()
    comm.Allreduce(MPI.IN_PLACE, mine, algorithm=algorithm, reproducible=True)
    check(bits(mine) == bits(fp.sum_rows(rows)), f"{algorithm}: complex in place")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce"))
def test_reduce_every_algorithm_and_root(comm, algorithm):
    rows = table(P, 333, np.float64, 4, special=True)
    for root in sorted({0, P - 1}):
        out = np.full(333, 7.0) if R == root else None
        comm.Reduce(rows[permutation(root)[R]], out, op=MPI.SUM, root=root, algorithm=algorithm, reproducible=True)
        check(R != root or bits(out) == bits(fp.sum_rows(rows)), f"{algorithm}: root {root}")


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce_scatter_block"))
def test_reduce_scatter_block(comm, algorithm):
    block = 50
    rows = table(P, block * P, np.float32, 5)
    out = np.full(block, 7, np.float32)
    comm.Reduce_scatter_block(rows[permutation(5)[R]], out, algorithm=algorithm, reproducible=True)
    check(bits(out) == bits(fp.sum_rows(rows)[R * block:(R + 1) * block]), algorithm)


@pytest.mark.parametrize("algorithm", mpicoll.algorithms("reduce_scatter"))
def test_reduce_scatter_uneven(comm, algorithm):
    counts = [(j * 5) % 3 * 11 for j in range(P)]
    rows = table(P, sum(counts), np.float64, 6)
    out = np.full(counts[R], 7.0)
    comm.Reduce_scatter(rows[permutation(6)[R]], out, counts, algorithm=algorithm, reproducible=True)
    lo = sum(counts[:R])
    check(bits(out) == bits(fp.sum_rows(rows)[lo:lo + counts[R]]), algorithm)


@pytest.mark.parametrize("method", ["Scan", "Exscan"])
def test_scans_give_the_bits_of_every_algorithm_alike(comm, method):
    rows = table(P, 257, np.float64, 7)
    results = []
    for algorithm in mpicoll.algorithms(method.lower()):
        out = np.full(257, 7.0)
        getattr(comm, method)(rows[R], out, algorithm=algorithm, reproducible=True)
        results.append(bits(out))
    check(len(set(results)) == 1, f"{method}: algorithms differ")
    last = R + 1 if method == "Scan" else R
    if last:   # the prefix's terms, in the window of every rank's terms
        fmt = fp.format_of(rows.dtype)
        code = fp.codes(rows.reshape(-1), fmt).reshape(rows.shape).max(axis=0)
        ref = fp.decode(sum(fp.encode(row, code, fmt) for row in rows[:last]), code, fmt)
        check(results[0] == bits(ref), f"{method}: prefix")
    else:
        check(results[0] == bits(np.full(257, 7.0)), "Exscan: rank 0's recvbuf untouched")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_calls_by_the_compiled_hit_and_by_its_definition(comm, dtype):
    """A small Allreduce's kept stages, run by the compiled hit (``run_planned``, where built) and by its Python
    definition (``_run_planned``), give the one-process bits, call after call, also where the values are near
    the largest float (the double sum overflows in the highest windows: those columns are rounded by
    ``fixedpoint.combine``); the first call keeps the stages, the later ones reuse them."""
    from mpicoll.comm import reproducible_allreduce as ra

    dtype = np.dtype(dtype)
    n = max(1, 512 // (P * dtype.itemsize))
    kept = comm._state.reproducible_plans
    key = ra.gathered_key(dtype, n)
    for seed in range(3):
        rows = table(P, n, dtype, seed, special=seed == 1)
        if seed == 2:
            rows[:, ::2] = np.finfo(dtype).max * 0.75        # (past the largest float: inf)
            rows[:, 1::4] = np.finfo(dtype).max / P
        expected = bits(fp.sum_rows(rows))
        mine = rows[permutation(seed)[R]].copy()
        for _ in range(2):                      # (the first call keeps the stages, the next runs them)
            out = np.full(n, 7, dtype)
            comm.Allreduce(mine, out, reproducible=True)
            check(bits(out) == expected, f"Allreduce seed {seed}")
        stages = kept[key]
        for run in {ra.run_planned, ra._run_planned}:
            out = np.full(n, 7, dtype)
            check(run(comm, "auto", True, mine, out, MPI.SUM) is True, f"{run} ran nothing")
            check(bits(out) == expected, f"{run.__module__}.{run.__name__} seed {seed}")
            check(kept[key] is stages, "the stages were made again")
        check(bits(mine) == bits(rows[permutation(seed)[R]]), "sendbuf was modified")


def test_environment_variable_turns_it_on(comm, monkeypatch):
    from mpicoll import config

    rows = table(P, 100, np.float64, 8)
    out = np.empty(100)
    monkeypatch.setenv("MPICOLL_REPRODUCIBLE", "1")
    config.reload()
    try:
        for _ in range(3):      # (the first reads the variable and makes the plan; the others run it)
            comm.Allreduce(rows[permutation(8)[R]], out, algorithm="ring")
            check(bits(out) == bits(fp.sum_rows(rows)), "MPICOLL_REPRODUCIBLE=1")
        comm.Allreduce(rows[permutation(8)[R]][:8], out[:8])
        check(bits(out[:8]) == bits(fp.sum_rows(rows[:, :8])), "MPICOLL_REPRODUCIBLE=1, a small call")
    finally:
        monkeypatch.delenv("MPICOLL_REPRODUCIBLE")
        config.reload()
    check(bits(out) == bits(fp.sum_rows(rows)), "MPICOLL_REPRODUCIBLE=1")


def test_other_ops_and_integers_are_unchanged(comm):
    x = np.arange(10, dtype=np.float64) * (R + 1)
    out, ref = np.empty(10), np.empty(10)
    comm.Allreduce(x, out, op=MPI.MAX, reproducible=True)
    WORLD.Allreduce(x, ref, op=MPI.MAX)
    check(np.array_equal(out, ref), "MAX")
    i = np.arange(10) * (R + 1)
    iout, iref = np.empty_like(i), np.empty_like(i)
    comm.Allreduce(i, iout, reproducible=True)
    WORLD.Allreduce(i, iref)
    check(np.array_equal(iout, iref), "int64 SUM")


@pytest.mark.parametrize("count", [10, 3000])     # gathered; above GATHER_BYTES from 2 ranks (auto: scattered)
def test_a_rank_with_bad_arguments_fails_every_rank(comm, count):
    for _ in range(2):      # (the second time, the other ranks have the plan of the good call: no parsing)
        out = np.empty(count)
        if R == P - 1:
            out.flags.writeable = False
        with pytest.raises((ValueError, TypeError)):
            comm.Allreduce(np.ones(count), out, reproducible=True)
        out = np.empty(count)                    # and the communicator still works
        comm.Allreduce(np.ones(count), out, reproducible=True)
        check(np.all(out == P), "after a failed call")


@pytest.mark.parametrize("count", [5, 5000])
@pytest.mark.parametrize("everywhere", [True, False])
def test_floats_in_another_byte_order_are_refused_on_every_rank(comm, count, everywhere):
    """A non-native byte order (refused by mpi4py too) on every rank or on the last only: the rank raises
    ``BufferTypeError``, the others ``ArgumentError``, blocking and at ``Wait``; the communicator still works."""
    swapped = everywhere or R == P - 1
    dtype = np.dtype(">f8" if np.little_endian else "<f8") if swapped else np.dtype(np.float64)
    for form in ("Allreduce", "Iallreduce"):
        x, y = np.ones(count, dtype), np.zeros(count, dtype)
        with pytest.raises(mpicoll.errors.BufferTypeError if swapped else mpicoll.errors.ArgumentError):
            done = getattr(comm, form)(x, y, reproducible=True)
            if done is not None:
                done.Wait()
    out = np.empty(count)
    comm.Allreduce(np.ones(count), out, reproducible=True)
    check(np.all(out == P), "after the refused calls")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("count", [1, 7, 1500, 5001])  # gathered; 1500: scattered from 3 ranks; 5001: from 2
def test_repeated_calls_and_unusual_arguments_on_some_ranks(comm, dtype, count):
    """Calls of one dtype and length run by their communicator's plan after the first: new contents and
    permutations give the one-process bits; a rank whose arguments are not the plan's usual ones (2-D
    arrays, the result in a larger buffer) takes the parsed path with the same messages, and a fresh
    communicator makes its own plans."""
    for seed in range(4):
        rows = table(P, count, dtype, seed, special=seed % 2 == 1)
        mine = rows[permutation(seed)[R]].copy()
        expected = bits(fp.sum_rows(rows))
        out = np.full(count, 7, dtype)
        if seed == 2 and R % 2 == 1:
            send, out = mine, np.full(count + 5, 7, dtype)
        elif seed == 3 and R == 0:
            send, out = mine.reshape(1, count), out.reshape(count, 1)
        else:
            send = mine
        comm.Allreduce(send, out, op=MPI.SUM, reproducible=True)
        check(bits(out.reshape(-1)[:count]) == expected, f"{np.dtype(dtype)} count {count} seed {seed}")
    dup = mpicoll.Comm(WORLD.Dup())
    out = np.empty(count, dtype)
    dup.Allreduce(mine, out, reproducible=True)
    check(bits(out) == expected, "a fresh communicator")
    dup.Free()


def test_accumulator_gives_the_same_bits_for_every_process_count(comm):
    """N vectors split over 1 .. P ranks (sub-communicators), in any order: the same bits."""
    n, count = 12, 301
    rows = table(n, count, np.float64, 9, special=True)
    whole = ReproducibleSum(count)
    for row in rows:
        whole.add(row)
    expected = bits(whole.value())
    for q in range(1, P + 1):
        sub = comm.Split(0 if R < q else MPI.UNDEFINED, R)
        if sub != MPI.COMM_NULL:
            acc = ReproducibleSum(count)
            for i in np.random.default_rng(q).permutation(n)[sub.Get_rank()::q]:
                acc.add(rows[i])
            acc.allreduce(sub)
            check_local = bits(acc.value()) == expected and acc.count == n
            sub.Free()
        else:
            check_local = True
        check(check_local, f"accumulator over {q} ranks")
