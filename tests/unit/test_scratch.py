"""Scratch buffers are declared by each algorithm (role, layout); an undeclared buffer name is refused."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.analysis.simulate import simulate
from mpicoll.analysis.symbolic import verify
from mpicoll.families import registry
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import USER_BUFFERS, Block, Schedule, ScheduleError, Scratch, Timeline
from mpicoll.tools import commands as tools

SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 16)
ALGORITHMS = [(c, a) for c in registry.collectives() for a in registry.algorithms(c)]


@pytest.mark.parametrize(("collective", "algorithm"), ALGORITHMS)
def test_every_algorithm_declares_every_buffer_it_uses(collective: str, algorithm: str) -> None:
    alg = registry.get(collective, algorithm)
    used: set[str] = set()
    for size in SIZES:
        for params in tools.check_cases(collective, algorithm, size):
            for sched in registry.schedules(collective, algorithm, size, **params):
                names = sched.buffers()
                assert names <= set(USER_BUFFERS) | set(alg.scratch), (collective, algorithm, size, params)
                assert set(sched.scratch()) == names - set(USER_BUFFERS)   # and scratch() says so, not raising
                used |= names
    for name, decl in alg.scratch.items():
        assert name in used, f"{collective}/{algorithm} declares {name!r} but never uses it"
        assert isinstance(decl, Scratch) and decl.role.strip()
        assert decl.like in ("send", "recv", "own")


def test_scratch_names_say_what_they_hold() -> None:
    """No bare tmp, tmp2, ...: every declared name is a word for its role."""
    names = {name for c, a in ALGORITHMS for name in registry.get(c, a).scratch}
    assert names and not any(name.startswith("tmp") for name in names)


def _with(buf: str, declared: dict[str, Scratch]) -> Schedule:
    tl = Timeline()
    tl.recv(0, 1, Block(buf, 0, 1))
    tl.reduce(0, Block("recv", 0, 1), Block("send", 0, 1), Block(buf, 0, 1))
    return Schedule("allreduce", "test", 0, 2, 1, tl.rounds(), declared=declared)


def test_an_undeclared_buffer_is_an_error_not_recvs_layout() -> None:
    sched = _with("tmp", {"incoming": Scratch("a part")})
    with pytest.raises(ScheduleError, match=r"tmp.*does not declare.*incoming"):
        sched.scratch()
    with pytest.raises(ScheduleError, match="does not declare"):
        sched.layouts({"recv": Layout.v([4], [0])})


def test_layouts_follow_the_declaration() -> None:
    recv, send, own = Layout.v([4], [0]), Layout.v([4], [4]), Layout.v([2], [0])
    assert _with("a", {"a": Scratch("x")}).layouts({"recv": recv})["a"] is recv
    assert _with("a", {"a": Scratch("x")}).layouts({"recv": recv})["send"] is recv   # send: recv's unless given
    assert _with("a", {"a": Scratch("x", like="send")}).layouts({"recv": recv, "send": send})["a"] is send
    assert _with("a", {"a": Scratch("x", like="own")}).layouts({"recv": recv, "a": own})["a"] is own
    with pytest.raises(ScheduleError, match="does not give"):
        _with("a", {"a": Scratch("x", like="own")}).layouts({"recv": recv})


def test_bind_refuses_an_undeclared_name() -> None:
    from mpicoll.engine.blocking import bind

    sched = _with("tmp", {})
    arrays = {"send": np.ones(4), "recv": np.zeros(4)}
    layouts = {"send": Layout.v([4], [0]), "recv": Layout.v([4], [0])}
    with pytest.raises(ScheduleError, match="tmp"):
        bind(sched, arrays, layouts, lambda out, a, b: None, np)
    # declared and bound: fine
    ok = _with("incoming", {"incoming": Scratch("a part")})
    full = ok.layouts(layouts)
    assert len(bind(ok, {**arrays, "incoming": np.empty(4)}, full, lambda out, a, b: None, np)) == 1


def test_register_refuses_send_or_recv_as_scratch() -> None:
    with pytest.raises(ValueError, match="recv"):
        registry.register("allreduce", "bad", scratch={"recv": Scratch("x")})
    with pytest.raises(ValueError, match="like"):
        registry.register("allreduce", "bad", scratch={"acc": Scratch("x", like="tmp")})


class TestUndeclaredInTheTools:
    def setup_method(self) -> None:
        def build(rank: int, size: int):  # recursive doubling at p = 2 with an undeclared "tmp"
            tl = Timeline()
            peer = rank ^ 1
            tl.send(0, peer, Block("send", 0, 1))
            tl.recv(0, peer, Block("tmp", 0, 1))
            left, right = ("tmp", "send") if peer < rank else ("send", "tmp")
            tl.reduce(0, Block("recv", 0, 1), Block(left, 0, 1), Block(right, 0, 1))
            return 1, tl.rounds()

        registry.register("allreduce", "undeclared", keeps_order=False)(build)
        registry._schedule.cache_clear()

    def teardown_method(self) -> None:
        registry._REGISTRY["allreduce"].pop("undeclared", None)
        registry._schedule.cache_clear()

    def test_verify_and_simulate_refuse(self) -> None:
        with pytest.raises(ScheduleError, match="does not declare"):
            verify("allreduce", "undeclared", 2)
        with pytest.raises(ScheduleError, match="does not declare"):
            simulate("allreduce", "undeclared", [np.ones(3), np.ones(3)])


@pytest.mark.parametrize(("collective", "algorithm", "params"), [
    ("reduce_scatter_block", "pairwise", {}), ("alltoall", "bruck", {}), ("gather", "binomial", {"root": 1}),
    ("scatter", "binomial", {"root": 2}), ("reduce", "pipelined_chain", {"root": 2, "segments": 3}),
])
def test_show_lists_the_scratch_buffers_with_their_role(collective: str, algorithm: str, params: dict) -> None:
    text = tools.show(collective, algorithm, 5, **params)
    declared = registry.get(collective, algorithm).scratch
    for name, decl in declared.items():
        if f"{name}[" in text:
            assert f"scratch {name} (" in text and decl.role in text
