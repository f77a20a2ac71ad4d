"""The blocking call path: plans cached for every buffer kind, never stale, bounded; one tag per call."""

from __future__ import annotations

import array
import gc
import mmap

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.comm import dispatch, preparing
from mpicoll.engine.forms import BLOCKING
from mpicoll.program.callkey import call_key
from mpicoll.program.plancache import PLAN_CACHE_ENTRIES

from conftest import WORLD, check, counting_prepare


def _comm() -> mpicoll.Comm:
    """A communicator of its own (its caches and tags start empty)."""
    return mpicoll.Comm(WORLD.Dup())


def test_repeated_calls_reuse_their_plan_and_changes_make_new_ones(monkeypatch):
    comm = _comm()
    def cached(method, *args, algorithm):   # what a blocking call uses
        return dispatch._cached_prepare(comm._state, method, args, algorithm, call_key(method, args, algorithm))

    x = np.arange(8, dtype=np.float64)
    y = np.empty_like(x)
    first = cached("Allreduce", x, y, MPI.SUM, algorithm="auto")
    check(cached("Allreduce", x, y, MPI.SUM, algorithm="auto") is first, "a repeated call reuses its plan")
    # nonblocking and persistent calls get plans of their own (no shared scratch between outstanding calls)
    fresh = preparing.prepare(comm._state, "Allreduce", (x, y, MPI.SUM), "auto")
    check(fresh is not first, "nonblocking plans are fresh")
    check(cached("Allreduce", x, y, MPI.SUM, algorithm="ring") is not first, "another algorithm, another plan")
    check(cached("Allreduce", x, y, MPI.MAX, algorithm="auto") is not first, "another op, another plan")
    check(cached("Allreduce", x[:4], y[:4], MPI.SUM, algorithm="auto") is not first, "another extent")
    check(cached("Allreduce", x.view(np.int64), y.view(np.int64), MPI.SUM, algorithm="auto") is not first,
          "another dtype on the same memory")
    monkeypatch.setenv("MPICOLL_ALGO", "allreduce=linear")
    forced = cached("Allreduce", x, y, MPI.SUM, algorithm="auto")
    check(forced is not first and forced.schedule.algorithm == "linear", "MPICOLL_ALGO is part of the key")
    monkeypatch.delenv("MPICOLL_ALGO")
    x[...] = WORLD.rank + 1       # new contents, same arrays: the cached plan reads them
    comm.Allreduce(x, y, op=MPI.SUM)
    check(np.all(y == WORLD.size * (WORLD.size + 1) / 2), "the cached plan sees the new send data")
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        comm.Allreduce(x, y, op=MPI.SUM)   # writability is part of the key, so the check runs again
    y.flags.writeable = True
    monkeypatch.setenv("MPICOLL_DEBUG", "1")
    check(mpicoll.Comm(WORLD.Dup())._state.entries is None, "debug mode checks every call: nothing cached")


def _kinds(nbytes: int) -> dict:
    """The same kind of buffer, made fresh: each maker returns (object, MPI datatype or None)."""
    return {
        "numpy": lambda: (np.zeros(nbytes, np.uint8), None),
        "bytearray": lambda: (bytearray(nbytes), None),
        "mmap": lambda: (mmap.mmap(-1, nbytes), None),
        "array": lambda: (array.array("b", bytes(nbytes)), None),
        "memoryview": lambda: (memoryview(bytearray(nbytes)), None),
        "list-spec": lambda: ([bytearray(nbytes), nbytes, MPI.BYTE], MPI.BYTE),
    }


@pytest.mark.parametrize("kind", list(_kinds(1)))
def test_every_buffer_kind_is_cached_and_gets_the_right_data(kind):
    comm = _comm()
    make = _kinds(16)[kind]
    buf, _ = make()
    before = len(comm._state.plans)
    for value in (3, 7, 11):
        raw = buf[0] if isinstance(buf, list) else buf
        view = np.frombuffer(raw, np.uint8) if not isinstance(raw, np.ndarray) else raw
        if WORLD.rank == 0:
            view[...] = value
        comm.Bcast(buf, root=0)
        check(bool(np.all(view == value)), f"{kind}: received {view[:4]} instead of {value}")
        del view
    plans = comm._state.plans
    check(len(plans) == before + 1, f"{kind}: {len(plans) - before} plans for three equal calls")
    if kind == "bytearray":
        buf.extend(b"x")     # the cache does not hold the buffer exported: it can still grow
    if kind == "mmap":
        buf.close()          # ... or be closed


def test_buffers_that_differ_never_reuse_a_stale_plan():
    comm = _comm()
    a = bytearray(32)
    b = bytearray(32)
    for target, value in ((a, 1), (b, 2), (a, 3)):
        view = np.frombuffer(target, np.uint8)
        if WORLD.rank == 0:
            view[...] = value
        comm.Bcast(target, root=0)
        check(bool(np.all(view == value)), "a plan bound to another buffer was reused")
        del view
    # the same memory, another count, displacement or datatype: another plan, and the built-in's result
    x = np.zeros(8, np.float64)
    ref = np.zeros(8, np.float64)
    plans = set()
    for make in (lambda v: [v, 4, MPI.DOUBLE], lambda v: [v, 8, MPI.DOUBLE], lambda v: [v, 8, MPI.FLOAT],
                 lambda v: [v, (4, 4), MPI.DOUBLE], lambda v: v[2:6], lambda v: v):
        for v in (x, ref):
            v[...] = np.arange(8) if WORLD.rank == 0 else -1
        comm.Bcast(make(x), root=0)
        WORLD.Bcast(make(ref), root=0)
        check(np.array_equal(x, ref), f"{x} instead of the built-in's {ref}")
        args = (make(x), 0)
        plans.add(id(dispatch._cached_prepare(comm._state, "Bcast", args, "auto", call_key("Bcast", args, "auto"))))
    check(len(plans) == 6, f"{len(plans)} plans for six different specs")
    # a grown bytearray moves; the plan of its old address is not used for its new memory
    c = bytearray(16)
    comm.Bcast(c, root=0)
    c.extend(bytes(1 << 16))
    del c[16:]
    view = np.frombuffer(c, np.uint8)
    if WORLD.rank == 0:
        view[...] = 9
    comm.Bcast(c, root=0)
    check(bool(np.all(view == 9)), "a moved buffer received nothing")


def test_the_same_memory_read_in_another_format_gets_its_own_plan():
    # a bytes-like buffer without a datatype is read in its own element format: doubles, then ints
    comm = _comm()
    send, recv = bytearray(32), bytearray(32)
    product = np.prod(np.arange(2, WORLD.size + 2))   # of rank + 2 over the ranks (a plan of doubles gives 0)
    for fmt, dtype in (("d", np.float64), ("i", np.int32), ("d", np.float64)):
        np.frombuffer(send, dtype)[...] = WORLD.rank + 2
        comm.Allreduce(memoryview(send).cast(fmt), memoryview(recv).cast(fmt), op=MPI.PROD)
        got = np.frombuffer(recv, dtype)
        check(bool(np.all(got == product)), f"{fmt}: {got}, expected {product}")


def test_arrays_of_other_shapes_on_the_same_memory_are_bound_in_memory_order():
    # the key leaves out shape and strides: contiguous arrays are bound in memory order, whatever their shape
    comm = _comm()
    memory = np.zeros(12)
    ref = np.zeros(12)
    for view in (lambda m: m, lambda m: m.reshape(3, 4), lambda m: m.reshape(4, 3).T, lambda m: m.reshape(2, 6)):
        for m in (memory, ref):
            m[...] = np.arange(12) * (WORLD.rank + 1)
        comm.Allreduce(MPI.IN_PLACE, view(memory), op=MPI.SUM)
        WORLD.Allreduce(MPI.IN_PLACE, view(ref), op=MPI.SUM)
        check(np.array_equal(memory, ref), f"{memory} instead of the built-in's {ref}")


@pytest.mark.parametrize("kind", ["numpy", "array", "list"])
def test_counts_changed_in_place_make_a_new_plan(kind):
    # Reduce_scatter's recvcounts are keyed by value: new contents in the same object are a new call.  With
    # p >= 3 the second counts give rank 1 the same count as before, so only the contents tell the calls apart.
    comm = _comm()
    p = WORLD.size
    send = np.arange(2 * p, dtype=np.float64) + WORLD.rank
    total = p * np.arange(2 * p) + p * (p - 1) / 2      # the sum of every rank's send buffer
    recv = np.zeros(2 * p)
    counts = {"numpy": np.full(p, 2, dtype=np.int32), "array": array.array("i", [2] * p), "list": [2] * p}[kind]
    second = [1, 2, 3] + [2] * (p - 3) if p >= 3 else [2] * p
    for values in ([2] * p, second, [2] * p, second):
        for i, v in enumerate(values):
            counts[i] = v
        n, start = values[WORLD.rank], sum(values[:WORLD.rank])
        recv[...] = -1
        comm.Reduce_scatter(send, [recv, n, MPI.DOUBLE], counts, op=MPI.SUM)
        check(np.array_equal(recv[:n], total[start:start + n]), f"counts {values}: {recv[:n]}")


def _resident() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * mmap.PAGESIZE


def _growth(one, warmup: int, calls: int) -> int:
    """Bytes of resident memory gained over ``calls`` calls of ``one(i)``, after ``warmup`` calls."""
    for i in range(warmup):
        one(i)
    gc.collect()
    base = _resident()
    for i in range(calls):
        one(i)
    gc.collect()
    return _resident() - base


def _fresh_buffer(i: int):
    """A new buffer of one of three kinds per call: a NumPy array, a bytearray, an anonymous mmap."""
    return (np.full(2, 1.0), bytearray(8), mmap.mmap(-1, 64))[i % 3]


def test_fresh_buffers_every_call_keep_memory_flat():
    comm = _comm()
    calls = 40_000

    def one(i: int) -> None:
        buf = _fresh_buffer(i)
        if i % 3 == 0:
            comm.Allreduce(MPI.IN_PLACE, buf)
        elif i % 3 == 1:
            comm.Bcast(buf, root=0)
        else:
            comm.Bcast([buf, 8, MPI.BYTE], root=0)

    # What making the buffers alone costs, no call at all: nothing on Open MPI; with MPICH over UCX, UCX's
    # hooks on mmap/munmap keep 144 bytes per mmap for good (docs/support.rst), which is not mpicoll's to free.
    making = _growth(_fresh_buffer, warmup=3000, calls=calls)
    grown = _growth(one, warmup=3000, calls=calls)
    check(len(comm._state.plans) <= PLAN_CACHE_ENTRIES, f"{len(comm._state.plans)} cached plans")
    check(grown - making < 4 * 1024 * 1024,
          f"resident memory grew by {grown} bytes over {calls} calls ({making} bytes for making the buffers alone)")


def test_the_cache_is_bounded():
    comm = _comm()
    keep = [np.full(3, float(i)) for i in range(PLAN_CACHE_ENTRIES + 10)]
    for x in keep:
        comm.Allreduce(MPI.IN_PLACE, x)
    check(len(comm._state.plans) == PLAN_CACHE_ENTRIES)


def test_a_leftover_message_of_a_bad_call_never_reaches_a_later_call():
    """Rank 1 calls Bcast with count 0 (nothing to receive) while rank 0 sends: the message stays unmatched.

    With one tag for every blocking call, the next Bcast on rank 1 would receive that stale message
    (the value 111); with a per-call tag it receives its own (222), and later collectives work.
    """
    comm = _comm()
    if WORLD.size < 2:
        pytest.skip("needs two ranks")
    buf = np.array([111.0 if WORLD.rank == 0 else 0.0])
    comm.Bcast([buf, 1 if WORLD.rank == 0 else 0, MPI.DOUBLE], root=0, algorithm="linear")   # erroneous
    buf[0] = 222.0 if WORLD.rank == 0 else 0.0
    comm.Bcast(buf, root=0, algorithm="linear")
    check(buf[0] == 222.0, f"the second Bcast received {buf[0]}")
    comm.Barrier()
    x = np.full(3, float(WORLD.rank))
    y = np.empty(3)
    comm.Allreduce(x, y)
    check(bool(np.all(y == sum(range(WORLD.size)))), "Allreduce after the bad call")


def test_a_call_that_fails_its_checks_still_counts():
    comm = _comm()
    with pytest.raises(ValueError):
        comm.Allreduce(np.ones(2), np.ones(2), algorithm="no_such_algorithm")
    tags = WORLD.allgather(comm._state.next_tag(BLOCKING))
    check(tags == [2 * comm._state.tags[2]] * WORLD.size, f"ranks drew {tags}")   # the second number


def test_calls_with_nothing_to_do_are_cached_too(monkeypatch):
    comm = _comm()
    prepared = counting_prepare(monkeypatch, comm, "Allreduce")
    x, y = np.zeros(0), np.zeros(0)
    for _ in range(5):
        comm.Allreduce(x, y)
    check(len(prepared) == 1, f"a zero-count Allreduce was prepared {len(prepared)} times in 5 calls")
    x, y = np.ones(3), np.zeros(3)      # then a real call on other memory: its own plan, the right result
    comm.Allreduce(x, y)
    check(len(prepared) == 2 and np.all(y == WORLD.size), f"prepared {len(prepared)} times, y = {y}")


def test_counts_in_array_array_are_cached_by_value(monkeypatch):
    comm = _comm()
    p = WORLD.size
    prepared = counting_prepare(monkeypatch, comm, "Alltoallv")
    send = np.arange(2 * p, dtype=np.uint8) + 10 * WORLD.rank
    counts, displs = array.array("i", [2] * p), array.array("i", range(0, 2 * p, 2))
    recv = np.zeros(2 * p, np.uint8)
    for _ in range(3):
        comm.Alltoallv([send, (counts, displs), MPI.BYTE], [recv, (counts, displs), MPI.BYTE])
    check(len(prepared) == 1, f"repeated Alltoallv with array('i') counts prepared {len(prepared)} times")
    counts[:] = array.array("i", [1] * p)    # the same array objects, new contents: a new plan
    recv = np.zeros(2 * p, np.uint8)
    ref = np.zeros(2 * p, np.uint8)
    comm.Alltoallv([send, (counts, displs), MPI.BYTE], [recv, (counts, displs), MPI.BYTE])
    WORLD.Alltoallv([send, (counts, displs), MPI.BYTE], [ref, (counts, displs), MPI.BYTE])
    check(len(prepared) == 2 and np.array_equal(recv, ref), f"after new counts: {recv}, built-in {ref}")


def test_cached_plans_share_one_scratch_arena():
    """Eight Allreduces on eight different 1 MiB buffers, interleaved: eight cached plans, one scratch arena.

    Their scratch views the same memory (the calls run one at a time), so the
    cache holds the largest scratch, not eight; results stay right call after call.
    """
    comm = _comm()
    p, n = WORLD.size, 1 << 17          # 1 MiB of float64
    sends = [np.full(n, float(WORLD.rank + k)) for k in range(8)]
    recvs = [np.zeros(n) for _ in range(8)]
    for trial in range(3):
        for k in range(8):
            recvs[k][...] = -1
            comm.Allreduce(sends[k], recvs[k], algorithm="ring")
            expected = p * (p - 1) / 2 + p * k
            check(bool(np.all(recvs[k] == expected)), f"trial {trial}, buffer {k}: {recvs[k][:3]} != {expected}")
    cache = comm._state.plans
    check(len(cache) >= 8, f"{len(cache)} plans cached for 8 calls")
    if p > 1:
        check(cache.shared is not None and cache.shared.nbytes <= 2 * n * 8, "the arena is one call's scratch")
        check(cache.scratch_held < n * 8, f"{cache.scratch_held} bytes of scratch held outside the arena")


@pytest.mark.parametrize("algorithm", ["auto", "ring", "recursive_doubling"])
def test_a_call_on_other_memory_moves_a_plan_of_its_shape(monkeypatch, algorithm):
    """Allreduce on views at 12 offsets of two large arrays: prepared once, the built-in's result every time.

    The views overlap from one call to the next (offsets 0, 3, 6, ...), so a plan
    that kept viewing the memory of an earlier call would give wrong sums.
    """
    comm = _comm()
    prepared = counting_prepare(monkeypatch, comm, "Allreduce")
    n = 4 * WORLD.size + 1
    rng = np.random.default_rng(WORLD.rank)
    send = rng.integers(0, 100, 64 + n).astype(np.float64)
    recv, ref = np.zeros(64 + n), np.zeros(64 + n)
    for offset in range(0, 36, 3):
        recv[...] = ref[...] = -1
        comm.Allreduce(send[offset:offset + n], recv[offset:offset + n], algorithm=algorithm)
        WORLD.Allreduce(send[offset:offset + n], ref[offset:offset + n])
        check(np.array_equal(recv, ref), f"offset {offset}: {recv[offset:offset + 4]}, "
                                         f"built-in {ref[offset:offset + 4]}")
    check(len(prepared) == 1, f"{len(prepared)} prepares for 12 calls of one shape")
    # in place: send and recv are one array, and stay one in the moved plan
    for offset in (0, 5, 10):
        recv[...] = ref[...] = np.arange(64 + n) + WORLD.rank
        comm.Allreduce(MPI.IN_PLACE, recv[offset:offset + n], algorithm=algorithm)
        WORLD.Allreduce(MPI.IN_PLACE, ref[offset:offset + n])
        check(np.array_equal(recv, ref), f"in place, offset {offset}: {recv[offset:offset + 4]}")


@pytest.mark.parametrize("method", ["Bcast", "Reduce", "Allgather", "Alltoall", "Scatter", "Gather",
                                    "Reduce_scatter_block", "Scan"])
def test_every_collective_moved_to_other_memory_matches_the_builtin(monkeypatch, method):
    comm = _comm()
    prepared = counting_prepare(monkeypatch, comm, method)
    p, n = WORLD.size, 3
    root = p - 1
    size = n * p
    send_all = np.arange(40 + size, dtype=np.int64) * (WORLD.rank + 2)
    mine, ref_mine = np.zeros(40 + size, np.int64), np.zeros(40 + size, np.int64)
    for offset in (0, 7, 14, 21, 7):
        send = send_all[offset:offset + size]
        for target in (mine, ref_mine):
            target[...] = -1
        got, want = mine[offset:offset + size], ref_mine[offset:offset + size]
        if method == "Bcast":
            for buf in (got, want):
                buf[...] = send if WORLD.rank == root else 0
            calls = [(got, root), (want, root)]
        elif method in ("Reduce", "Scan"):
            calls = [(send, got) + ((MPI.SUM, root) if method == "Reduce" else ()),
                     (send, want) + ((MPI.SUM, root) if method == "Reduce" else ())]
        elif method in ("Allgather", "Gather"):
            extra = (root,) if method == "Gather" else ()
            calls = [(send[:n], got) + extra, (send[:n], want) + extra]
        elif method == "Scatter":
            calls = [(send, got[:n], root), (send, want[:n], root)]
        elif method == "Reduce_scatter_block":
            calls = [(send, got[:n]), (send, want[:n])]
        else:   # Alltoall
            calls = [(send, got), (send, want)]
        getattr(comm, method)(*calls[0])
        getattr(WORLD, method)(*calls[1])
        check(np.array_equal(mine, ref_mine), f"{method}, offset {offset}: {mine[offset:offset + size]}, "
                                              f"built-in {ref_mine[offset:offset + size]}")
    check(len(prepared) <= 1, f"{method}: {len(prepared)} prepares for 5 calls of one shape")


def test_calls_whose_buffers_overlap_are_prepared_again(monkeypatch):
    """A shape's plan moves only to buffers that do not overlap: what overlapping ones do is not the shape's."""
    comm = _comm()
    prepared = counting_prepare(monkeypatch, comm, "Allgather")
    p = WORLD.size
    memory = np.zeros(4 * p + 4)
    comm.Allgather(memory[:1], memory[2:2 + p])           # disjoint: prepared, and remembered by shape
    comm.Allgather(memory[1:2], memory[2 + p:2 + 2 * p])  # the same shape elsewhere: moved
    check(len(prepared) == 1, f"{len(prepared)} prepares for two disjoint calls of one shape")
    comm.Allgather(memory[2:3], memory[2:2 + p])           # send inside recv (erroneous in MPI): prepared again
    check(len(prepared) == 2, f"{len(prepared)} prepares: an overlapping call must not take a moved plan")


def test_shapes_are_bounded_and_follow_the_arena():
    comm = _comm()
    arrays = [np.ones(k + 1) for k in range(PLAN_CACHE_ENTRIES + 20)]
    for x in arrays:
        comm.Allreduce(MPI.IN_PLACE, x)
    check(len(comm._state.plans.shapes) <= PLAN_CACHE_ENTRIES, f"{len(comm._state.plans.shapes)} shapes remembered")
    if WORLD.size > 1:
        # a larger scratch grows the arena, which drops every plan that viewed the old one, shapes included
        before = len(comm._state.plans.shapes)
        big = np.ones(1 << 20)
        comm.Allreduce(MPI.IN_PLACE, big, algorithm="ring")
        shapes = comm._state.plans.shapes
        check(before > 0 and len(shapes) <= 1, f"{len(shapes)} shapes after the arena grew")


def test_fresh_offsets_every_call_keep_memory_flat():
    """40,000 calls on views at ever new offsets (ten turns of 4,000): every call misses, each moves a plan;
    memory stays flat."""
    comm = _comm()
    send, recv = np.ones(4096), np.zeros(4096)
    calls = 40_000

    def one(i: int) -> None:
        at = i % 4000
        kind = i % 3
        if kind == 0:
            comm.Allreduce(send[at:at + 3], recv[at:at + 3])    # a new address: a plan moved
        elif kind == 1:
            comm.Bcast(recv[at:at + 2], root=0)
        else:
            comm.Bcast([recv, (2, at), MPI.DOUBLE], root=0)     # a new displacement: a new shape, prepared

    grown = _growth(one, warmup=4000, calls=calls)
    plans = comm._state.plans
    check(len(plans) <= PLAN_CACHE_ENTRIES and len(plans.shapes) <= PLAN_CACHE_ENTRIES, "bounded")
    check(grown < 4 * 1024 * 1024, f"resident memory grew by {grown} bytes over {calls} calls")
    check(bool(np.all(recv[:3] == WORLD.size)), f"{recv[:3]}")
