"""The benchmark's timing loop: the order in which it runs the variants (no MPI traffic)."""

from __future__ import annotations

from collections import defaultdict

from mpicoll.bench.timing import time_rounds


class _World:
    """Stands in for the communicator: time_rounds only calls its Barrier."""

    def Barrier(self) -> None:
        pass


def _orders(names: list[str], iters: int) -> list[list[str]]:
    ran: list[str] = []
    timed = {name: (lambda name=name: ran.append(name)) for name in names}
    times = time_rounds(timed, dict.fromkeys(names, 1), iters, _World())
    assert times.shape == (iters, len(names)) and (times > 0).all()
    return [ran[i * len(names):(i + 1) * len(names)] for i in range(iters)]


def test_every_round_runs_every_variant_once():
    names = [f"v{i}" for i in range(6)]
    for order in _orders(names, 11):
        assert sorted(order) == names


def test_no_variant_always_follows_the_same_one():
    # what a variant leaves behind (caches, pages) must not always fall on the same successor
    names = [f"v{i}" for i in range(6)]
    before: dict[str, set[str]] = defaultdict(set)
    for order in _orders(names, 11):
        for first, then in zip(order, order[1:]):
            before[then].add(first)
    assert all(len(before[name]) >= 3 for name in names), dict(before)


def test_every_rank_runs_the_same_orders():
    # the variants are collectives: every rank must run them in the same order
    names = [f"v{i}" for i in range(5)]
    assert _orders(names, 7) == _orders(names, 7)
