"""Every algorithm's schedules, checked without MPI: symbolic proof and simulation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.analysis.simulate import simulate
from mpicoll.analysis.symbolic import verify
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as contract
from mpicoll.ir.schedule import Block, Copy, Round, ScheduleError, Scratch

TEST_SCRATCH = {"incoming": Scratch("the partner's part"), "acc": Scratch("a partial sum")}   # hand-written builds

SIZES = list(range(1, 34)) + [64, 127]
CASES = [(c, a) for c in registry.collectives() for a in registry.algorithms(c)]


def params_for(collective: str, algorithm: str, size: int) -> list[dict]:
    """The parameter sets worth checking: every root kind, a few segment counts, node layouts.

    Layouts: one node, blocks of 2 and of 3 (uneven: the last node is short),
    and two nodes holding alternate ranks (not consecutive).
    """
    alg = registry.get(collective, algorithm)
    roots = sorted({0, size - 1, size // 2}) if "root" in alg.params else [None]
    segments = [1, 3] if "segments" in alg.params else [None]
    layouts = [None, 2, 3, tuple(r % 2 for r in range(size))] if "nodes" in alg.params else ["-"]
    out = []
    for root in roots:
        for seg in segments:
            for nodes in layouts:
                p = {}
                if root is not None:
                    p["root"] = root
                if seg is not None:
                    p["segments"] = seg
                if nodes != "-":
                    p["nodes"] = nodes
                out.append(p)
    return out


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_symbolic_small_and_odd_sizes(collective, algorithm):
    spec = contract(collective)
    for size in SIZES:
        for params in params_for(collective, algorithm, size):
            verify(collective, algorithm, size, **params)
            if spec.in_place:
                verify(collective, algorithm, size, in_place=True, **params)


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_symbolic_1024(collective, algorithm):
    params = {k: v for k, v in params_for(collective, algorithm, 1024)[-1].items()}
    if "nodes" in params:   # 32 nodes of 32 ranks (alternating ranks on 2 nodes are proved at small sizes)
        params["nodes"] = 32
    verify(collective, algorithm, 1024, **params)


@pytest.mark.parametrize("collective,algorithm", CASES)
def test_ordered_claim_matches_symbolic_proof(collective, algorithm):
    """An algorithm that claims to keep rank order is checked in ordered mode (verify's default)."""
    alg = registry.get(collective, algorithm)
    if not contract(collective).reduces:
        pytest.skip("moves data only")
    for size in range(1, 18):
        if not alg.keeps_order(size):
            with pytest.raises(ScheduleError):
                for params in params_for(collective, algorithm, size):
                    verify(collective, algorithm, size, ordered=True, **params)


@pytest.mark.parametrize("algorithm", registry.algorithms("allreduce"))
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("count", [0, 1, 4, 14, 101])
def test_simulated_allreduce_matches_numpy(algorithm, size, count):
    rng = np.random.default_rng(size * 100 + count)
    inputs = [rng.integers(-5, 5, count).astype(np.float64) for _ in range(size)]
    expected = np.sum(inputs, axis=0)
    for in_place in (False, True):
        outs = simulate("allreduce", algorithm, inputs, in_place=in_place,
                        **({"segments": 3} if algorithm == "double_binary_tree" else {}))
        for out in outs:
            np.testing.assert_array_equal(out, expected)


def test_simulated_results_are_bitwise_identical_across_ranks():
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(1000) for _ in range(7)]
    for algorithm in registry.algorithms("allreduce"):
        outs = simulate("allreduce", algorithm, inputs)
        for out in outs[1:]:
            assert out.tobytes() == outs[0].tobytes(), algorithm


def test_simulated_non_commutative_order():
    def concat_op(a, b):  # digit strings: b = a o b, associative, and the order is visible
        b[...] = [int(f"{x}{y}") for x, y in zip(a.tolist(), b.tolist())]

    op = mpicoll.Op(concat_op, commute=False)
    inputs = [np.array([r + 1], dtype=np.int64) for r in range(6)]
    for algorithm in registry.algorithms("allreduce"):
        if registry.get("allreduce", algorithm).keeps_order(6):
            assert simulate("allreduce", algorithm, inputs, op=op)[3][0] == 123456, algorithm


class TestOneRank:
    """At p = 1 the registry answers from the collective's contract; builders only ever see p >= 2."""

    @pytest.mark.parametrize("collective,algorithm", CASES)
    def test_every_algorithm_gets_the_trivial_schedule_and_no_builder_runs(self, collective, algorithm,
                                                                           monkeypatch):
        def refuse(rank, size, **params):
            raise AssertionError(f"{collective}/{algorithm} built at size {size}")

        alg = registry.get(collective, algorithm)
        if alg.any_size:
            pytest.skip("a neighbourhood's one-rank schedule depends on its topology (self-loops), not a contract")
        monkeypatch.setitem(registry._REGISTRY[collective], algorithm, replace(alg, build=refuse))
        registry._schedule.cache_clear()
        try:
            for params in params_for(collective, algorithm, 1):
                sched = registry.schedule(collective, algorithm, 0, 1, **params)
                assert (sched.nblocks, sched.rounds) == registry.trivial(collective, **params)
                verify(collective, algorithm, 1, **params)
        finally:
            registry._schedule.cache_clear()

    def test_trivial_schedules_follow_the_contracts(self):
        copy = (Round(steps=(Copy(Block("recv", 0, 1), Block("send", 0, 1)),)),)
        for collective in registry.collectives():
            if collective.startswith("neighbor_"):   # built at p = 1 too (any_size)
                continue
            params = {"root": 0} if "root" in contract(collective).params else {}
            nothing = collective in ("barrier", "bcast", "exscan")  # no output, the root's own, undefined
            assert registry.trivial(collective, **params) == (1, () if nothing else copy), collective

    def test_builders_see_two_ranks_or_more(self):
        sizes = []
        registry.register("allreduce", "spy")(lambda rank, size: sizes.append(size) or (1, ()))
        try:
            registry.schedules("allreduce", "spy", 1)
            registry.schedules("allreduce", "spy", 2)
        finally:
            registry._REGISTRY["allreduce"].pop("spy")
            registry._schedule.cache_clear()
        assert sizes == [2, 2]


def test_schedule_table_reads_like_the_textbook():
    text = str(mpicoll.schedules("allreduce", "ring", 4))
    assert "rank 3" in text and "send[3] -> 1" in text and "recv[2] = incoming[2] + send[2]" in text
    assert len(text.splitlines()) > 6


def test_registry_lists_the_six_allreduce_algorithms():
    assert set(mpicoll.algorithms("allreduce")) >= {
        "ring", "recursive_doubling", "rabenseifner", "binomial", "double_binary_tree", "linear"}
    with pytest.raises(ValueError, match="no algorithm"):
        registry.get("allreduce", "nope")
    with pytest.raises(ValueError, match="unknown collective"):
        mpicoll.algorithms("allfoo")


class TestCheckerCatchesBrokenSchedules:
    """Deliberately broken schedules must be rejected, naming what is wrong."""

    def _register(self, name, build, keeps_order=True):
        registry.register("allreduce", name, keeps_order=keeps_order, scratch=TEST_SCRATCH)(build)
        registry._schedule.cache_clear()

    def teardown_method(self):
        registry._REGISTRY["allreduce"].pop("broken", None)
        registry._schedule.cache_clear()

    def test_unmatched_send(self):
        from mpicoll.ir.schedule import Timeline

        def build(rank, size):
            tl = Timeline()
            if rank == 0:
                tl.send(0, 1, Block("send", 0, 1))
            tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
            return 1, tl.rounds()

        self._register("broken", build)
        with pytest.raises(ScheduleError, match="never received"):
            verify("allreduce", "broken", 2)

    def test_double_counting(self):
        from mpicoll.ir.schedule import Timeline

        def build(rank, size):  # recursive doubling that adds its own part twice
            tl = Timeline()
            peer = rank ^ 1
            tl.send(0, peer, Block("send", 0, 1))
            tl.recv(0, peer, Block("incoming", 0, 1))
            tl.reduce(0, Block("recv", 0, 1), Block("send", 0, 1), Block("incoming", 0, 1))
            tl.reduce(0, Block("recv", 0, 1), Block("recv", 0, 1), Block("send", 0, 1))
            return 1, tl.rounds()

        self._register("broken", build, keeps_order=False)
        with pytest.raises(ScheduleError, match="counted twice"):
            verify("allreduce", "broken", 2)

    def test_wrong_order(self):
        from mpicoll.ir.schedule import Timeline

        def build(rank, size):  # upper o lower
            tl = Timeline()
            peer = rank ^ 1
            tl.send(0, peer, Block("send", 0, 1))
            tl.recv(0, peer, Block("incoming", 0, 1))
            left, right = ("send", "incoming") if rank > peer else ("incoming", "send")
            tl.reduce(0, Block("recv", 0, 1), Block(left, 0, 1), Block(right, 0, 1))
            return 1, tl.rounds()

        self._register("broken", build, keeps_order=True)
        with pytest.raises(ScheduleError, match="out of rank order"):
            verify("allreduce", "broken", 2)

    def test_receive_into_block_in_flight(self):
        from mpicoll.ir.schedule import Timeline

        def build(rank, size):
            tl = Timeline()
            peer = rank ^ 1
            tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
            tl.send(1, peer, Block("recv", 0, 1))
            tl.recv(1, peer, Block("recv", 0, 1))
            return 1, tl.rounds()

        self._register("broken", build, keeps_order=False)
        with pytest.raises(ScheduleError, match="in flight"):
            verify("allreduce", "broken", 2)

    def test_missing_contribution(self):
        from mpicoll.ir.schedule import Timeline

        def build(rank, size):
            tl = Timeline()
            tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
            return 1, tl.rounds()

        self._register("broken", build)
        with pytest.raises(ScheduleError, match="expected"):
            verify("allreduce", "broken", 3)

    def test_in_place_hazard(self, in_place_hazard_build):
        build = in_place_hazard_build
        self._register("broken", build, keeps_order=False)
        verify("allreduce", "broken", 2)  # fine with separate buffers
        with pytest.raises(ScheduleError, match="counted twice"):
            verify("allreduce", "broken", 2, in_place=True)


def test_simulator_uses_mpi_ops():
    inputs = [np.array([3, 1, 2], dtype=np.int32) * (r + 1) for r in range(4)]
    out = simulate("allreduce", "rabenseifner", inputs, op=MPI.MAX)
    np.testing.assert_array_equal(out[0], [12, 4, 8])
