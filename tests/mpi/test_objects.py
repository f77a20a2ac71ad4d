"""The lowercase object collectives of mpicoll.Comm against mpi4py's own on the same objects."""

from __future__ import annotations

import operator
import threading

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.calls.objects import choice

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P, R = WORLD.size, WORLD.rank
ROOTED = ("bcast", "gather", "scatter", "reduce")


def algorithms(collective: str, ordered: bool = False) -> list[str]:
    params = {"root": 0} if collective in ROOTED else {}
    return ["auto", *choice.suitable(collective, P, ordered, **params)]


def obj(rank: int):
    return {"rank": rank, "payload": np.arange(rank + 3), "text": "x" * (rank * 100)}


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("root", sorted({0, P - 1}))
def test_rooted_match_mpi4py(comm, root):
    for name in algorithms("bcast"):
        got = comm.bcast(obj(R) if R == root else None, root, algorithm=name)
        check(same(got, WORLD.bcast(obj(R) if R == root else None, root)), f"bcast/{name}")
    for name in algorithms("gather"):
        check(same(comm.gather(obj(R), root, algorithm=name), WORLD.gather(obj(R), root)), f"gather/{name}")
    for name in algorithms("scatter"):
        items = [obj(j) for j in range(P)] if R == root else None
        check(same(comm.scatter(items, root, algorithm=name), WORLD.scatter(items, root)), f"scatter/{name}")


def test_all_to_all_kinds_match_mpi4py(comm):
    for name in algorithms("allgather"):
        check(same(comm.allgather(obj(R), algorithm=name), WORLD.allgather(obj(R))), f"allgather/{name}")
    for name in algorithms("alltoall"):
        items = [(R, j, "y" * j) for j in range(P)]
        check(same(comm.alltoall(items, algorithm=name), WORLD.alltoall(items)), f"alltoall/{name}")


OPS = [MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN, MPI.MAXLOC, MPI.MINLOC, MPI.REPLACE, MPI.NO_OP, MPI.LAND, MPI.LOR,
       MPI.LXOR, MPI.BAND, MPI.BOR, MPI.BXOR]


@pytest.mark.parametrize("method", ["reduce", "allreduce", "scan", "exscan"])
def test_reductions_match_mpi4py(comm, method):
    for op in OPS:
        mine = (R * 3 % 5, R) if op in (MPI.MAXLOC, MPI.MINLOC) else R + 1
        for name in algorithms(method, ordered=True):
            args = (mine, op, 0) if method == "reduce" else (mine, op)
            got = getattr(comm, method)(*args, algorithm=name)
            check(got == getattr(WORLD, method)(*args), f"{method}/{name} with {op}")


@pytest.mark.parametrize("method", ["reduce", "allreduce", "scan", "exscan"])
def test_non_commutative_callables_in_rank_order(comm, method):
    user_op = MPI.Op.Create(lambda a, b, _t=None: a + b, commute=False)
    try:
        for op in (operator.add, user_op):
            for name in algorithms(method, ordered=True):
                got = getattr(comm, method)([R], op, algorithm=name)
                check(got == getattr(WORLD, method)([R], op), f"{method}/{name}: {got}")
    finally:
        user_op.Free()


def test_results_are_copies(comm):
    """As in mpi4py, the root's own object comes back unpickled: a new object, not the one it sent."""
    mine = [R]
    check(comm.bcast(mine, 0) is not mine, "bcast returned the root's own object")
    check(comm.allgather(mine)[R] is not mine, "allgather returned this rank's own object")
    check(comm.allreduce(mine, operator.add) is not mine or P > 1, "allreduce returned the object it was given")


def test_bad_root_everywhere_raises_before_any_message(comm):
    for method, args in (("bcast", (1,)), ("gather", (1,)), ("scatter", (None,)), ("reduce", (1, MPI.SUM))):
        for root in (-1, P):
            with pytest.raises(MPI.Exception) as info:
                getattr(comm, method)(*args, root=root)
            check(info.value.Get_error_class() == MPI.ERR_ROOT, f"{method}: {info.value}")
    check(comm.allgather(R) == list(range(P)), "the communicator is still usable")


def test_bad_input_on_one_rank_raises_everywhere_that_depends_on_it(comm):
    """The root's scatter sequence has the wrong length: the root raises its error, the others PeerFailure."""
    items = list(range(P + 1))
    with pytest.raises((ValueError, mpicoll.PeerFailure)) as info:
        comm.scatter(items if R == 0 else None, 0)
    check(isinstance(info.value, mpicoll.PeerFailure) == (R != 0), f"rank {R}: {info.value!r}")
    check(comm.allgather(R) == list(range(P)), "the communicator is still usable afterwards")


def test_unpicklable_object_on_one_rank(comm):
    mine = (lambda: 0) if R == P - 1 else R
    with pytest.raises(Exception) as info:
        comm.allgather(mine)
    check(isinstance(info.value, mpicoll.PeerFailure) == (R != P - 1), f"rank {R}: {info.value!r}")
    check(comm.bcast("ok", 0) == "ok", "the communicator is still usable afterwards")


def test_raising_op_spreads_to_dependents(comm):
    def op(a, b):
        if b == P - 1:
            raise ZeroDivisionError("op")
        return a + b
    if P == 1:
        check(comm.scan(0, op) == 0, "one rank never applies the op")
        return
    with pytest.raises((ZeroDivisionError, mpicoll.PeerFailure)):
        comm.allreduce(R, op)
    check(comm.allreduce(1) == P, "the communicator is still usable afterwards")


def test_derived_and_topology_communicators(comm):
    half = comm.Split(R % 2, R)
    check(half.allgather(R) == [r for r in range(P) if r % 2 == R % 2], "Split's allgather")
    cart = mpicoll.Comm(WORLD.Create_cart([P], periods=[True]))
    check(cart.allreduce([R], operator.add) == list(range(P)), "a Cartesian communicator's allreduce")
    check(cart.bcast("c", root=P - 1) == "c", "a Cartesian communicator's bcast")
    cart.Free()
    half.Free()


def test_threads_each_on_their_own_communicator(comm):
    comms = [comm.Dup() for _ in range(3)]
    results: dict[int, object] = {}

    def work(i: int) -> None:
        c = comms[i]
        results[i] = [c.allreduce(R * (i + 1)) for _ in range(20)][-1], c.gather(i, root=0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        total, gathered = results[i]
        check(total == (i + 1) * P * (P - 1) // 2, f"thread {i}: {total}")
        check(gathered == ([i] * P if R == 0 else None), f"thread {i}: {gathered}")
    for c in comms:
        c.Free()


def test_null_communicator():
    with pytest.raises(ValueError):
        mpicoll.Comm().bcast(1)


# -- "auto": pickles through the communicator's own buffer collectives (mpicoll.calls.objects.buffered) --

def large(rank: int) -> dict:
    """An object whose pickle is longer than any slot holds (a second collective moves it)."""
    return {"rank": rank, "blob": bytes([rank % 256]) * 5000}


def test_objects_larger_than_a_slot_match_mpi4py(comm):
    """Every rank's object too large for a slot, and only one rank's (the others in their slots)."""
    for mine in (large(R), large(R) if R == P - 1 else R):
        check(same(comm.allgather(mine), WORLD.allgather(mine)), "allgather")
        for root in sorted({0, P - 1}):
            check(same(comm.bcast(mine if R == root else None, root), WORLD.bcast(mine if R == root else None, root)),
                  f"bcast from {root}")
            check(same(comm.gather(mine, root), WORLD.gather(mine, root)), f"gather at {root}")
            items = [large(j) if j % 2 else j for j in range(P)] if R == root else None
            check(same(comm.scatter(items, root), WORLD.scatter(items, root)), f"scatter from {root}")
        items = [large(j) if (R + j) % 2 else (R, j) for j in range(P)]
        check(same(comm.alltoall(items), WORLD.alltoall(items)), "alltoall")
        for method in ("allreduce", "scan", "exscan"):
            got = getattr(comm, method)([mine], operator.add)
            check(same(got, getattr(WORLD, method)([mine], operator.add)), method)
        check(same(comm.reduce([mine], operator.add, P - 1), WORLD.reduce([mine], operator.add, P - 1)), "reduce")


def test_a_programs_own_pickle_is_used_both_ways(comm):
    """``MPI.pickle.__init__(dumps, loads)`` (mpi4py's way to change how objects are pickled) holds for every
    "auto" call, in slots and beyond them: each object is dumped and loaded by the program's functions."""
    import pickle

    used = {"dumps": 0, "loads": 0}

    def dumps(obj, protocol=None):
        used["dumps"] += 1
        return pickle.dumps(("wrapped", obj), protocol)

    def loads(data):
        used["loads"] += 1
        tag, obj = pickle.loads(data)
        assert tag == "wrapped"
        return obj

    MPI.pickle.__init__(dumps, loads)
    try:
        for mine in (R, large(R)):
            check(comm.allgather(mine) == [j if mine == R else large(j) for j in range(P)], "allgather")
            check(comm.bcast(mine if R == 0 else None, 0) == (0 if mine == R else large(0)), "bcast")
            check(comm.scatter([(j, mine) for j in range(P)] if R == 0 else None, 0)[0] == R, "scatter")
            check([x[0] for x in comm.alltoall([(j, mine) for j in range(P)])] == [R] * P, "alltoall")
            got = comm.gather(mine, 0)
            check(got is None if R else len(got) == P, "gather")
    finally:
        MPI.pickle.__init__()
    check(used["dumps"] > 0 and used["loads"] > 0, f"the program's pickle was not used: {used}")


def test_pickles_beyond_a_slot_while_a_request_is_outstanding(comm):
    """gather, scatter and alltoall send the pickles too long for a slot point to point.  Rank 0 starts a
    nonblocking call of another communicator before them, the others after them: on rank 0 it is outstanding
    throughout (the object engine polls and keeps it moving), and every answer is right."""
    from mpicoll.calls.objects import engine
    from mpicoll.engine.inflight import outstanding

    mine = large(R) if R % 2 else R
    items = [large(j) if (R + j) % 2 else (R, j) for j in range(P)]
    rooted = [large(j) if j % 2 == 0 else j for j in range(P)] if R == P - 1 else None
    expected = (WORLD.gather(mine, 0), WORLD.alltoall(items), WORLD.scatter(rooted, P - 1))
    other = mpicoll.Comm(WORLD.Dup())
    x, y = np.full(4096, float(R)), np.zeros(4096)
    polled: list[bool] = []
    real = engine.Probed.__call__

    def spied(self, *args):
        polled.append(outstanding())
        return real(self, *args)

    engine.Probed.__call__ = spied
    try:
        request = other.Iallreduce(x, y) if R == 0 else None
        got = (comm.gather(mine, 0), comm.alltoall(items), comm.scatter(rooted, P - 1))
        request = request or other.Iallreduce(x, y)
        request.Wait()
    finally:
        engine.Probed.__call__ = real
    other.Free()
    check(same(got, expected), "the objects")
    check(np.all(y == P * (P - 1) / 2), "the outstanding Iallreduce")
    check(R != 0 or P == 1 or (polled and all(polled)),
          f"rank 0's pickles moved while its request was outstanding: {polled}")


def test_first_call_of_a_communicator_with_one_large_object():
    """A fresh communicator's first call is an object collective with one rank's object beyond a slot."""
    fresh = mpicoll.Comm(WORLD.Dup())
    mine = large(R) if R == 0 else R
    check(same(fresh.allgather(mine), WORLD.allgather(mine)), "allgather")
    fresh.Free()
    fresh = mpicoll.Comm(WORLD.Dup())
    check(same(fresh.gather(mine, P - 1), WORLD.gather(mine, P - 1)), "gather")
    fresh.Free()


def unpicklable() -> object:
    return lambda: 0


@pytest.mark.parametrize("size", ["small", "large"])
def test_unpicklable_object_on_one_rank_every_collective(comm, size):
    """One rank's object (the root's, for the rooted calls) does not pickle, with the other ranks' objects
    small or beyond a slot: that rank raises the pickling error, ranks whose result holds its object raise
    PeerFailure, the others return, and no rank is left waiting."""
    bad = P - 1
    fine = large(R) if size == "large" else R

    def mine():
        return unpicklable() if R == bad else fine

    def outcome(call):
        try:
            call()
        except mpicoll.PeerFailure as exc:   # (check() is collective: the rank is part of the outcome)
            return "peer" if exc.rank == bad else f"peer {exc.rank}"
        except Exception:   # the pickling error, as MPI.pickle.dumps raises it
            return "own"
        return "ok"

    check(outcome(lambda: comm.allgather(mine())) == ("own" if R == bad else "peer"), "allgather")
    check(outcome(lambda: comm.allreduce([mine()], operator.add)) == ("own" if R == bad else "peer"), "allreduce")
    check(outcome(lambda: comm.scan([mine()], operator.add)) == ("own" if R == bad else "ok"), "scan")
    check(outcome(lambda: comm.gather(mine(), 0)) == ("own" if R == bad else "peer" if R == 0 else "ok"),
          "gather")
    check(outcome(lambda: comm.bcast(mine(), bad)) == ("own" if R == bad else "peer"), "bcast")
    items = [unpicklable() if j == 0 else fine for j in range(P)]
    check(outcome(lambda: comm.scatter(items if R == bad else None, bad)) == ("own" if R == bad else "peer"),
          "scatter")
    check(outcome(lambda: comm.alltoall(items if R == bad else [fine] * P))
          == ("own" if R == bad else "peer"), "alltoall")
    check(comm.allgather(R) == list(range(P)), "the communicator is still usable afterwards")


def test_auto_takes_the_buffer_collectives_and_a_named_algorithm_its_schedule(comm, monkeypatch):
    """"auto" runs the communicator's own buffer collectives (no object schedule); a named algorithm runs
    that algorithm's schedule on the object engine, as before."""
    from mpicoll.calls.objects import buffered, engine

    ran: list[str] = []
    real_run = engine.run
    monkeypatch.setattr(engine, "run", lambda schedule, *args: (ran.append(schedule.algorithm),
                                                                 real_run(schedule, *args))[1])
    check(comm.bcast("x" if R == 0 else None, 0) == "x" and comm.allgather(R) == list(range(P)), "auto results")
    check(comm.allreduce(R) == P * (P - 1) // 2, "auto allreduce")
    check(ran == ([] if buffered.folds(P) else ["recursive_doubling"]), f"auto ran the schedules {ran}")
    if P > 1:
        check(comm.bcast("y" if R == 0 else None, 0, algorithm="binomial") == "y", "binomial bcast")
        check(comm.allgather(R, algorithm="bruck") == list(range(P)), "bruck allgather")
        check(ran[-2:] == ["binomial", "bruck"], f"the named schedules ran: {ran}")
    slots = comm._state.object_slots
    check(slots is not None and slots.inline == buffered.slot_size(P) - buffered.HEADER,
          "the communicator keeps its slots")


def test_careful_path_and_cartesian_sub_communicators(comm):
    """A communicator with a timeout (the careful path) and a Cartesian one's Sub run the same calls."""
    careful = mpicoll.Comm(WORLD.Dup(), timeout=60)
    mine = large(R) if R % 2 else R
    check(same(careful.allgather(mine), WORLD.allgather(mine)), "careful allgather")
    check(same(careful.gather(mine, P - 1), WORLD.gather(mine, P - 1)), "careful gather")
    careful.Free()
    cart = comm.Create_cart([P, 1], periods=[False, False])
    rows = cart.Sub([True, False])
    check(same(rows.alltoall([(R, j) for j in range(P)]), WORLD.alltoall([(R, j) for j in range(P)])), "Sub")
    check(rows.scatter(list(range(P)) if R == 0 else None, 0) == R, "Sub scatter")
    rows.Free()
    cart.Free()
