"""The shortcuts that make verify and model answer in seconds give exactly what the long way gives.

Shared blocks (``BLOCKS``), whole rounds (``Timeline.exchange``), empty rounds skipped when a
schedule is read into tables, a plan freed without the garbage collector, the cost walk with
NumPy, and the relabelled fast path of the cost model (``register(relabel=...)``).
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace

import numpy as np
import pytest

from mpicoll.analysis import cost as cost_module
from mpicoll.analysis import tables
from mpicoll.analysis.cost import Machine, cost
from mpicoll.analysis.lockstep import Plan
from mpicoll.analysis.presets import preset
from mpicoll.families import catalog, registry
from mpicoll.ir.layout import Layout
from mpicoll.ir.nodes import node_of
from mpicoll.ir.schedule import BLOCKS, EMPTY_ROUND, Block, Copy, Recv, Reduce, Round, Send, Timeline

RELABELLED = [(c, a) for c in registry.collectives() for a in registry.algorithms(c)
              if registry.get(c, a).relabel is not None]


def test_shared_blocks_are_the_blocks_they_name():
    block = BLOCKS["recv", 2, 3]
    assert block == Block("recv", 2, 3) and type(block) is Block
    assert BLOCKS["recv", 2, 3] is block


def test_an_exchange_is_a_send_a_receive_and_steps_in_either_order_with_other_calls():
    step = Reduce(Block("recv", 0, 1), Block("incoming", 0, 1), Block("recv", 0, 1))
    one, other = Timeline(), Timeline()
    one.exchange(0, 1, Block("send", 0, 1), 2, Block("incoming", 0, 1), step)
    one.send(0, 3, Block("send", 1, 2))              # joins the whole round made by exchange
    one.exchange(2, 1, Block("recv", 0, 1), 2, Block("recv", 1, 2))
    one.copy(4, Block("recv", 0, 1), Block("send", 0, 1))
    one.exchange(4, 1, Block("recv", 1, 2), 2, Block("recv", 2, 3))   # after a copy in the same round
    one.exchange(2, 3, Block("recv", 3, 4), 3, Block("recv", 4, 5))   # a second exchange in one round
    other.send(0, 1, Block("send", 0, 1))
    other.recv(0, 2, Block("incoming", 0, 1))
    other.step(0, step)
    other.send(0, 3, Block("send", 1, 2))
    for peer, sent, frm, got in ((1, ("recv", 0, 1), 2, ("recv", 1, 2)), (3, ("recv", 3, 4), 3, ("recv", 4, 5))):
        other.send(2, peer, Block(*sent))
        other.recv(2, frm, Block(*got))
    other.copy(4, Block("recv", 0, 1), Block("send", 0, 1))
    other.send(4, 1, Block("recv", 1, 2))
    other.recv(4, 2, Block("recv", 2, 3))
    assert one.rounds() == other.rounds()
    assert one.rounds(7) == other.rounds(7) and len(one.rounds(7)) == 7
    assert one.rounds()[1] is EMPTY_ROUND


def test_tables_skip_empty_rounds_and_keep_the_round_numbers():
    rounds = (EMPTY_ROUND, Round((Send(1, Block("send", 0, 1)),), (Recv(1, Block("recv", 1, 2)),)), EMPTY_ROUND,
              Round(steps=(Copy(Block("recv", 0, 1), Block("send", 0, 1)),)))
    sends, recvs, steps = tables.read([5, 6], [rounds, rounds[:2]])
    assert sends.t.tolist() == [1, 1] and sends.rank.tolist() == [5, 6] and recvs.lo.tolist() == [1, 1]
    assert steps.t.tolist() == [3] and steps.rank.tolist() == [5] and not steps.reduces[0]


def test_a_dropped_plan_is_freed_without_the_garbage_collector():
    was = gc.isenabled()
    gc.disable()
    try:
        plan = Plan(registry.schedules("allreduce", "ring", 6).schedules)
        assert plan.rounds and plan.rounds[0].moves.messages
        gone = weakref.ref(plan)
        del plan
        assert gone() is None
    finally:
        if was:
            gc.enable()


def _walked(collective: str, algorithm: str, size: int, nbytes: int, machine: Machine, **params) -> tuple:
    """The cost model's figures the long way: every rank's every round, one message at a time in Python."""
    alg = registry.get(collective, algorithm)
    consts = machine.constants(algorithm)
    a_out, b_out, a_in, b_in = consts
    nodes = machine.ranks_per_node
    if "nodes" in alg.params:
        params = {**params, "nodes": nodes}
    where = node_of(size, nodes) if nodes is not None else None
    worst: dict[int, tuple] = {}
    for r in range(size):
        nblocks, rounds = alg.rounds(r, size, **params)
        layout = Layout.even(nbytes, nblocks)

        def moved(block: Block, layout: Layout = layout) -> int:
            return layout.ends[block.hi - 1] - layout.starts[block.lo] if block.hi > block.lo else 0

        for t, rnd in enumerate(rounds):
            if not rnd:
                continue
            terms = []
            for msgs in (rnd.sends, rnd.recvs):
                lat = bw = 0.0
                for m in msgs:
                    intra = where is not None and where[m.peer] == where[r]
                    lat += a_in if intra else a_out
                    bw += moved(m.block) * (b_in if intra else b_out)
                terms.append((lat, bw))
            (ls, bs), (lr, br) = terms
            if machine.duplex:
                lat, bw = (lr, br) if lr + br > ls + bs else (ls, bs)
            else:
                lat, bw = max(ls, lr), bs + br
            red = sum(moved(st.out) for st in rnd.steps if type(st) is Reduce) * machine.gamma
            copied = sum(moved(st.out) for st in rnd.steps if type(st) is not Reduce)
            over = (machine.round_overhead + machine.message_overhead * (len(rnd.sends) + len(rnd.recvs))
                    + machine.step_overhead * len(rnd.steps) + machine.copy * copied)
            if not (machine.round_overhead or machine.message_overhead or machine.step_overhead or machine.copy):
                over = 0.0
            total = lat + bw + red + over
            if total > worst.get(t, (0.0,))[0]:
                worst[t] = (total, lat, bw, red, over)
    rows = [worst[t] for t in sorted(worst)]
    return (sum(w[1] for w in rows), sum(w[2] for w in rows), sum(w[3] for w in rows), sum(w[4] for w in rows),
            sum(1 for w in rows if w[0] > 0))


MACHINES = [preset("nccl-summit"), replace(preset("nccl-summit"), ranks_per_node=None),
            replace(preset("nccl-summit"), round_overhead=1e-6, message_overhead=2e-7, step_overhead=3e-7,
                    copy=1e-10, duplex=False, ranks_per_node=4)]


@pytest.mark.parametrize(("collective", "algorithm"), [(c, a) for c in ("allreduce", "bcast", "allgather")
                                                       for a in registry.algorithms(c)])
def test_the_cost_walk_with_numpy_is_the_walk_one_message_at_a_time(collective, algorithm):
    root = {"root": 0} if "root" in registry.get(collective, algorithm).params else {}
    for size in (2, 7, 12):
        for nbytes in (8, 1001):
            for machine in MACHINES:
                c = cost(collective, algorithm, size, nbytes, machine, sample=False, **root)
                assert (c.latency, c.bandwidth, c.reduction, c.overhead, c.rounds) == \
                    _walked(collective, algorithm, size, nbytes, machine, **root)


def test_some_algorithm_relabels():
    assert ("allreduce", "hierarchical") in RELABELLED


@pytest.mark.parametrize(("collective", "algorithm"), RELABELLED)
@pytest.mark.parametrize("size", [2, 4, 6, 12, 18, 24])
def test_relabelled_schedules_are_the_schedules(collective, algorithm, size):
    """Where relabel claims rank r's schedule is a base rank's relabelled, it is, at every rank."""
    alg = registry.get(collective, algorithm)
    for k in range(1, size + 1):
        if alg.relabel(0, size, nodes=k) is None:
            assert size % k
            continue
        for r in range(size):
            base, move = alg.relabel(r, size, nodes=k)
            nblocks, want = alg.rounds(r, size, nodes=k)
            assert alg.rounds(base, size, nodes=k)[0] == nblocks
            got = tuple(_relabelled(rnd, move) for rnd in alg.rounds(base, size, nodes=k)[1])
            assert got == want, (k, r)


def _relabelled(rnd: Round, move) -> Round:
    if not rnd:
        return rnd

    def block(b: Block) -> Block:
        _, lo, hi = move(np.array([0]), np.array([b.lo]), np.array([b.hi]))
        return Block(b.buf, int(lo[0]), int(hi[0]))

    def peer(p: int) -> int:
        return int(move(np.array([p]), np.array([0]), np.array([1]))[0][0])

    return Round(tuple(Send(peer(m.peer), block(m.block)) for m in rnd.sends),
                 tuple(Recv(peer(m.peer), block(m.block)) for m in rnd.recvs),
                 tuple(type(st)(*map(block, st)) for st in rnd.steps))


@pytest.mark.parametrize(("collective", "algorithm"), RELABELLED)
def test_the_relabelled_cost_is_the_cost_of_every_rank_built(collective, algorithm, monkeypatch):
    """The fast path (the base ranks built, the others relabelled) against building every costed rank."""
    monkeypatch.setattr(cost_module, "EXACT_LIMIT", 4)       # so that p = 12 .. 36 samples and relabels
    monkeypatch.setattr(cost_module, "CHUNK_ROUNDS", 64)     # several chunks
    alg = registry.get(collective, algorithm)
    machines = [replace(m, ranks_per_node=k) for m in (preset("nccl-summit"), preset("shared-link"), MACHINES[2])
                for k in (1, 3, 6)]
    for size in (12, 18, 36):
        for nbytes in (8, 1001, 1 << 20):
            for machine in machines:
                for sample in (None, False):
                    fast = cost(collective, algorithm, size, nbytes, machine, sample=sample)
                    with monkeypatch.context() as m:
                        m.setitem(catalog._REGISTRY[collective], algorithm, replace(alg, relabel=None))
                        slow = cost(collective, algorithm, size, nbytes, machine, sample=sample)
                    assert fast == slow, (size, nbytes, machine.name, machine.ranks_per_node, sample)
