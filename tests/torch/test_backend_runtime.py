"""What a torch user meets on "mpicoll" as on Gloo: profiler events, "timed out", monitored_barrier, sparse tensors,
configuration errors; and how asynchronous calls run (mpicoll's requests, futures without a wait)."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402
from mpi4py import MPI  # noqa: E402

import mpicoll  # noqa: E402
import mpicoll.torch  # noqa: E402

from conftest import WORLD, check, raises_everywhere  # noqa: E402

# -- torch's profiler ---------------------------------------------------------------------------------------------


def test_profiler_shows_every_call_as_mpicoll_op(rank, size):
    t = torch.ones(4)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dist.all_reduce(t)
        dist.all_reduce(t, async_op=True).wait()
        dist.broadcast(t, group_src=0)
        dist.all_gather_into_tensor(torch.empty(4 * size), t)
        dist.barrier()
        right, left = (rank + 1) % size, (rank - 1) % size
        works = [dist.isend(torch.ones(2), dst=right), dist.irecv(torch.empty(2), src=left)]
        for w in works:
            w.wait()
    names = {e.name for e in prof.events()}
    want = {"mpicoll:all_reduce", "mpicoll:broadcast", "mpicoll:all_gather_into_tensor", "mpicoll:barrier",
            "mpicoll:send", "mpicoll:recv"}
    check(want <= names, f"missing {want - names}; mpicoll events: {sorted(n for n in names if 'mpicoll' in n)}")
    counts = [e.count for e in prof.key_averages() if e.key == "mpicoll:all_reduce"]
    check(counts == [2], f"{counts}")


@pytest.mark.parametrize("profiler", ["autograd", "torch"])
def test_profiler_events_are_asynchronous_with_the_input_shapes(rank, size, profiler):
    # torch's own distributed tests check every event of a backend as Gloo's: asynchronous (it ends on another
    # thread than it began on: the call runs until its Work completes), one event per call, the inputs' shapes
    t = torch.ones(3, 2)
    ctx = (torch.autograd.profiler.profile(record_shapes=True) if profiler == "autograd" else
           torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True))
    right, left = (rank + 1) % size, (rank - 1) % size
    with ctx as prof:
        dist.all_reduce(t)                                   # blocking, the fast path
        dist.all_reduce(t, async_op=True).wait()             # a request, waited for in the caller
        work = dist.broadcast(t, group_src=0, async_op=True)
        work.get_future().wait()                             # completed by the futures' thread
        dist.all_gather_into_tensor(torch.empty(3 * size, 2), t)
        dist.all_reduce_coalesced([t, torch.ones(5)])
        dist.barrier()
        works = [dist.isend(torch.ones(4), dst=right), dist.irecv(torch.empty(4), src=left)]
        for w in works:
            w.wait()
    events = prof.function_events if profiler == "autograd" else prof.events()
    ours = [e for e in events if e.name.startswith("mpicoll:")]
    seen = {(e.name, bool(e.is_async), e.count, str(e.input_shapes)) for e in ours}
    want = {("mpicoll:all_reduce", True, 1, "[[3, 2]]"), ("mpicoll:broadcast", True, 1, "[[3, 2]]"),
            ("mpicoll:all_gather_into_tensor", True, 1, "[[3, 2]]"), ("mpicoll:barrier", True, 1, "[]"),
            ("mpicoll:all_reduce_coalesced", True, 1, "[[3, 2], [5]]"), ("mpicoll:send", True, 1, "[[4]]"),
            ("mpicoll:recv", True, 1, "[[4]]")}
    check(seen == want and len(ours) == 8, f"{sorted(seen)} ({len(ours)} events)")


def test_profiler_event_spans_the_call_until_its_work_completes(rank, size):
    # an asynchronous call's event lasts until the Work completes, not only the start in the caller
    group = dist.new_group()
    with torch.autograd.profiler.profile() as prof:
        if rank == 0:
            work = dist.all_reduce(torch.ones(1), group=group, async_op=True)
            WORLD.Barrier()
            time.sleep(0.2)                 # the others join only now: the call cannot complete before
            WORLD.Barrier()
            work.wait()
        else:
            WORLD.Barrier()
            WORLD.Barrier()
            dist.all_reduce(torch.ones(1), group=group)
    spans = [e.cpu_time_total for e in prof.function_events if e.name == "mpicoll:all_reduce"]
    check(rank != 0 or (len(spans) == 1 and spans[0] >= 150e3), f"{spans} us")


def test_no_events_without_a_profiler():
    check(not mpicoll.torch.events.profiling())   # the flag the backend reads before making any event


# -- timeouts --------------------------------------------------------------------------------------------------


TORCH_TIMEOUT = re.compile(" (Timed out|closed|timeout) ")   # what torch's own tests expect of a timeout's message


@pytest.mark.parametrize("blocking", ["fast", "planned", "async"])
def test_a_group_timeout_says_timed_out(rank, size, blocking):
    # torch's convention: a timeout's message says "Timed out" (Gloo's words, which torch's tests look for), as a
    # DistBackendError; it is mpicoll's CollectiveTimeout too, naming the ranks it waited for
    group = dist.new_group(timeout=timedelta(seconds=1))
    raised = None
    if rank == 0:
        start = time.monotonic()
        try:
            if blocking == "fast":
                dist.all_reduce(torch.ones(1), group=group)
            elif blocking == "planned":
                dist.barrier(group=group)
            else:
                dist.barrier(group=group, async_op=True).wait()
        except mpicoll.CollectiveTimeout as exc:
            raised = exc
        took = time.monotonic() - start
    ok = rank != 0 or (isinstance(raised, dist.DistBackendError) and isinstance(raised, mpicoll.torch.Timeout)
                       and TORCH_TIMEOUT.search(str(raised)) is not None and "Timed out after 1000 ms" in str(raised)
                       and "made no progress for 1 s" in str(raised) and "waiting for rank" in str(raised)
                       and raised.peers and took >= 0.9)
    check(ok, f"{raised!r}")
    dist.barrier()   # the other groups still work


def test_work_wait_timeout_says_timed_out(rank, size):
    if size < 2:
        return
    group = dist.new_group()
    message = ""
    if rank == 0:
        work = dist.all_reduce(torch.ones(1), group=group, async_op=True)
        try:
            work.wait(timeout=timedelta(milliseconds=50))
        except dist.DistBackendError as exc:
            message = str(exc)
        WORLD.Barrier()
        work.wait()   # the call went on: it completes now that the others join
    else:
        WORLD.Barrier()
        dist.all_reduce(torch.ones(1), group=group)
    check(rank != 0 or "all_reduce: Timed out waiting 50ms for the call to complete" in message, message)


# -- monitored_barrier -------------------------------------------------------------------------------------------


def test_monitored_barrier_on_the_group(rank, size):
    group = dist.new_group()
    group.monitored_barrier(timedelta(seconds=30))
    group.monitored_barrier(timedelta(seconds=30), wait_all_ranks=True)
    # torch's functional form refuses every backend but Gloo (documented in docs/torch.md)
    raises_everywhere(ValueError, lambda: dist.monitored_barrier(group=group), "only implemented for GLOO")
    check(True)


def test_monitored_barrier_with_no_time_says_rank_0_timed_out(rank, size):
    # torch's test_monitored_barrier_gloo_rank_0_timeout: a timeout of 0 leaves rank 0 no time to wait for anyone
    if size < 2:
        return
    group = dist.new_group()
    message = ""
    if rank == 0:
        try:
            group.monitored_barrier(timedelta(seconds=0))
        except dist.DistBackendError as exc:
            message = str(exc)
    WORLD.Barrier()
    check(rank != 0 or message.startswith("Rank 0 timed out in monitoredBarrier after 0 ms."), message)


@pytest.mark.parametrize("wait_all_ranks", [False, True])
def test_monitored_barrier_names_the_missing_ranks(rank, size, wait_all_ranks):
    if size < 2:
        return
    group = dist.new_group()
    missing = list(range(1, size)) if wait_all_ranks else [size - 1]
    message = ""
    if rank not in missing:
        try:
            group.monitored_barrier(timedelta(milliseconds=500), wait_all_ranks=wait_all_ranks)
        except dist.DistBackendError as exc:
            message = str(exc)
    WORLD.Barrier()
    if rank == 0:
        shown = missing if wait_all_ranks else missing[:1]
        word = "Ranks" if len(shown) > 1 else "Rank"
        check(f"{word} {', '.join(map(str, shown))} failed to pass monitoredBarrier" in message
              and "timed out" in message, message)
    elif rank not in missing:
        check("rank 0 did not answer" in message, message)
    else:
        check(message == "", message)


# -- sparse all_reduce ------------------------------------------------------------------------------------------


def _sparse_input(r: int, dense_width: int = 0) -> torch.Tensor:
    """Rank r's sparse COO input: a few entries, some at indices other ranks use too, and a duplicate."""
    g = torch.Generator().manual_seed(100 + r)
    nnz = 3 + r
    shape = (6, 5) if not dense_width else (6, 5, dense_width)
    idx = torch.stack([torch.randint(0, n, (nnz,), generator=g) for n in shape[:2]])   # inside the shape
    idx[:, -1] = idx[:, 0]   # a repeated index: not coalesced on input
    vals = torch.randn((nnz,) if not dense_width else (nnz, dense_width), generator=g, dtype=torch.float64)
    return torch.sparse_coo_tensor(idx, vals, shape, check_invariants=True)


@pytest.mark.parametrize("dense_width", [0, 3])
@pytest.mark.parametrize("async_op", [False, True])
def test_sparse_all_reduce_is_the_dense_sum(rank, size, dense_width, async_op, gloo):
    t = _sparse_input(rank, dense_width)
    work = dist.all_reduce(t, async_op=async_op)
    if async_op:
        work.wait()
    want = sum(_sparse_input(r, dense_width).to_dense() for r in range(size))
    check(t.is_sparse and t.is_coalesced() and torch.allclose(t.to_dense(), want, rtol=0, atol=1e-12),
          f"{t}\n{want}")
    g = _sparse_input(rank, dense_width)
    dist.all_reduce(g, group=gloo)
    check(torch.allclose(g.to_dense(), t.to_dense(), rtol=0, atol=1e-12) and torch.equal(g.indices(), t.indices()),
          "differs from Gloo")


def test_sparse_all_reduce_of_an_empty_tensor_and_sum_only(rank, size):
    t = torch.sparse_coo_tensor(torch.empty((1, 0), dtype=torch.int64), torch.empty(0), (4,))
    if rank == 0:
        t = torch.sparse_coo_tensor([[2]], [1.5], (4,))
    dist.all_reduce(t)
    check(torch.equal(t.to_dense(), torch.tensor([0, 0, 1.5, 0])), f"{t}")
    raises_everywhere(ValueError, lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX), "ReduceOp.SUM only")


# -- configuration --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variable,value", [("MPICOLL_DEBUG", "yes"), ("MPICOLL_TORCH_THREAD", "maybe")])
def test_a_malformed_variable_raises(variable, value, monkeypatch):
    monkeypatch.setenv(variable, value)
    raises_everywhere(ValueError, lambda: dist.new_group(), f"{variable}={value!r}")
    monkeypatch.delenv(variable)
    t = torch.ones(1)
    dist.all_reduce(t, group=dist.new_group())   # torch's groups still work
    check(t.item() == dist.get_world_size())


# -- asynchronous calls: mpicoll's requests, advanced by mpicoll's progress thread --------------------------------


def test_async_work_wraps_mpicoll_requests_and_no_thread_of_the_group(rank, size):
    group = dist.new_group()
    t = torch.full((8,), float(rank))
    work = dist.all_reduce(t, group=group, async_op=True)
    requests = work._requests[:]     # (emptied as they complete)
    check(all(isinstance(r, MPI.Request) and type(r).__module__.startswith("mpicoll.") for r in requests),
          f"{[type(r) for r in requests]}")
    work.wait()
    check(torch.equal(t, torch.full((8,), float(sum(range(size))))))
    names = [th.name for th in threading.enumerate()]
    # the futures' thread, and the thread that ends profiler events (once a profiler recorded): neither runs calls
    allowed = {"mpicoll-torch-futures", "mpicoll-torch-profiler"}
    check(not any(n.startswith("mpicoll-torch-") and n not in allowed for n in names), f"{names}")


def test_a_future_completes_without_wait(rank, size):
    # DDP's reducer waits on the future, never on the Work: the future must complete by itself
    t = torch.full((1 << 12,), float(rank))
    future = dist.all_reduce(t, async_op=True).get_future()
    chained = future.then(lambda f: f.value()[0].sum().item())
    deadline = time.monotonic() + 20
    while not chained.done() and time.monotonic() < deadline:
        time.sleep(0.001)
    check(chained.done() and chained.value() == float(sum(range(size)) * (1 << 12)), f"{chained.done()}")


def test_inline_option_runs_async_calls_in_the_caller(rank, size):
    group = dist.new_group(pg_options=mpicoll.torch.Options(progress_thread=False))
    t = torch.ones(3)
    work = dist.all_reduce(t, group=group, async_op=True)
    check(work.is_completed() and torch.equal(t, torch.full((3,), float(size))))


def test_blocking_all_reduce_on_many_small_tensors_and_views(rank, size):
    # the fast path keeps NumPy views of small tensors by address: fresh tensors, views sharing an address
    # (base[:4] and base.view(2, 4)[0]) and more tensors than it keeps must all come out right
    base = torch.zeros(8)
    ok = True
    for i in range(40):
        fresh = torch.full((3,), float(rank + i))
        dist.all_reduce(fresh)
        ok = ok and torch.equal(fresh, torch.full((3,), float(sum(range(size)) + size * i)))
        base.fill_(1.0)
        view = base[:4] if i % 2 else base.view(2, 4)[0]
        dist.all_reduce(view)
        ok = ok and torch.equal(base, torch.tensor([float(size)] * 4 + [1.0] * 4))
        t = torch.arange(6, dtype=torch.int64 if i % 3 else torch.float64) + rank
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        ok = ok and torch.equal(t, torch.arange(6, dtype=t.dtype) + size - 1)
    check(ok)


def test_mismatched_calls_raise_torchs_collective_desync(rank, size):
    # one rank broadcasts where the others all-reduce: every rank raises, at that call or its next one on the
    # group, torch's DistBackendError that is mpicoll's MismatchError, naming each rank's call by torch's name
    if size < 2 or MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        return
    group = dist.new_group()
    t = torch.ones(4)
    raised = None
    try:
        if rank == 1:
            dist.broadcast(t, group_src=1, group=group)
        else:
            dist.all_reduce(t, group=group)
        dist.barrier(group=group)
    except mpicoll.MismatchError as exc:
        raised = exc
    text = str(raised)
    check(isinstance(raised, mpicoll.torch.Desync) and isinstance(raised, dist.DistBackendError)
          and "collective desync" in text and "is running collective broadcast" in text
          and "is running collective all_reduce" in text and "test_backend_runtime.py:" in text, f"{raised!r}")
    dist.destroy_process_group(group)
    dist.barrier()   # the other groups still work
