"""Intercommunicator collectives by hand: ``mpicoll.Intercomm`` against MPI's own, on the same two groups.

The groups are the even and the odd ranks of the world (1 + 1 ranks at p = 2, 2 + 1 at p = 3, 2 + 2 at
p = 4), so uneven groups are covered.  Every test makes its intercommunicators the way programs do
(``Create_intercomm`` on an ``mpicoll.Comm``, or wrapping MPI's) and cross-checks mpicoll's result with the
MPI library's collective on an intercommunicator of the same groups.
"""

from __future__ import annotations

import gc
import pickle
import time
import weakref

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.comm.inter import InterState

from conftest import WORLD, check

pytestmark = [pytest.mark.mpi, pytest.mark.skipif(WORLD.size < 2, reason="an intercommunicator needs 2 ranks")]

P, R = WORLD.size, WORLD.rank
COLOR = R % 2
OTHERS = [q for q in range(P) if q % 2 != COLOR]     # the remote group's world ranks, in its rank order


def _pair() -> tuple[mpicoll.Intercomm, MPI.Intercomm]:
    """mpicoll's intercommunicator (made from an mpicoll.Comm) and MPI's, over the same groups."""
    world = mpicoll.Comm(WORLD)
    half = world.Split(COLOR, R)
    ours = half.Create_intercomm(0, world, 1 - COLOR)
    plain_half = WORLD.Split(COLOR, R)
    theirs = plain_half.Create_intercomm(0, WORLD, 1 - COLOR, tag=7)
    plain_half.Free()
    half.Free()
    return ours, theirs


@pytest.fixture
def pair():
    ours, theirs = _pair()
    yield ours, theirs
    ours.Free()
    theirs.Free()


def _roots(comm: MPI.Intercomm):
    """Every (group, root) of a rooted call, with the root argument this rank passes."""
    for group in (0, 1):
        size = comm.Get_size() if COLOR == group else comm.Get_remote_size()
        for root in range(size):
            if COLOR == group:
                yield MPI.ROOT if comm.Get_rank() == root else MPI.PROC_NULL
            else:
                yield root


def test_created_from_an_mpicoll_comm_is_both_classes_and_its_first_call_works(pair):
    ours, _ = pair
    check(isinstance(ours, MPI.Intercomm) and isinstance(ours, mpicoll.Intercomm), type(ours))
    y = np.empty(3)
    ours.Allreduce(np.full(3, R + 1.0), y)
    check(np.all(y == sum(q + 1.0 for q in OTHERS)), y)
    check(ours.Get_remote_size() == len(OTHERS))


def test_wrapping_mpi_intercomm_gives_an_intercomm(pair):
    _, theirs = pair
    wrapped = mpicoll.Comm(theirs)
    check(type(wrapped) is mpicoll.Intercomm, type(wrapped))
    out = np.empty(len(OTHERS), np.int64)
    wrapped.Allgather(np.array([R], np.int64), out)
    check(out.tolist() == OTHERS, out)
    wrapped._release()   # the handle is MPI's intercommunicator: the fixture frees it


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_every_buffer_collective_matches_mpi(pair, dtype):
    ours, theirs = pair
    n, m, r = ours.Get_size(), ours.Get_remote_size(), ours.Get_rank()
    rng = np.random.default_rng(100 + R)
    x = rng.integers(-50, 50, 5).astype(dtype)

    def both(call):
        a, b = call(ours), call(theirs)
        return a, b

    # Bcast, Gather, Scatter, Reduce from every root of either group
    for root in list(_roots(ours)):
        mine, ref = np.array(x), np.array(x)
        ours.Bcast(mine, root)
        theirs.Bcast(ref, root)
        check(np.array_equal(mine, ref), ("Bcast", root, mine, ref))

        sizes = m if root == MPI.ROOT else 1
        got, want = np.zeros(5 * sizes, dtype), np.zeros(5 * sizes, dtype)
        ours.Gather(x, got, root)
        theirs.Gather(x, want, root)
        check(np.array_equal(got, want), ("Gather", root))

        send = np.arange(5 * m, dtype=dtype) + R
        got, want = np.zeros(5, dtype), np.zeros(5, dtype)
        ours.Scatter(send, got, root)
        theirs.Scatter(send, want, root)
        check(np.array_equal(got, want), ("Scatter", root, got, want))

        got, want = np.zeros(5, dtype), np.zeros(5, dtype)
        ours.Reduce(x, got, MPI.SUM, root)
        theirs.Reduce(x, want, MPI.SUM, root)
        check(np.array_equal(got, want), ("Reduce", root, got, want))

        counts = [j + 1 for j in range(m)]
        got, want = np.zeros(sum(counts), dtype), np.zeros(sum(counts), dtype)
        ours.Gatherv(x[:r + 1], [got, counts], root)
        theirs.Gatherv(x[:r + 1], [want, counts], root)
        check(np.array_equal(got, want), ("Gatherv", root, got, want))

        got, want = np.zeros(r + 1, dtype), np.zeros(r + 1, dtype)
        ours.Scatterv([np.arange(sum(counts), dtype=dtype), counts], got, root)
        theirs.Scatterv([np.arange(sum(counts), dtype=dtype), counts], want, root)
        check(np.array_equal(got, want), ("Scatterv", root, got, want))

    for op in (MPI.SUM, MPI.MAX, MPI.PROD):
        got, want = np.zeros(5, dtype), np.zeros(5, dtype)
        ours.Allreduce(x, got, op)
        theirs.Allreduce(x, want, op)
        check(np.array_equal(got, want), ("Allreduce", op, got, want))

    got, want = np.zeros(5 * m, dtype), np.zeros(5 * m, dtype)
    ours.Allgather(x, got)
    theirs.Allgather(x, want)
    check(np.array_equal(got, want), "Allgather")

    counts = [(q % 3) + 1 for q in OTHERS]        # remote rank j sends (its world rank % 3) + 1 elements
    got, want = np.zeros(sum(counts), dtype), np.zeros(sum(counts), dtype)
    ours.Allgatherv(x[:R % 3 + 1], [got, counts])
    theirs.Allgatherv(x[:R % 3 + 1], [want, counts])
    check(np.array_equal(got, want), ("Allgatherv", got, want))

    send = (np.arange(3 * m) + 10 * R).astype(dtype)
    got, want = np.zeros(3 * m, dtype), np.zeros(3 * m, dtype)
    ours.Alltoall(send, got)
    theirs.Alltoall(send, want)
    check(np.array_equal(got, want), ("Alltoall", got, want))

    # Alltoallv: this rank sends j + 1 elements to remote rank j; remote rank j sends r + 1 to it
    scounts, rcounts = [j + 1 for j in range(m)], [r + 1] * m
    send = (np.arange(sum(scounts)) + 10 * R).astype(dtype)
    got, want = np.zeros(sum(rcounts), dtype), np.zeros(sum(rcounts), dtype)
    ours.Alltoallv([send, scounts], [got, rcounts])
    theirs.Alltoallv([send, scounts], [want, rcounts])
    check(np.array_equal(got, want), ("Alltoallv", got, want))

    # Reduce_scatter_block: each group's vectors have n_A * 2 == n_B * c elements: use the common count
    total = 2 * n * m   # divisible by either group's size
    send = (np.arange(total) + R).astype(dtype)
    got, want = np.zeros(total // n, dtype), np.zeros(total // n, dtype)
    ours.Reduce_scatter_block(send, got, MPI.SUM)
    theirs.Reduce_scatter_block(send, want, MPI.SUM)
    check(np.array_equal(got, want), ("Reduce_scatter_block", got, want))

    counts = [total // n] * n
    got, want = np.zeros(total // n, dtype), np.zeros(total // n, dtype)
    ours.Reduce_scatter(send, got, counts, MPI.SUM)
    theirs.Reduce_scatter(send, want, counts, MPI.SUM)
    check(np.array_equal(got, want), ("Reduce_scatter", got, want))
    uneven = [total // n + (1 if i == 0 and n > 1 else 0) - (1 if i == n - 1 and n > 1 else 0) for i in range(n)]
    got, want = np.zeros(uneven[r], dtype), np.zeros(uneven[r], dtype)
    ours.Reduce_scatter(send, got, uneven, MPI.SUM)
    theirs.Reduce_scatter(send, want, uneven, MPI.SUM)
    check(np.array_equal(got, want), ("Reduce_scatter uneven", got, want))
    got = np.zeros(uneven[r], dtype)
    ours.Reduce_scatter(send, got, None, MPI.SUM)     # recvcounts gathered from the ranks' recvbufs
    check(np.array_equal(got, want), ("Reduce_scatter recvcounts=None", got, want))

    ours.Barrier()


def test_alltoallw_with_derived_datatypes(pair):
    ours, theirs = pair
    m = ours.Get_remote_size()
    pairs_t = MPI.DOUBLE.Create_vector(2, 1, 2).Commit()    # every other double, twice
    try:
        send = np.arange(4.0 * m) + 100 * R
        types, counts, displs = [pairs_t] * m, [1] * m, [32 * j for j in range(m)]
        got, want = np.full(2 * m, -1.0), np.full(2 * m, -1.0)
        ours.Alltoallw([send, counts, displs, types], [got, [2] * m, [16 * j for j in range(m)], [MPI.DOUBLE] * m])
        theirs.Alltoallw([send, counts, displs, types],
                         [want, [2] * m, [16 * j for j in range(m)], [MPI.DOUBLE] * m])
        check(np.array_equal(got, want), (got, want))
    finally:
        pairs_t.Free()


def test_memory_buffer_with_a_strided_datatype(pair):
    """``MPI.memory`` with a vector datatype: only the strided elements are written."""
    ours, theirs = pair
    vector = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
    try:
        got, want = np.full(6, -1.0), np.full(6, -1.0)
        base = np.arange(6.0) + 1
        for comm, out in ((ours, got), (theirs, want)):
            if COLOR == 0:
                root = MPI.ROOT if comm.Get_rank() == 0 else MPI.PROC_NULL
                buf = MPI.memory.frombuffer(base) if comm.Get_rank() == 0 else None
                comm.Bcast([buf, 1, vector] if buf is not None else None, root)
            else:
                comm.Bcast([MPI.memory.frombuffer(out), 1, vector], 0)
        check(np.array_equal(got, want), (got, want))
        check(COLOR == 0 or np.array_equal(got, [1, -1, 3, -1, 5, -1]), got)
        base *= 10                 # again: the datatype is packed again from the new contents
        for comm, out in ((ours, got), (theirs, want)):
            if COLOR == 0:
                root = MPI.ROOT if comm.Get_rank() == 0 else MPI.PROC_NULL
                comm.Bcast([MPI.memory.frombuffer(base), 1, vector] if comm.Get_rank() == 0 else None, root)
            else:
                comm.Bcast([MPI.memory.frombuffer(out), 1, vector], 0)
        check(np.array_equal(got, want) and (COLOR == 0 or got[0] == 10), (got, want))
    finally:
        vector.Free()


def test_nonblocking_with_temporaries_waited_by_mpi4py(pair):
    ours, _ = pair
    m = ours.Get_remote_size()
    y = np.empty(4)
    g = np.empty(m, np.int64)
    reqs = [ours.Iallreduce(np.full(4, R + 1.0), y),          # a temporary send buffer
            ours.Iallgather(np.array([R], np.int64), g),
            ours.Ibarrier()]
    gc.collect()
    check(all(isinstance(q, MPI.Request) for q in reqs))
    MPI.Request.Waitall(reqs)
    check(np.all(y == sum(q + 1.0 for q in OTHERS)), y)
    check(g.tolist() == OTHERS, g)


def test_persistent_requests_start_again(pair):
    ours, _ = pair
    x, y = np.zeros(3), np.empty(3)
    req = ours.Allreduce_init(x, y)
    check(isinstance(req, MPI.Prequest))
    for k in range(3):
        x[:] = k + R
        req.Start()
        req.Wait()
        check(np.all(y == sum(k + q for q in OTHERS)), (k, y))
    req.Free()
    buf = np.zeros(2)
    roots = list(_roots(ours))
    reqs = [ours.Bcast_init(buf, root) for root in roots[:1]]
    for k in range(2):
        if roots[0] == MPI.ROOT:
            buf[:] = k + 1
        for q in reqs:
            q.Start()
            q.Wait()
        check(roots[0] in (MPI.ROOT, MPI.PROC_NULL) or np.all(buf == k + 1), buf)
    for q in reqs:
        q.Free()


def test_bad_root_on_one_rank_raises_everywhere(pair):
    ours, _ = pair
    root = 99 if R == 0 else list(_roots(ours))[0]
    x = np.zeros(2)
    try:
        ours.Bcast(x, root)
        outcome = None
    except Exception as exc:   # noqa: BLE001
        outcome = exc
    if R == 0:
        check(isinstance(outcome, MPI.Exception) and outcome.Get_error_class() == MPI.ERR_ROOT, repr(outcome))
    else:
        check(isinstance(outcome, mpicoll.ArgumentError) and "rank(s) [0] of" in str(outcome), repr(outcome))
    # and the communicator works afterwards
    y = np.empty(1)
    ours.Allreduce(np.ones(1), y)
    check(y[0] == len(OTHERS), y)


def test_algorithm_keyword_auto_runs_another_name_is_refused_on_every_rank(pair):
    """The collectives take ``algorithm=`` as an intracommunicator's do (the methods are shared); an
    intercommunicator collective has one composition, so a name other than "auto" on one rank is a bad argument
    that every rank learns of through the agreement, in blocking, nonblocking and persistent calls."""
    ours, _ = pair
    y = np.empty(2)
    ours.Allreduce(np.ones(2), y, algorithm="auto")
    check(np.all(y == len(OTHERS)), y)
    for run in (lambda a: ours.Allreduce(np.ones(2), y, algorithm=a),
                lambda a: ours.Iallreduce(np.ones(2), y, algorithm=a).Wait()):
        try:
            run("ring" if R == 0 else "auto")
            outcome = None
        except Exception as exc:   # noqa: BLE001
            outcome = exc
        if R == 0:
            check(isinstance(outcome, ValueError) and "one algorithm, 'auto'" in str(outcome), repr(outcome))
        else:
            check(isinstance(outcome, mpicoll.ArgumentError), repr(outcome))
    with pytest.raises(ValueError, match="one algorithm"):
        ours.Allreduce_init(np.ones(2), y, algorithm="ring")   # persistent: checked when made, on every rank
    ours.Barrier(algorithm="auto")


def test_in_place_is_refused_before_any_message(pair):
    ours, _ = pair
    y = np.ones(2)
    send = MPI.IN_PLACE if R == 1 else np.ones(2)
    with pytest.raises((ValueError, mpicoll.ArgumentError)) as info:
        ours.Allreduce(send, y)
    check(R != 1 or "IN_PLACE" in str(info.value), str(info.value))
    check(np.all(y == 1), y)    # nobody's buffer was written


def test_object_collectives(pair):
    ours, _ = pair
    m = ours.Get_remote_size()
    check(ours.allgather({"rank": R}) == [{"rank": q} for q in OTHERS])
    check(ours.allreduce(R) == sum(OTHERS))
    check(ours.allreduce(str(R), op=lambda a, b: a + b) == "".join(map(str, OTHERS)))   # rank order
    check(ours.alltoall([(R, j) for j in range(m)]) == [(q, ours.Get_rank()) for q in OTHERS])
    for root in list(_roots(ours)):
        in_roots_group = root in (MPI.ROOT, MPI.PROC_NULL)
        got = ours.bcast({"from": R}, root)
        check((got is None) if in_roots_group else isinstance(got, dict), got)
        gathered = ours.gather(R, root)
        check(gathered == (OTHERS if root == MPI.ROOT else None), gathered)
        reduced = ours.reduce([R], op=lambda a, b: a + b, root=root)
        check(reduced == (OTHERS if root == MPI.ROOT else None), reduced)
        scattered = ours.scatter([j * 10 for j in range(m)] if root == MPI.ROOT else None, root)
        check(scattered == (None if in_roots_group else ours.Get_rank() * 10), scattered)
    ours.barrier()


class _Unpicklable:
    def __reduce__(self):
        raise pickle.PicklingError("not today")


def test_an_object_that_does_not_pickle_on_one_rank(pair):
    ours, _ = pair
    obj = _Unpicklable() if R == 1 else R
    try:
        ours.allgather(obj)
        outcome = None
    except Exception as exc:   # noqa: BLE001
        outcome = exc
    if R == 1:
        check(isinstance(outcome, pickle.PicklingError), repr(outcome))
    else:
        check(isinstance(outcome, mpicoll.ArgumentError), repr(outcome))
    check(ours.allreduce(1) == len(OTHERS))


def test_merge_and_dup_are_mpicoll_communicators(pair):
    ours, _ = pair
    merged = ours.Merge(high=COLOR == 1)
    check(type(merged) is mpicoll.Comm, type(merged))
    check(merged.Get_size() == P)
    rank_of_group0 = merged.allgather(COLOR)
    check(rank_of_group0 == sorted(rank_of_group0), rank_of_group0)   # the low group first
    y = np.empty(1)
    merged.Allreduce(np.ones(1), y)
    check(y[0] == P)
    dup = ours.Dup()
    check(type(dup) is mpicoll.Intercomm and dup._state is not ours._state)
    check(dup.allgather(R) == OTHERS)
    dup.Free()
    merged.Free()


def test_state_is_released_when_freed_and_when_dropped():
    ours, theirs = _pair()
    state = weakref.ref(ours._state)
    merged = ours._state.merged
    ours.Free()
    check(ours._state is None and merged == MPI.COMM_NULL)
    theirs.Free()
    gc.collect()
    check(state() is None)

    def alive() -> int:
        gc.collect()
        return sum(isinstance(o, InterState) for o in gc.get_objects())

    before = alive()
    for _ in range(20):   # made and dropped without Free: the states go (with their communicators)
        dropped, plain = _pair()
        plain.Free()
        dropped.allreduce(1)
        MPI.Intercomm.Free(dropped)
        del dropped
    after = alive()
    for _ in range(50):    # a request the progress thread is letting go of may hold one for a moment
        if after <= before:
            break
        time.sleep(0.02)
        after = alive()
    check(after <= before, (after, before))


def test_non_commutative_op_reduces_in_rank_order(pair):
    """A user op that keeps its left operand: the result is the remote group's rank 0's value (rank order)."""
    ours, theirs = pair

    def first(inbuf, inoutbuf, datatype):
        np.frombuffer(inoutbuf, np.float64)[:] = np.frombuffer(inbuf, np.float64)

    op = MPI.Op.Create(first, commute=False)
    try:
        got, want = np.empty(2), np.empty(2)
        ours.Allreduce(np.full(2, float(R)), got, op)
        theirs.Allreduce(np.full(2, float(R)), want, op)
        check(np.array_equal(got, want) and got[0] == OTHERS[0], (got, want))
    finally:
        op.Free()


def test_threads_each_on_its_own_intercomm():
    """Two threads per rank, each calling collectives on its own intercommunicator at the same time."""
    import threading

    pairs = [_pair() for _ in range(2)]
    results: dict[int, object] = {}

    def work(k: int) -> None:
        ours = pairs[k][0]
        try:
            for i in range(20):
                y = np.empty(8)
                ours.Allreduce(np.full(8, R + k + i, np.float64), y)
                assert np.all(y == sum(q + k + i for q in OTHERS)), (k, i, y)
                assert ours.allreduce(k) == k * len(OTHERS)
            results[k] = True
        except Exception as exc:   # noqa: BLE001
            results[k] = exc

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(results == {0: True, 1: True}, results)
    for ours, theirs in pairs:
        ours.Free()
        theirs.Free()


def test_repeated_small_calls_are_kept_built_and_the_cache_stays_bounded(pair):
    """The same small call again runs the rounds built the first time; fresh buffers every call keep at most
    CACHED_CALLS built calls (and their buffers) alive."""
    from mpicoll.comm import inter

    ours, _ = pair
    state = ours._state
    x, y = np.ones(4), np.empty(4)
    for k in range(3):
        x[:] = k
        ours.Allreduce(x, y)
        check(np.all(y == k * len(OTHERS)), y)
    kept = [key for key in state.calls]
    check(len(kept) == 1, len(kept))
    x.resize(8, refcheck=True)     # the kept call views x by address: it holds no reference to it
    y.resize(8, refcheck=True)
    ours.Allreduce(x, y)           # new addresses or extents: another key
    check(np.array_equal(y, x * len(OTHERS)), y)
    for k in range(3 * inter.CACHED_CALLS):
        out = np.empty(4)
        ours.Allreduce(np.full(4, float(k)), out)
        check(np.all(out == k * len(OTHERS)), out)
    check(len(state.calls) <= inter.CACHED_CALLS, len(state.calls))
    before = list(state.calls)
    big = np.ones((inter.CACHED_BYTES // 8) + 1)     # its messages exceed CACHED_BYTES: built, run, not kept
    ours.Allreduce(big, np.empty_like(big))
    check(list(state.calls) == before)
    part = np.ones(inter.CACHED_BYTES // 8 // 12)    # kept while they fit: older ones go to stay under the bound
    for _ in range(12):
        ours.Allreduce(np.ones_like(part), np.empty_like(part))
    check(0 < state.calls.held <= inter.CACHED_BYTES, state.calls.held)
    check(state.calls.held == sum(state.calls.sizes.values()))
