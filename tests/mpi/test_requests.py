"""Requests as MPI defines them (issue 25): mpi4py's own functions on mpicoll's requests, progress without the
caller, buffers kept alive by the request.

Each program here is written as a user writes it: ``MPI.Request.Waitall`` on a mix of mpicoll's and mpi4py's
requests, temporary buffers handed to ``I*`` calls, a peer waiting in a plain mpi4py ``Recv`` while a
collective is outstanding.  The progress thread is on (the default); ``tests/fault/test_abandoned.py`` runs
the programs that need it off, and those that end with requests outstanding.
"""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import inflight, progress

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P = WORLD.size
RANK = WORLD.rank


def churn() -> list:
    """Collect garbage and allocate over what was freed: memory a request still used would be overwritten."""
    gc.collect()
    return [np.full(1 << 17, -7.0) for _ in range(16)]


# -- buffers kept alive ---------------------------------------------------------------------------

def test_temporary_send_buffer_of_iallreduce(comm):
    y = np.zeros(1 << 20)
    for _ in range(3):               # the second and third calls hit the cached plan (views by address)
        r = comm.Iallreduce(np.full(1 << 20, 1.0), y)
        junk = churn()
        r.Wait()
        check(bool(np.all(y == P)), f"{y[:4]}")
        del junk


@pytest.mark.parametrize("n", [3, 1 << 15])
def test_temporary_send_buffers_of_ialltoall_and_iallgather(comm, n):
    out, gathered = np.zeros(n * P), np.zeros(n * P)
    for _ in range(3):
        r1 = comm.Ialltoall(np.arange(n * P, dtype=float) + 1000.0 * RANK, out)
        r2 = comm.Iallgather(np.full(n, float(RANK)), gathered)
        junk = churn()
        MPI.Request.Waitall([r1, r2])
        want = np.concatenate([np.arange(RANK * n, (RANK + 1) * n) + 1000.0 * src for src in range(P)])
        check(np.array_equal(out, want), "Ialltoall with a temporary send buffer")
        check(np.array_equal(gathered, np.repeat(np.arange(P, dtype=float), n)), "Iallgather, temporary send")
        del junk


def test_temporary_buffers_of_a_persistent_request(comm):
    y = np.zeros(1000)
    req = comm.Allreduce_init(np.full(1000, 2.0), y)     # the send buffer exists only inside the request
    junk = churn()
    for _ in range(5):
        req.Start()
        req.Wait()
        check(bool(np.all(y == 2.0 * P)), f"{y[:4]}")
    req.Free()
    del junk


def test_request_releases_its_buffers_when_complete(comm):
    import weakref

    x = np.ones(8)
    ref = weakref.ref(x)
    r = comm.Iallreduce(x, np.zeros(8))
    del x
    r.Wait()
    gc.collect()
    check(ref() is None, "a completed request still holds its send buffer")


# -- mpi4py's functions on mpicoll's requests -----------------------------------------------------

def mixed(comm, tag: int) -> tuple[list, dict]:
    """Two mpicoll requests and a ring exchange of mpi4py requests, interleaved; what each must deliver."""
    a_out, b_buf, got = np.zeros(4), np.full(3, float(RANK)), np.zeros(1)
    left, right = (RANK - 1) % P, (RANK + 1) % P
    reqs = [comm.Iallreduce(np.full(4, float(RANK + 1)), a_out),
            WORLD.Irecv(got, left, tag),
            comm.Ibcast(b_buf, root=P - 1),
            WORLD.Isend(np.array([float(RANK)]), right, tag)]
    return reqs, {"a": (a_out, np.full(4, P * (P + 1) / 2)), "b": (b_buf, np.full(3, float(P - 1))),
                  "got": (got, np.array([float(left)]))}


def delivered(expect: dict) -> bool:
    return all(np.array_equal(have, want) for have, want in expect.values())


def test_mpi_waitall_on_a_mix(comm):
    reqs, expect = mixed(comm, 11)
    statuses = [MPI.Status() for _ in reqs]
    MPI.Request.Waitall(reqs, statuses)
    check(delivered(expect), "MPI.Request.Waitall on a mix")
    check(all(r == MPI.REQUEST_NULL for r in reqs), "completed requests are null")
    check(statuses[0].Get_source() == MPI.ANY_SOURCE and statuses[0].Get_tag() == MPI.ANY_TAG,
          "a collective's status is empty")
    check(statuses[1].Get_source() == (RANK - 1) % P, "the receive's status")


@pytest.mark.skipif(MPI.Get_library_version().startswith("MPICH"),
                    reason="MPICH 5.0.2 asserts (request_impl.c:778, 'kind != GREQUEST') when mpi4py's lowercase "
                           "waitall meets a generalized request: a limitation of that MPI, see docs/nonblocking.md")
def test_mpi_lowercase_waitall_and_request_null_in_the_list(comm):
    reqs, expect = mixed(comm, 12)
    MPI.Request.waitall([MPI.REQUEST_NULL, *reqs])
    check(delivered(expect), "MPI.Request.waitall on a mix")


def test_mpi_testall_on_a_mix(comm):
    reqs, expect = mixed(comm, 13)
    while not MPI.Request.Testall(reqs):
        pass
    check(delivered(expect), "MPI.Request.Testall on a mix")


@pytest.mark.parametrize("how", ["Waitany", "Testany"])
def test_mpi_waitany_and_testany_on_a_mix(comm, how):
    reqs, expect = mixed(comm, 14)
    seen: list[int] = []
    while len(seen) < len(reqs) and MPI.UNDEFINED not in seen:   # (check() is collective: once, after the loop)
        if how == "Waitany":
            i = MPI.Request.Waitany(reqs)
        else:
            i, flag = MPI.Request.Testany(reqs)
            if not flag:
                continue
        seen.append(i)
    check(sorted(seen) == list(range(len(reqs))), f"{how} returned {seen}")
    check(MPI.Request.Waitany(reqs) == MPI.UNDEFINED, "no active request left")
    check(delivered(expect), f"MPI.Request.{how} on a mix")


@pytest.mark.parametrize("how", ["Waitsome", "Testsome"])
def test_mpi_waitsome_and_testsome_on_a_mix(comm, how):
    reqs, expect = mixed(comm, 15)
    seen: list[int] = []
    while len(seen) < len(reqs):     # (check() is collective: once, after the loop)
        done = getattr(MPI.Request, how)(reqs)
        if done is None:             # MPI_UNDEFINED: no active request left
            break
        seen += done
    check(sorted(seen) == list(range(len(reqs))), f"{how} completed {seen}")
    check(delivered(expect), f"MPI.Request.{how} on a mix")


def test_mpicoll_helpers_on_a_mix(comm):
    reqs, expect = mixed(comm, 16)
    mpicoll.Request.Waitall(reqs)
    check(delivered(expect), "mpicoll.Request.Waitall on a mix")
    reqs, expect = mixed(comm, 17)
    while not mpicoll.Request.Testall(reqs):
        pass
    check(delivered(expect), "mpicoll.Request.Testall on a mix")


def test_a_request_is_an_mpi_request_with_mpi4py_methods(comm):
    out = np.zeros(4)
    r = comm.Iallreduce(np.ones(4), out)
    check(isinstance(r, MPI.Request) and r != MPI.REQUEST_NULL and bool(r), "an active MPI.Request")
    while not r.Get_status():       # non-destructive: the request stays active
        pass
    check(bool(r), "Get_status completed the request")
    status = MPI.Status()
    check(r.Get_status(status) and status.Get_source() == MPI.ANY_SOURCE, "Get_status's status")
    check(r.wait() is None and r == MPI.REQUEST_NULL, "lowercase wait")
    r = comm.Ibarrier()
    flag, obj = r.test()
    while not flag:
        flag, obj = r.test()
    check(obj is None and not r, "lowercase test")
    r.Free()                         # a completed (null) request may be freed
    p = comm.Allreduce_init(np.ones(4), out)
    check(isinstance(p, MPI.Prequest) and bool(p), "a persistent request is an MPI.Prequest, true until freed")
    p.Start()
    MPI.Request.Wait(p)              # mpi4py's own Wait, on the MPI handle
    check(bool(np.all(out == P)), "MPI.Request.Wait on a persistent request")
    p.Start()                        # inactive again: it starts
    p.wait()
    p.Free()
    check(not p, "freed")


def test_cancel_is_refused_as_mpi_says_for_collectives(comm):
    r = comm.Iallreduce(np.ones(4), np.zeros(4))
    with pytest.raises(RuntimeError, match="cannot be cancelled"):
        r.Cancel()
    with pytest.raises(MPI.Exception):
        MPI.Request.Cancel(r)        # mpi4py's own Cancel reaches the generalized request's cancel function
    r.Wait()


def test_mpi_prequest_startall_refuses_mpicoll_requests_clearly(comm):
    """MPI_Startall cannot start a generalized request: the MPI library refuses (no hang, no crash);
    mpicoll.Prequest.Startall starts a mix of mpicoll's and mpi4py's persistent requests."""
    out = np.zeros(4)
    p = comm.Allreduce_init(np.ones(4), out)
    with pytest.raises(MPI.Exception):
        MPI.Prequest.Startall([p])
    got = np.zeros(1)
    theirs = [WORLD.Recv_init(got, (RANK - 1) % P, 18), WORLD.Send_init(np.array([1.0 * RANK]), (RANK + 1) % P, 18)]
    for _ in range(3):
        mpicoll.Prequest.Startall([p, *theirs])
        MPI.Request.Waitall([*theirs, p])
        check(bool(np.all(out == P)) and got[0] == (RANK - 1) % P, "Startall of a mix, then MPI's Waitall")
    for q in (p, *theirs):
        q.Free()


def test_persistent_requests_restarted_thousands_of_times(comm):
    x, y = np.zeros(3), np.zeros(3)
    a = comm.Allreduce_init(x, y)
    z = np.zeros(2)
    b = comm.Bcast_init(z, root=0)
    bad = 0
    for i in range(3000):
        x[:] = i + RANK
        if RANK == 0:
            z[:] = -i
        if i % 3 == 0:
            mpicoll.Prequest.Startall([a, b])
            MPI.Request.Waitall([a, b])
        elif i % 3 == 1:
            a.Start()
            b.Start()
            b.Wait()
            a.Wait()
        else:
            mpicoll.Prequest.Startall([b, a])
            while not MPI.Request.Testall([a, b]):
                pass
        bad += not (np.all(y == P * i + P * (P - 1) / 2) and np.all(z == -i))
    a.Free()
    b.Free()
    check(bad == 0, f"{bad} of 3000 runs wrong")
    check(not inflight.outstanding(), "requests left running")


# -- progress without the caller ------------------------------------------------------------------

def test_progress_while_the_caller_waits_in_mpi4py_recv(comm):
    """The issue's program: rank 0 starts an Iallreduce, then waits in a plain mpi4py Recv for a message that
    rank 2 sends only after its own Wait returned; only a progress independent of rank 0 completes it."""
    if P < 2:
        pytest.skip("needs 2 processes")
    peer = 2 if P > 2 else 1
    check(progress.running() or not progress.enabled(), "the progress thread runs")
    x, y, note = np.full(1 << 16, RANK + 1.0), np.zeros(1 << 16), np.zeros(1)
    r = comm.Iallreduce(x, y)
    if RANK == 0:
        WORLD.Recv(note, source=peer, tag=21)
        r.Wait()
    elif RANK == peer:
        r.Wait()
        WORLD.Send(np.array([1.0]), dest=0, tag=21)
    else:
        r.Wait()
    check(bool(np.all(y == P * (P + 1) / 2)), "the Iallreduce's result")


def test_progress_while_the_caller_computes(comm):
    """A request advances while its thread is in NumPy: after the computation, its rounds are done."""
    y = np.zeros(1 << 12)
    r = comm.Iallreduce(np.ones(1 << 12), y, algorithm="ring")
    a = np.random.default_rng(RANK).random((300, 300))
    for _ in range(40):
        a = a @ a / 300.0           # about 0.1 s or more: far longer than the Iallreduce
    WORLD.Barrier()                 # every rank's thread has had the same time
    advanced = r.Get_status()
    r.Wait()
    check(bool(np.all(y == P)), "the result")
    check(advanced or P == 1, "the request was not complete after the computation")


def test_paused_thread_leaves_progress_to_the_caller(comm):
    """With the thread paused (what ``mpicoll.bench overlap`` measures), requests complete in Wait, and the
    thread takes over again after resume()."""
    progress.pause()
    try:
        reqs = [comm.Iallreduce(np.ones(3), np.zeros(3)) for _ in range(3)]
        for r in reversed(reqs):
            r.Wait()
    finally:
        progress.resume()
    test_progress_while_the_caller_waits_in_mpi4py_recv(comm)


def test_threads_each_on_their_own_communicator(comm):
    """Four threads, each with its communicator, start collectives and complete them with MPI.Request.Waitall."""
    comms = [mpicoll.Comm(WORLD.Dup()) for _ in range(4)]
    errors: list[str] = []

    def work(k: int) -> None:
        c = comms[k]
        for i in range(20):
            outs = [np.zeros(5), np.zeros(P)]
            reqs = [c.Iallreduce(np.full(5, float(i + k)), outs[0]), c.Iallgather(np.array([float(RANK)]), outs[1])]
            MPI.Request.Waitall(reqs)
            if not (np.all(outs[0] == P * (i + k)) and np.array_equal(outs[1], np.arange(P))):
                errors.append(f"thread {k} call {i}: {outs}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in comms:
        c.Free()
    check(not errors, "; ".join(errors[:3]))


def test_a_thread_s_requests_share_its_queue_and_a_wait_moves_them_all(comm):
    """Requests started by one thread (not the main one) join one queue with one guard, so a Wait on any of them
    advances the others: ranks that wait for two multi-round requests in opposite orders, with the progress
    thread paused, finish (with a queue per request, each rank would drive only the request it waits for)."""
    c = mpicoll.Comm(WORLD.Dup())
    seen: list = []
    errors: list[str] = []

    def work() -> None:
        try:
            queue, guard = inflight.queue_of_this_thread()
            again = inflight.queue_of_this_thread()
            ins = [np.full(64, 1.0 + RANK), np.full(64, 2.0 * RANK)]
            outs = [np.zeros(64), np.zeros(64)]
            reqs = [c.Iallreduce(ins[k], outs[k], algorithm="ring") for k in range(2)]
            seen.append((again[0] is queue, again[1] is guard, queue is not inflight.ACTIVE,
                         [r._queue is queue for r in reqs], [r._guard is guard for r in reqs]))
            for r in (reqs if RANK % 2 == 0 else reversed(reqs)):
                r.Wait()
            want = [sum(1.0 + q for q in range(P)), sum(2.0 * q for q in range(P))]
            if not (np.all(outs[0] == want[0]) and np.all(outs[1] == want[1])):
                errors.append(f"{outs[0][:3]} {outs[1][:3]} want {want}")
        except Exception as exc:    # (reported by the main thread)
            errors.append(repr(exc))

    progress.pause()
    try:
        t = threading.Thread(target=work)
        t.start()
        t.join()
    finally:
        progress.resume()
    c.Free()
    check(not errors, "; ".join(errors))
    check(seen == [(True, True, True, [True, True], [True, True])], f"queues and guards: {seen}")


def test_the_progress_thread_keeps_off_while_mpi_s_loop_advances_the_requests(comm, monkeypatch):
    """MPI's progress loop runs mpicoll's hook while this thread waits in ``MPI.Request.Waitall``: the hook's age is
    then fresh, and the progress thread, which polls only where the hook has not advanced the requests since its
    last poll, leaves them to it (it competed with the hook for the interpreter and the cores before)."""
    from mpicoll.engine import direct

    comm.Iallreduce(np.ones(1), np.zeros(1)).Wait()    # (the first request starts the thread)
    if not progress.running() or not direct.available()[0]:
        pytest.skip("needs the progress thread and the compiled engine's hook")
    if MPI.get_vendor()[0] != "Open MPI":   # (measured: 0.4-0.6 ms a call, against 24 us for MPICH's own)
        pytest.skip("MPICH's waits call an mpicoll request's poll function seldom: a waited call takes about "
                    "half a millisecond, and the thread's polls are not kept off")
    polls: list[str] = []
    advance = inflight.advance_unowned

    def counted(requests):
        polls.append(threading.current_thread().name)
        return advance(requests)

    monkeypatch.setattr(inflight, "advance_unowned", counted)
    x, y = np.ones(4), np.zeros(4)
    calls = 0
    stop = time.monotonic() + 0.3
    while y[3] < P + 1:     # (rank 0 says when to stop, in the sum: every rank makes as many calls)
        x[3] = 2.0 if RANK == 0 and time.monotonic() > stop else 1.0
        MPI.Request.Waitall([comm.Iallreduce(x, y)])
        calls += 1
    fresh = direct.hook_age()
    time.sleep(0.02)
    stale = direct.hook_age()
    WORLD.Barrier()
    check(bool(np.all(y[:3] == P)), f"{y}")
    check(fresh < 0.01 <= stale < float("inf"), f"the hook's age {fresh} s after a Waitall, {stale} s later")
    by_thread = polls.count("mpicoll-progress")
    check(by_thread <= 100, f"the progress thread polled {by_thread} times during {calls} waited calls")


def test_requests_of_derived_communicators_in_one_waitall(comm):
    if P < 2:
        pytest.skip("needs 2 processes")
    cart = comm.Create_cart([P], periods=[True])
    sub = comm.Split(RANK % 2, RANK)
    a, b = np.zeros(3), np.zeros(3)
    reqs = [cart.Iallreduce(np.ones(3), a), sub.Iallreduce(np.ones(3), b), comm.Ibarrier()]
    MPI.Request.Waitall(reqs)
    check(bool(np.all(a == P) and np.all(b == sub.size)), f"{a} {b}")
    cart.Free()
    sub.Free()


def test_a_failing_step_under_mpi_waitall_raises(comm, monkeypatch):
    """A user op that raises inside the progress thread: mpi4py's Waitall reports an error, the request's own
    Wait raises the op's exception (in a real run a raising op aborts the job: see mpicoll.data.ops)."""
    from mpicoll.data import ops

    monkeypatch.setattr(ops, "_aborting", lambda op: op.function)
    if P == 1 or P & (P - 1):
        pytest.skip("only when p is a power of two does every rank reduce in round 0 (else some would wait)")

    def bad(invec, inoutvec):
        raise ZeroDivisionError("user op failed")

    r = comm.Iallreduce(np.ones(4), np.zeros(4), op=mpicoll.Op(bad, commute=True), algorithm="recursive_doubling")
    with pytest.raises(ZeroDivisionError):
        r.Wait()
    check(not inflight.outstanding(), "the failed request is still progressed")


def test_free_of_an_active_request_is_a_clear_error(comm):
    r = comm.Iallreduce(np.ones(4), np.zeros(4))
    with pytest.raises(RuntimeError, match="active"):
        r.Free()
    r.Wait()
    r.Free()


def test_nothing_left_outstanding():
    check(not inflight.requests_outstanding(), "a request was left running")


@pytest.mark.skipif(P < 2, reason="a request with messages")
def test_a_restart_that_fails_gives_its_plan_back(monkeypatch):
    """The compiled start runs a cached plan's last request again; when that restart fails once the messages
    are posted (here the flight recorder's note), the call raises, and the request still completes and gives
    the plan back: the next equal calls are served by the cached plan again (it stayed lent for good)."""
    from mpicoll.engine import recorder, requests

    if requests.RESTART is None:
        pytest.skip("the compiled start is not built")
    comm = mpicoll.Comm(WORLD).Dup()
    x, y = np.full(4, RANK + 1.0), np.zeros(4)
    for _ in range(3):
        comm.Iallreduce(x, y).Wait()
    (entry,) = comm._state.request_plans.data.values()
    plan = entry.program
    record = comm._state.recorder
    assert record is not None and plan.spare is not None

    def refuse(trace, request):
        raise RuntimeError("the note failed")

    monkeypatch.setattr(recorder.Traced, "started", refuse)
    i = record.next_request % len(record.requests)     # (the next start's slot)
    slot, record.requests[i] = record.requests[i], None      # the C note gives way to Traced.started
    with pytest.raises(RuntimeError, match="the note failed"):
        comm.Iallreduce(x, y)
    record.requests[i] = slot
    monkeypatch.undo()
    comm.Iallreduce(x, y).Wait()        # (its Wait moves the one the failed call started too, as far as
    queue, guard = inflight.queue_of_this_thread()  # its messages had come: the rest, as any wait would,
    with guard:                                     # holding the guard: the progress thread moves it too)
        inflight.wait_until(lambda: not queue, queue)
    WORLD.Barrier()
    check(not plan.lent, f"rank {RANK}: the cached plan stayed lent after its restart failed")
    req = comm.Iallreduce(x, y)
    check(plan.lent and plan.spare is req, f"rank {RANK}: the next call was not served by the cached plan")
    req.Wait()
    check(np.all(y == P * (P + 1) / 2), f"rank {RANK}: wrong sum {y}")
    comm.Free()
