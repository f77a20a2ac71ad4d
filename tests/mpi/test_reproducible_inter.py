"""reproducible=True on an intercommunicator: each group gets the one-process bits of the remote group's terms.

Groups of unequal sizes (rank 0 alone against the rest; even against odd ranks), from
``Create_intercomm`` on an ``mpicoll.Comm``.  Every rank makes the same table of contributions; world
rank ``w`` contributes row ``perm[w]``, so the rows of a group are a permuted subset of the table, and
the reference is :func:`mpicoll.data.fixedpoint.sum_rows` of the remote group's rows: the bits an
intracommunicator's reproducible call gives for them.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from mpi4py import MPI
from test_reproducible import bits, table

import mpicoll
from mpicoll import config
from mpicoll.data import fixedpoint as fp

from conftest import WORLD, check

pytestmark = [pytest.mark.mpi, pytest.mark.skipif(WORLD.size < 2, reason="an intercommunicator needs two groups")]

P, R = WORLD.size, WORLD.rank
DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16]
SPLITS = {"rank 0 alone": lambda r: int(r == 0), "even and odd": lambda r: r % 2}


@pytest.fixture(params=list(SPLITS), scope="module")
def split(request):
    """(intercommunicator, world ranks of this group, world ranks of the remote group)."""
    color = SPLITS[request.param]
    world = mpicoll.Comm(WORLD)
    half = world.Split(color(R), R)
    groups = [[r for r in range(P) if color(r) == c] for c in (0, 1)]
    mine, theirs = groups[color(R)], groups[1 - color(R)]
    inter = half.Create_intercomm(0, world, theirs[0])
    yield inter, mine, theirs
    inter.Free()
    half.Free()


def contributions(count: int, dtype, seed: int, special: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the table, this rank's row of it: row ``perm[R]``, ``perm``)."""
    rows = table(P, count, dtype, seed, special)
    perm = np.random.default_rng(seed).permutation(P)
    return rows, rows[perm[R]].copy(), perm


def expected(rows: np.ndarray, perm: np.ndarray, ranks: list[int]) -> np.ndarray:
    return fp.sum_rows(rows[perm[ranks]])


FORMS = ("blocking", "request", "persistent")


def call(comm, form: str, method: str, *args):
    """``method`` of ``comm`` with ``reproducible=True`` in one of its three forms, completed."""
    if form == "blocking":
        getattr(comm, method)(*args, reproducible=True)
    elif form == "request":
        getattr(comm, "I" + method[0].lower() + method[1:])(*args, reproducible=True).Wait()
    else:
        req = getattr(comm, method + "_init")(*args, reproducible=True)
        req.Start()
        req.Wait()
        req.Free()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_gives_the_remote_groups_one_process_bits(split, dtype, form):
    inter, _, theirs = split
    for count, seed in ((0, 1), (1, 2), (9, 3), (3000, 4)):
        rows, mine, perm = contributions(count, dtype, seed)
        out = np.full(count, 7, dtype)
        call(inter, form, "Allreduce", mine, out, MPI.SUM)
        check(bits(out) == bits(expected(rows, perm, theirs)), f"{form} {np.dtype(dtype)} count {count}")
        check(bits(mine) == bits(rows[perm[R]]), "sendbuf was modified")


@pytest.mark.parametrize("form", FORMS)
def test_reduce_to_a_root_of_either_group(split, form):
    inter, mine_ranks, theirs = split
    for root_group in (0, 1):
        in_root_group = (mine_ranks[0] == 0) == (root_group == 0)
        for dtype in (np.float64, np.float32):
            rows, mine, perm = contributions(2000, dtype, 5 + root_group)
            out = np.full(2000, 7, dtype)
            if in_root_group:    # the root is the last rank of its group
                root = MPI.ROOT if R == mine_ranks[-1] else MPI.PROC_NULL
                call(inter, form, "Reduce", None, out, MPI.SUM, root)
                good = bits(out) == bits(expected(rows, perm, theirs)) if root == MPI.ROOT else np.all(out == 7)
            else:
                root = len(theirs) - 1
                call(inter, form, "Reduce", mine, out, MPI.SUM, root)
                good = np.all(out == 7)
            check(good, f"{form} Reduce {np.dtype(dtype)} to a root of group {root_group}")


@pytest.mark.parametrize("form", FORMS)
def test_reduce_scatter_block_and_reduce_scatter(split, form):
    inter, mine_ranks, theirs = split
    n, m = len(mine_ranks), len(theirs)
    block = 3 * m           # a group's vector: n * block here, m * (3 * n) there: the same length
    rows, mine, perm = contributions(3 * n * m, np.complex128 if form == "blocking" else np.float64, 8)
    out = np.full(block, 7, rows.dtype)
    call(inter, form, "Reduce_scatter_block", mine, out, MPI.SUM)
    me = mine_ranks.index(R)
    whole = expected(rows.view(np.float64), perm, theirs).view(rows.dtype)
    check(bits(out) == bits(whole[me * block:(me + 1) * block]), f"{form} Reduce_scatter_block")
    # unequal (n > 1), none negative at any size (3m >= 3), their total n * 3m: +1, -1 in pairs, an odd last 0
    counts = [3 * m + (0 if i == n - 1 and n % 2 else 1 if i % 2 == 0 else -1) for i in range(n)]
    out = np.full(counts[me], 7, rows.dtype)
    call(inter, form, "Reduce_scatter", mine, out, counts, MPI.SUM)
    first = sum(counts[:me])
    check(bits(out) == bits(whole[first:first + counts[me]]), f"{form} Reduce_scatter {counts}")


def test_other_ops_and_integers_are_the_ordinary_results(split):
    inter, _, theirs = split
    x = np.array([R + 1, -R, 5], np.float64)
    y = np.empty(3)
    inter.Allreduce(x, y, op=MPI.MAX, reproducible=True)
    check(np.array_equal(y, [max(theirs) + 1, -min(theirs), 5]), ("MAX", y))
    ints = np.full(4, R + 1, np.int64)
    got = np.empty(4, np.int64)
    inter.Iallreduce(ints, got, reproducible=True).Wait()
    check(np.all(got == sum(r + 1 for r in theirs)), ("int64 SUM", got))


def test_the_environment_variable_makes_them_reproducible(split, monkeypatch):
    inter, _, theirs = split
    rows, mine, perm = contributions(500, np.float32, 11)
    out, bound = np.empty(500, np.float32), np.empty(500, np.float32)
    monkeypatch.setenv("MPICOLL_REPRODUCIBLE", "1")
    config.reload()
    try:
        inter.Allreduce(mine, out)
        req = inter.Allreduce_init(mine, bound)
    finally:
        monkeypatch.delenv("MPICOLL_REPRODUCIBLE")
        config.reload()
    req.Start()
    req.Wait()
    req.Free()
    want = bits(expected(rows, perm, theirs))
    check(bits(out) == want and bits(bound) == want, "MPICOLL_REPRODUCIBLE=1")


def test_bad_input_on_one_rank_raises_on_every_rank_of_both_groups(split):
    inter, _, _ = split
    x = np.ones(5)
    y = np.empty(5, np.float32 if R == P - 1 else np.float64)     # the wrong recvbuf type on one rank only
    with pytest.raises((TypeError, ValueError)) as info:
        inter.Allreduce(x, y, reproducible=True)
    check(R == P - 1 or isinstance(info.value, mpicoll.ArgumentError), ("the others raise ArgumentError", info.value))
    with pytest.raises((TypeError, ValueError)):
        inter.Iallreduce(x, y, reproducible=True).Wait()
    y = np.empty(5)
    inter.Allreduce(x, y, reproducible=True)      # and the next call runs
    check(np.all(y == inter.Get_remote_size()), ("after the refusal", y))
