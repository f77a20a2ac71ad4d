"""The object collectives' schedules, run for all ranks in one process (no MPI): every suitable algorithm
gives mpi4py's result, reductions in rank order (string concatenation is not commutative)."""

from __future__ import annotations

import operator

import pytest
from mpi4py import MPI

from mpicoll.calls.objects import choice, engine
from mpicoll.calls.objects.slots import Failed, frame, pickled, unframe
from mpicoll.families import registry

SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 16)


def run(collective: str, name: str, size: int, fill, op=None, **params):
    """Every rank's buffers after the simulated run; ``fill(rank, bufs)`` puts each rank's pickled inputs."""
    scheds = [registry.schedule(collective, name, r, size, **params) for r in range(size)]
    ranks = []
    for r, s in enumerate(scheds):
        bufs = engine.buffers(s)
        fill(r, bufs)
        ranks.append((bufs, engine.Steps(bufs, op, r)))
    engine.simulate(scheds, ranks)
    return [bufs for bufs, _ in ranks]


def put(buf: list, block: int, obj) -> None:
    buf[block] = pickled(obj, -1)[0]


def got(buf: list, block: int):
    return buf[block].load()


def cases(collective: str, ordered: bool = False):
    for p in SIZES:
        roots = sorted({0, p - 1, p // 2}) if collective in ("bcast", "gather", "scatter", "reduce") else [None]
        for root in roots:
            params = {} if root is None else {"root": root}
            for name in choice.suitable(collective, p, ordered, **params):
                yield p, name, params


@pytest.mark.parametrize("collective", ["gather", "allgather"])
def test_gathers(collective):
    for p, name, params in cases(collective):
        out = run(collective, name, p, lambda r, b: put(b["send"], r, {"rank": r}), **params)
        for r in ([params["root"]] if params else range(p)):
            assert [got(out[r]["recv"], b) for b in range(p)] == [{"rank": b} for b in range(p)], (name, p, r)


def test_bcast_and_scatter():
    for p, name, params in cases("bcast"):
        root = params["root"]
        out = run("bcast", name, p, lambda r, b, root=root: put(b["recv"], 0, ["x", r]) if r == root else None,
                  **params)
        assert all(got(o["recv"], 0) == ["x", params["root"]] for o in out), (name, p)
    for p, name, params in cases("scatter"):
        def fill(r, b, root=params["root"], p=p):
            if r == root:
                for j in range(p):
                    put(b["send"], j, f"for {j}")
        out = run("scatter", name, p, fill, **params)
        assert [got(o["recv"], r) for r, o in enumerate(out)] == [f"for {r}" for r in range(p)], (name, p)


def test_alltoall():
    for p, name, _ in cases("alltoall"):
        def fill(r, b, p=p):
            for j in range(p):
                put(b["send"], j, (r, j))
        out = run("alltoall", name, p, fill)
        assert all([got(o["recv"], j) for j in range(p)] == [(j, r) for j in range(p)]
                   for r, o in enumerate(out)), (name, p)


@pytest.mark.parametrize("collective", ["reduce", "allreduce", "scan", "exscan"])
def test_reductions_keep_rank_order(collective):
    for p, name, params in cases(collective, ordered=True):
        out = run(collective, name, p, lambda r, b: put(b["send"], 0, str(r)), operator.add, **params)
        for r, o in enumerate(out):
            want = {"reduce": p, "allreduce": p, "scan": r + 1, "exscan": r}[collective]
            if (collective == "reduce" and r != params["root"]) or (collective == "exscan" and r == 0):
                continue
            assert got(o["recv"], 0) == "".join(map(str, range(want))), (name, p, r)


def test_failed_contribution_travels():
    """Rank 1's object failed: every rank whose allgather result holds it sees a failed block, not a hang or a
    wrong object."""
    out = run("allgather", "bruck", 5, lambda r, b: b["send"].__setitem__(r, Failed(r) if r == 1 else
                                                                            pickled(r, r)[0]))
    assert all(isinstance(o["recv"][1], Failed) and o["recv"][1].rank == 1 for o in out)


def test_raising_op_fails_dependents_only():
    def op(a, b):
        if b == "3":
            raise ZeroDivisionError
        return a + b
    out = run("scan", "linear", 5, lambda r, b: put(b["send"], 0, str(r)), op)
    assert [got(o["recv"], 0) for o in out[:3]] == ["0", "01", "012"]
    assert all(isinstance(o["recv"][0], Failed) for o in out[3:])


def test_frame_roundtrip():
    slots = [pickled([1, 2], 0)[0], None, Failed(7), pickled("x" * 1000, 0)[0]]
    back = unframe(frame(slots))
    assert back[0].load() == [1, 2] and back[1] is None and back[2].rank == 7 and back[3].load() == "x" * 1000


def test_mpi_pickle_settings_hold():
    """A user's MPI.pickle settings are what the blocks are made with."""
    seen = []
    MPI.pickle.__init__(lambda obj, *a, **k: seen.append(obj) or b"custom", lambda data, *a, **k: "loaded")
    try:
        slot, _ = pickled({"a": 1}, 0)
        assert bytes(slot.data) == b"custom" and slot.load() == "loaded" and seen == [{"a": 1}]
    finally:
        MPI.pickle.__init__()   # mpi4py's defaults


def test_choice_rules():
    assert choice.choose("allgather", "auto", 8) == "recursive_doubling"
    assert choice.choose("allgather", "auto", 6) == "bruck"
    assert "ring" not in choice.suitable("allreduce", 5)   # p pieces of one vector: not for objects
    assert "rabenseifner" not in choice.suitable("allreduce", 4)
    with pytest.raises(ValueError, match="choose one of"):
        choice.choose("bcast", "scatter_allgather", 4, root=0)
    for collective, name in choice.AUTO.items():
        for p in SIZES[1:]:
            params = {"root": 0} if collective in ("bcast", "gather", "scatter", "reduce") else {}
            assert name in choice.suitable(collective, p, True, **params), (collective, p)
