"""The lockstep plan (mpicoll.analysis.lockstep) and the progress bar of the tools.

The plan reads the schedules into NumPy tables; these tests check that every rule it
checks there is still named (rank, round, block), that a data error of an earlier
round is found before a rule broken in a later one, and that the per-operation
domains (the simulator) and the batch one (the checker) agree.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from mpicoll.analysis.lockstep import Plan, run_lockstep
from mpicoll.analysis.simulate import simulate
from mpicoll.analysis.symbolic import verify
from mpicoll.families import registry
from mpicoll.ir.schedule import Block, Copy, Recv, Reduce, Round, Schedule, ScheduleError, Scratch, Send, Timeline
from mpicoll.tools import progress
from mpicoll.tools.progress import Progress

SCRATCH = {"incoming": Scratch("the partner's part")}


@pytest.fixture
def broken():
    """Register ``build`` as allreduce/broken for one test."""
    def register(build, keeps_order=False):
        registry.register("allreduce", "broken", keeps_order=keeps_order, scratch=SCRATCH)(build)
        registry._schedule.cache_clear()
    yield register
    registry._REGISTRY["allreduce"].pop("broken", None)
    registry._schedule.cache_clear()


def _pairwise(tl: Timeline, t: int, rank: int) -> None:
    """A correct pairwise all-reduce of one block in round t (p = 2)."""
    peer = rank ^ 1
    tl.send(t, peer, Block("send", 0, 1))
    tl.recv(t, peer, Block("incoming", 0, 1))
    lo, hi = ("incoming", "send") if peer < rank else ("send", "incoming")
    tl.reduce(t, Block("recv", 0, 1), Block(lo, 0, 1), Block(hi, 0, 1))


@pytest.mark.parametrize("mistake, message", [
    (lambda tl, r: tl.send(0, 5, Block("send", 0, 1)), "invalid peer 5"),
    (lambda tl, r: tl.send(0, r, Block("send", 0, 1)), "invalid peer"),
    (lambda tl, r: tl.copy(0, Block("recv", 0, 1), Block("send", 1, 2)), r"send\[1\] is outside blocks 0..0"),
    (lambda tl, r: tl.copy(0, Block("send", 0, 1), Block("recv", 0, 1)), "writes the send buffer"),
    (lambda tl, r: tl.step(0, Reduce(Block("recv", 0, 1), Block("send", 0, 1), Block("incoming", 0, 0))),
     "operands have different numbers of blocks"),
])
def test_plan_names_the_rule_broken(broken, mistake, message):
    def build(rank, size):
        tl = Timeline()
        _pairwise(tl, 1, rank)
        if rank == 1:
            mistake(tl, rank)
        return 1, tl.rounds()

    broken(build)
    with pytest.raises(ScheduleError, match=message) as info:
        verify("allreduce", "broken", 2)
    assert "allreduce/broken p=2 rank 1 round 0" in str(info.value)


def test_message_sizes_must_match(broken):
    def build(rank, size):
        tl = Timeline()
        tl.copy(0, Block("recv", 0, 2), Block("send", 0, 2))
        if rank == 0:
            tl.send(1, 1, Block("recv", 0, 2))
        else:
            tl.recv(1, 0, Block("incoming", 0, 1))
        return 2, tl.rounds()

    broken(build)
    with pytest.raises(ScheduleError, match=r"rank 1 round 1: receives 1 block\(s\) into incoming\[0\] but rank 0 "
                                            r"sends 2"):
        verify("allreduce", "broken", 2)


def test_a_receive_without_a_send_is_named(broken):
    def build(rank, size):
        tl = Timeline()
        _pairwise(tl, 0, rank)
        if rank == 0:
            tl.recv(1, 1, Block("incoming", 0, 1))
        return 1, tl.rounds()

    broken(build)
    with pytest.raises(ScheduleError, match=r"rank 0 round 1: receive into incoming\[0\] from 1 has no matching send"):
        verify("allreduce", "broken", 2)


def test_an_earlier_data_error_is_found_before_a_later_broken_rule(broken):
    """Round 0 reads a block before it holds data; round 1 sends to no one: round 0's error is the one named."""
    def build(rank, size):
        tl = Timeline()
        tl.copy(0, Block("recv", 0, 1), Block("incoming", 0, 1))   # incoming holds nothing yet
        tl.send(1, rank ^ 1, Block("recv", 0, 1))
        return 1, tl.rounds()

    broken(build)
    with pytest.raises(ScheduleError, match=r"round 0: step recv\[0\]=incoming\[0\]: reads incoming\[0\] before it "
                                            "holds data"):
        verify("allreduce", "broken", 2)
    plan = Plan(registry.schedules("allreduce", "broken", 2).schedules)
    assert len(plan.rounds) == 1 and "is never received" in plan.error


def test_a_message_read_before_its_block_holds_data(broken):
    def build(rank, size):
        tl = Timeline()
        tl.send(0, rank ^ 1, Block("recv", 0, 1))   # recv holds nothing out of place
        tl.recv(0, rank ^ 1, Block("incoming", 0, 1))
        tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
        return 1, tl.rounds()

    broken(build)
    with pytest.raises(ScheduleError, match=r"rank 0 round 0: send of recv\[0\] to 1: sent before it holds data"):
        verify("allreduce", "broken", 2)


def test_messages_between_one_pair_match_in_listed_order():
    """Two messages from rank 0 to rank 1 in one round: the first send goes to the first receive."""
    sends = Round(sends=(Send(1, Block("send", 0, 1)), Send(1, Block("send", 1, 2))))
    recvs = Round(recvs=(Recv(0, Block("recv", 1, 2)), Recv(0, Block("recv", 0, 1))))
    scheds = [Schedule("allgather", "test", 0, 2, 2, (sends,)), Schedule("allgather", "test", 1, 2, 2, (recvs,))]
    seen = []

    class Spy:
        def read(self, rank, block):
            return block

        def write(self, rank, block, payload):
            seen.append((block, payload))

        def reduce(self, rank, step):
            pass

        def copy(self, rank, step):
            pass

    run_lockstep(scheds, Spy())
    assert seen == [(Block("recv", 1, 2), Block("send", 0, 1)), (Block("recv", 0, 1), Block("send", 1, 2))]


@pytest.mark.parametrize("algorithm", ["ring", "rabenseifner", "hierarchical", "double_binary_tree"])
def test_simulator_and_checker_agree_at_many_ranks(algorithm):
    """The simulator (one operation at a time) computes the sum the checker (NumPy batches) proves."""
    size = 37
    inputs = [np.arange(50, dtype=np.int64) * (r + 1) for r in range(size)]
    out = simulate("allreduce", algorithm, inputs)
    for r in (0, size // 2, size - 1):
        np.testing.assert_array_equal(out[r], np.arange(50) * size * (size + 1) // 2)
    verify("allreduce", algorithm, size)
    verify("allreduce", algorithm, size, in_place=True)


def test_verify_reports_each_round():
    seen = []
    verify("allreduce", "ring", 5, progress=lambda t, n: seen.append((t, n)))
    assert seen == [(t, 8) for t in range(1, 9)]


def test_copies_keep_their_order_within_a_rank():
    """Rank steps run in listed order: the second copy reads what the first wrote."""
    steps = (Copy(Block("recv", 0, 1), Block("send", 0, 1)), Copy(Block("recv", 1, 2), Block("recv", 0, 1)))
    sched = Schedule("allreduce", "test", 0, 1, 2, (Round(steps=steps),))
    arrays = [{"send": np.array([5.0, 6.0]), "recv": np.zeros(2)}]

    class Arrays:
        def read(self, rank, block):
            return arrays[rank][block.buf][block.lo:block.hi].copy()

        def write(self, rank, block, payload):
            arrays[rank][block.buf][block.lo:block.hi] = payload

        def reduce(self, rank, step):
            raise AssertionError

        def copy(self, rank, step):
            self.write(rank, step.out, self.read(rank, step.src))

    run_lockstep([sched], Arrays())
    np.testing.assert_array_equal(arrays[0]["recv"], [5.0, 5.0])


class TestProgress:
    def test_silent_when_not_a_terminal(self, monkeypatch):
        monkeypatch.setattr(progress, "DELAY", 0.0)
        stream = io.StringIO()
        with Progress("verify", stream) as bar:
            bar.update(1, 2, "checking", "rounds")
        assert stream.getvalue() == ""

    def test_silent_for_the_first_seconds(self):
        stream = io.StringIO()
        with Progress("verify", stream, enabled=True) as bar:
            bar.update(1, 2)
        assert stream.getvalue() == ""

    def test_draws_then_clears_one_line(self, monkeypatch):
        monkeypatch.setattr(progress, "DELAY", 0.0)
        stream = io.StringIO()
        with Progress("model allreduce", stream, enabled=True) as bar:
            bar.update(3, 4, "costing ring", "algorithms")
            drawn = stream.getvalue()
        assert drawn.startswith("\rmodel allreduce: costing ring  [###############.....]  3/4 algorithms")
        assert "\n" not in stream.getvalue() and stream.getvalue().endswith("\r")


@pytest.mark.parametrize("peer", [-1, 2, 7])
def test_a_peer_out_of_range_in_a_later_round_is_named_there(broken, peer):
    """Keys of invalid peers must not collide with a valid pair of an earlier round."""
    def build(rank, size):
        tl = Timeline()
        _pairwise(tl, 0, rank)
        _pairwise(tl, 1, rank)
        if rank == 0:
            tl.send(2, peer, Block("recv", 0, 1))
        return 1, tl.rounds()

    broken(build)
    with pytest.raises(ScheduleError, match=rf"rank 0 round 2: send of recv\[0\] to invalid peer {peer}"):
        verify("allreduce", "broken", 2)
