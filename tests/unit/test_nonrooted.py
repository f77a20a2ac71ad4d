"""The non-rooted collectives' schedules on real numbers (simulator) and the barrier's guarantee."""

from __future__ import annotations

import numpy as np
import pytest

import mpicoll
from mpicoll.analysis.simulate import simulate
from mpicoll.families import registry

SIZES = [1, 2, 3, 5, 6, 8, 13]


def inputs(size: int, count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed + size)
    return [rng.integers(0, 9, count).astype(np.int64) for _ in range(size)]


@pytest.mark.parametrize("collective", ["allgather", "allgatherv"])
@pytest.mark.parametrize("size", SIZES)
def test_allgather(collective, size):
    for algorithm in registry.algorithms(collective):
        xs = [x[: (r * 3) % 4 if collective == "allgatherv" else 3] for r, x in enumerate(inputs(size, 3))]
        for in_place in (False, True):
            for out in simulate(collective, algorithm, xs, in_place=in_place):
                np.testing.assert_array_equal(out, np.concatenate(xs), err_msg=f"{algorithm} {in_place}")


@pytest.mark.parametrize("collective", ["reduce_scatter_block", "reduce_scatter"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("count", [1, 7, 40])
def test_reduce_scatter(collective, size, count):
    xs = inputs(size, count)
    total = np.sum(xs, axis=0)
    cuts = [len(b) for b in np.array_split(total, size)]   # as Layout.even: uneven, zeros when count < p
    starts = np.concatenate([[0], np.cumsum(cuts)])
    for algorithm in registry.algorithms(collective):
        outs = simulate(collective, algorithm, xs)
        for r, out in enumerate(outs):
            np.testing.assert_array_equal(out, total[starts[r]:starts[r + 1]], err_msg=f"{algorithm} rank {r}")


@pytest.mark.parametrize("collective", ["alltoall", "alltoallv"])
@pytest.mark.parametrize("size", SIZES)
def test_alltoall(collective, size):
    count = 2 * size if collective == "alltoall" else size + 3   # alltoallv: uneven blocks
    xs = inputs(size, count)
    blocks = [np.array_split(x, size) for x in xs]
    for algorithm in registry.algorithms(collective):
        for r, out in enumerate(simulate(collective, algorithm, xs)):
            np.testing.assert_array_equal(out, np.concatenate([blocks[j][r] for j in range(size)]), err_msg=algorithm)


@pytest.mark.parametrize("size", SIZES)
def test_scan_exscan_non_commutative(size):
    def concat_op(a, b):  # digit strings: b = a o b, the order is visible
        b[...] = [int(f"{x}{y}") for x, y in zip(a.tolist(), b.tolist())]

    op = mpicoll.Op(concat_op, commute=False)
    xs = [np.array([r % 9 + 1, 9 - r % 9], dtype=object) for r in range(size)]
    for algorithm in registry.algorithms("scan"):
        for in_place in (False, True):
            outs = simulate("scan", algorithm, xs, op=op, in_place=in_place)
            for r, out in enumerate(outs):
                expect = [int("".join(str(x[i]) for x in xs[:r + 1])) for i in range(2)]
                assert out.tolist() == expect, (algorithm, r)
    for algorithm in registry.algorithms("exscan"):
        outs = simulate("exscan", algorithm, xs, op=op)
        for r, out in enumerate(outs[1:], start=1):
            expect = [int("".join(str(x[i]) for x in xs[:r])) for i in range(2)]
            assert out.tolist() == expect, (algorithm, r)


@pytest.mark.parametrize("algorithm", ["dissemination", "linear"])
@pytest.mark.parametrize("size", list(range(1, 34)) + [64, 127])
def test_barrier_everyone_hears_from_everyone(algorithm, size):
    """After the schedule every rank has a chain of messages from every rank: nobody leaves early."""
    sset = mpicoll.schedules("barrier", algorithm, size)
    heard = [{r} for r in range(size)]
    for t in range(sset.nrounds):
        before = [set(h) for h in heard]
        for s in sset:
            if t < len(s.rounds):
                for x in s.rounds[t].sends:
                    heard[x.peer] |= before[s.rank]
    assert all(len(h) == size for h in heard)


def test_exscan_rank0_untouched_and_barrier_simulates():
    xs = [np.array([r + 1.0]) for r in range(4)]
    assert np.isnan(simulate("exscan", "recursive_doubling", xs)[0][0])   # poison left alone
    assert np.isnan(simulate("exscan", "linear", xs)[0][0])
    for algorithm in registry.algorithms("barrier"):
        assert all(out.size == 0 for out in simulate("barrier", algorithm, [np.zeros(0)] * 5))
