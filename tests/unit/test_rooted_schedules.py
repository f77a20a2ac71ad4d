"""Rooted collectives' schedules simulated on NumPy data (no MPI), and their buffer rules."""

from __future__ import annotations

import numpy as np
import pytest

import mpicoll
from mpicoll.analysis.simulate import simulate
from mpicoll.families import registry

SIZES = [1, 2, 3, 5, 8, 13]


def roots(size: int) -> list[int]:
    return sorted({0, size // 2, size - 1})


def params(collective: str, algorithm: str, root: int) -> dict:
    extra = {"segments": 3} if "segments" in registry.get(collective, algorithm).params else {}
    return {"root": root, **extra}


@pytest.mark.parametrize("algorithm", registry.algorithms("bcast"))
@pytest.mark.parametrize("size", SIZES)
def test_simulated_bcast(algorithm, size):
    inputs = [np.arange(11.0) + 100 * r for r in range(size)]
    for root in roots(size):
        for out in simulate("bcast", algorithm, inputs, **params("bcast", algorithm, root)):
            np.testing.assert_array_equal(out, inputs[root])


@pytest.mark.parametrize("algorithm", registry.algorithms("reduce"))
@pytest.mark.parametrize("size", SIZES)
def test_simulated_reduce_keeps_rank_order(algorithm, size):
    def concat(a, b):  # digit strings: b = a o b, associative, and the order is visible
        b[...] = [int(f"{x}{y}") for x, y in zip(a.tolist(), b.tolist())]

    op = mpicoll.Op(concat, commute=False)
    inputs = [np.full(5, r % 9 + 1, dtype=np.int64) for r in range(size)]
    expected = int("".join(str(r % 9 + 1) for r in range(size)))
    for root in roots(size):
        for in_place in (False, True):
            out = simulate("reduce", algorithm, inputs, op=op, in_place=in_place, **params("reduce", algorithm, root))
            assert np.all(out[root] == expected), (root, in_place)


@pytest.mark.parametrize("collective", ["gather", "gatherv"])
@pytest.mark.parametrize("size", SIZES)
def test_simulated_gather(collective, size):
    inputs = [np.arange(3.0) + 10 * r for r in range(size)]
    for algorithm in registry.algorithms(collective):
        for root in roots(size):
            for in_place in (False, True):
                out = simulate(collective, algorithm, inputs, in_place=in_place, root=root)
                np.testing.assert_array_equal(out[root], np.concatenate(inputs))


@pytest.mark.parametrize("collective", ["scatter", "scatterv"])
@pytest.mark.parametrize("size", SIZES)
def test_simulated_scatter(collective, size):
    inputs = [np.arange(2.0 * size) + 1000 * r for r in range(size)]
    for algorithm in registry.algorithms(collective):
        for root in roots(size):
            out = simulate(collective, algorithm, inputs, root=root)
            for r in range(size):
                np.testing.assert_array_equal(out[r], inputs[root][2 * r:2 * r + 2])


@pytest.mark.parametrize("algorithm", registry.algorithms("bcast"))
def test_bcast_root_never_receives(algorithm):
    """The root's buffer is input only (mpi4py accepts a read-only one there)."""
    for size in range(1, 20):
        for root in roots(size):
            sched = registry.schedule("bcast", algorithm, root, size, **params("bcast", algorithm, root))
            assert not any(rnd.recvs or rnd.steps for rnd in sched.rounds), (size, root)


@pytest.mark.parametrize("algorithm", [a for a in registry.algorithms("reduce") if a != "rabenseifner"])
def test_reduce_non_roots_do_not_use_recv(algorithm):
    for size in range(1, 20):
        for root in roots(size):
            for rank in range(size):
                if rank != root:
                    sched = registry.schedule("reduce", algorithm, rank, size, **params("reduce", algorithm, root))
                    assert "recv" not in sched.buffers(), (size, root, rank)


def test_every_reduce_algorithm_keeps_order():
    """All but the hierarchical one, which keeps it only on blocks of consecutive ranks (not for any layout)."""
    for algorithm in registry.algorithms("reduce"):
        if algorithm == "hierarchical":
            assert not registry.get("reduce", algorithm).keeps_order(3)
            continue
        assert all(registry.get("reduce", algorithm).keeps_order(p) for p in range(1, 40)), algorithm


def test_double_binary_tree_bcast_halves_the_load():
    """No rank but the root sends more than about n: 2k blocks of n/2k, each forwarded to at most 2 children."""
    for size in (6, 7, 16, 33):
        k = 4
        for rank in range(1, size):
            sched = registry.schedule("bcast", "double_binary_tree", rank, size, root=0, segments=k)
            sent = sum(len(rnd.sends) for rnd in sched.rounds)
            assert sent <= 2 * k + 1, (size, rank, sent)
