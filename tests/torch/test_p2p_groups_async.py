"""Sends and receives, sub-groups, ``async_op`` Work objects, timeouts and the DETAIL check path on "mpicoll"."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402

import mpicoll.torch  # noqa: E402

from conftest import WORLD, check, raises_everywhere  # noqa: E402


def test_send_recv_ring_blocking_and_nonblocking(rank, size):
    right, left = (rank + 1) % size, (rank - 1) % size
    out = torch.empty(5, dtype=torch.float64)
    send = dist.isend(torch.full((5,), float(rank), dtype=torch.float64), dst=right, tag=3)
    recv = dist.irecv(out, src=left, tag=3)
    recv.wait()
    send.wait()
    check(torch.equal(out, torch.full((5,), float(left), dtype=torch.float64)) and recv.is_completed(), f"{out}")
    ok, got = True, None
    if size > 1 and rank == 0:
        dist.send(torch.arange(4, dtype=torch.int32), dst=1)
    elif size > 1 and rank == 1:
        got = torch.empty(4, dtype=torch.int32)
        dist.recv(got, src=0)
        ok = torch.equal(got, torch.arange(4, dtype=torch.int32))
    check(ok, f"{got}")


def test_recv_from_any_source_reports_the_sender(rank, size):
    ok, senders = True, set()
    if rank == 0:
        for _ in range(size - 1):
            t = torch.empty(2)
            src = dist.recv(t)  # src=None: any source
            senders.add(src)
            ok = ok and torch.equal(t, torch.full((2,), float(src)))
        ok = ok and senders == set(range(1, size))
    else:
        dist.send(torch.full((2,), float(rank)), dst=0)
    check(ok, f"{senders}")


def test_recv_into_strided_view_and_float8(rank, size):
    ok, base = True, None
    if size > 1 and rank == 0:
        dist.send(torch.arange(3.0) + 1, dst=1)
        dist.send(torch.arange(4.0).to(torch.float8_e4m3fn), dst=1)
    elif size > 1 and rank == 1:
        base = torch.zeros(3, 3)
        dist.recv(base[:, 0], src=0)
        want = torch.zeros(3, 3)
        want[:, 0] = torch.arange(3.0) + 1
        f8 = torch.empty(4, dtype=torch.float8_e4m3fn)
        dist.recv(f8, src=0)
        ok = torch.equal(base, want) and torch.equal(f8.float(), torch.arange(4.0))
    check(ok, f"{base}")


def test_batch_isend_irecv_ring(rank, size):
    right, left = (rank + 1) % size, (rank - 1) % size
    out = torch.empty(3)
    ops = [dist.P2POp(dist.isend, torch.full((3,), float(rank)), right),
           dist.P2POp(dist.irecv, out, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    check(torch.equal(out, torch.full((3,), float(left))), f"{out}")


def test_object_send_recv(rank, size):
    box = [None, None]
    if size > 1 and rank == 0:
        dist.send_object_list([{"k": [1, 2, 3]}, "text"], dst=1)
    elif size > 1 and rank == 1:
        dist.recv_object_list(box, src=0)
    check(rank != 1 or box == [{"k": [1, 2, 3]}, "text"], f"{box}")


def test_new_group_subsets_and_subgroups(rank, size):
    evens = list(range(0, size, 2))
    group = dist.new_group(evens)
    t = torch.ones(2)
    if rank in evens:
        dist.all_reduce(t, group=group)
        check(torch.equal(t, torch.full((2,), float(len(evens)))) and dist.get_rank(group) == evens.index(rank)
              and dist.get_backend(group) == "mpicoll")
        dist.broadcast(t.fill_(rank), group_src=len(evens) - 1, group=group)
        check(t[0].item() == evens[-1], f"{t}")
    else:
        check(dist.get_rank(group) == -1)
        check(True)
    sub, subgroups = dist.new_subgroups(group_size=1 if size < 2 else 2 if size % 2 == 0 else 1)
    t = torch.full((1,), float(rank))
    dist.all_reduce(t, group=sub)
    members = dist.get_process_group_ranks(sub)
    check(t.item() == sum(members), f"{t} {members}")


def test_device_mesh_sub_groups(rank, size):
    from torch.distributed.device_mesh import init_device_mesh

    if size % 2:
        mesh = init_device_mesh("cpu", (size,), mesh_dim_names=("dp",))
        t = torch.ones(1)
        dist.all_reduce(t, group=mesh.get_group("dp"))
        check(t.item() == size)
        return
    mesh = init_device_mesh("cpu", (size // 2, 2), mesh_dim_names=("dp", "tp"))
    t = torch.full((1,), float(rank))
    dist.all_reduce(t, group=mesh.get_group("tp"))
    check(t.item() == (rank // 2) * 4 + 1, f"tp {t}")
    t = torch.full((1,), float(rank))
    dist.all_reduce(t, group=mesh.get_group("dp"))
    check(t.item() == sum(range(rank % 2, size, 2)), f"dp {t}")
    check(dist.get_backend(mesh.get_group("dp")) == "mpicoll")


def test_async_works_complete_in_order_with_futures(rank, size):
    tensors = [torch.full((1000,), float(i + rank)) for i in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    seen = []
    works[-1].get_future().then(lambda fut: seen.append(fut.value()[0][0].item()))
    for w in works:
        check(w.wait() is True)
    base = sum(range(size))
    check(all(torch.equal(t, torch.full((1000,), float(i * size + base))) for i, t in enumerate(tensors)))
    check(all(w.is_completed() and w.is_success() and w.exception() is None for w in works))
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.001)
    check(seen == [7.0 * size + base], f"{seen}")


def test_blocking_calls_wait_for_the_queued_ones(rank, size):
    # async calls go to the group's thread, blocking ones run in the caller once the queue is empty:
    # interleaved, they must still reach the communicator in program order on every rank
    tensors = [torch.full((257,), float(i + rank)) for i in range(12)]
    works = []
    for i, t in enumerate(tensors):
        if i % 3 == 2:
            dist.all_reduce(t)
        else:
            works.append(dist.all_reduce(t, async_op=True))
    for w in works:
        w.wait()
    base = sum(range(size))
    check(all(torch.equal(t, torch.full((257,), float(i * size + base))) for i, t in enumerate(tensors)))


def test_async_overlaps_with_the_caller(rank, size):
    # the progress thread runs the call while this thread keeps computing: the Work completes with no wait()
    t = torch.ones(1 << 16)
    work = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 10
    while not work.is_completed() and time.monotonic() < deadline:
        torch.mm(torch.ones(64, 64), torch.ones(64, 64))  # the caller's own work
    check(work.is_completed(), "no progress without wait()")
    work.wait()


def test_an_exception_in_the_call_reaches_wait_and_the_future(default_group):
    # a step after the call's requests that raises (as a failed copy-back would): wait() and the future get it
    from mpicoll.torch.jobs import Planned

    pg = default_group
    boom = RuntimeError("boom on purpose")

    def fail():
        raise boom

    work = pg._start("test_failure", Planned([], [pg._ctx.call("Barrier")], fail), False, None, None)
    future = work.get_future()
    try:
        work.wait()
    except RuntimeError as exc:
        check(exc is boom)
    else:
        check(False, "wait() did not raise")
    check(work.is_completed() and not work.is_success() and work.exception() is boom)
    try:
        future.wait()
    except RuntimeError as exc:
        check("boom" in str(exc), str(exc))
    else:
        check(False, "the future did not raise")
    dist.barrier()  # the group still works afterwards


def test_wait_timeout_raises_and_the_call_completes_later(rank, size):
    if size < 2:
        return
    if rank == 0:
        t = torch.zeros(2)
        work = dist.irecv(t, src=1, tag=77)
        raises_everywhere_local = None
        try:
            work.wait(timeout=timedelta(milliseconds=200))
        except dist.DistBackendError as exc:
            raises_everywhere_local = "recv: Timed out waiting 200ms for the call to complete" in str(exc)
        WORLD.Barrier()  # now rank 1 sends
        work.wait()
        check(raises_everywhere_local is True and torch.equal(t, torch.ones(2)), f"{raises_everywhere_local} {t}")
    else:
        WORLD.Barrier()
        if rank == 1:
            dist.send(torch.ones(2), dst=0, tag=77)
        check(True)


def test_collective_wait_timeout(rank, size):
    if size < 2:
        return
    group = dist.new_group(timeout=timedelta(seconds=60))
    t = torch.ones(3)
    if rank == 0:
        work = dist.all_reduce(t, group=group, async_op=True)
        try:
            work.wait(timeout=timedelta(milliseconds=200))
            timed_out = False
        except dist.DistBackendError:
            timed_out = True
        WORLD.Barrier()  # the others join now
        work.wait()
    else:
        timed_out = True
        WORLD.Barrier()
        dist.all_reduce(t, group=group)
    check(timed_out and torch.equal(t, torch.full((3,), float(size))), f"{timed_out} {t}")


def test_a_group_timeout_turns_on_mpicoll_watchdog(rank, size):
    # a timeout other than torch's default makes mpicoll's watchdog raise in the call itself: a rank left
    # alone in a collective gets CollectiveTimeout (naming the rank it waits for), not a hang
    import mpicoll

    group = dist.new_group(timeout=timedelta(seconds=1))
    raised = None
    if rank == 0:
        try:
            dist.all_reduce(torch.ones(3), group=group)
        except mpicoll.CollectiveTimeout as exc:
            raised = str(exc)
    check(rank != 0 or (raised is not None and "waiting for rank" in raised and "timed out" in raised), f"{raised}")
    t = torch.ones(2)
    dist.all_reduce(t)  # the other groups still work
    check(torch.equal(t, torch.full((2,), float(size))))


def test_detail_mode_names_the_mismatch_on_every_rank(rank, size, monkeypatch):
    if size < 2:
        return
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    group = dist.new_group()
    monkeypatch.delenv("TORCH_DISTRIBUTED_DEBUG")
    t = torch.ones(3 if rank == 0 else 4)
    check(mpicoll.torch.MismatchError is mpicoll.errors.MismatchError)  # one MismatchError, mpicoll's
    raises_everywhere(mpicoll.torch.MismatchError, lambda: dist.all_reduce(t, group=group),
                      "all_reduce: the ranks disagree on the call's arguments: shape: rank 0 [3], "
                      + ("rank 1 [4]" if size == 2 else f"ranks {','.join(map(str, range(1, size)))} [4]"))
    # all-to-all split sizes that do not match across ranks: rank 0 sends 2 rows to rank 1, which expects 1
    in_splits = [1] * size
    if rank == 0:
        in_splits[1] = 2
    raises_everywhere(mpicoll.torch.MismatchError,
                      lambda: dist.all_to_all_single(torch.empty(size), torch.zeros(sum(in_splits)), [1] * size,
                                                     in_splits, group=group),
                      "rank 0 sends 8 bytes to rank 1, which expects 4")
    t = torch.ones(3)
    dist.all_reduce(t, group=group)
    check(torch.equal(t, torch.full((3,), float(size))))


def test_algorithm_choice_by_option_and_method(rank, size):
    group = dist.new_group(pg_options=mpicoll.torch.Options(algorithms={"allreduce": "ring"}))
    t = torch.arange(10.0)
    dist.all_reduce(t, group=group)
    check(torch.equal(t, torch.arange(10.0) * size))
    group.set_algorithm("allreduce", "recursive_doubling")
    group.set_algorithm("bcast", "binomial")
    dist.all_reduce(t, group=group)
    dist.broadcast(t, group_src=0, group=group)
    check(torch.equal(t, torch.arange(10.0) * size * size))


def test_debug_2_logs_the_torch_call_and_the_algorithm(rank, size, monkeypatch, capfd):
    monkeypatch.setenv("MPICOLL_DEBUG", "2")
    group = dist.new_group(pg_options=mpicoll.torch.Options(algorithms={"allreduce": "ring"}))
    t = torch.ones(10)
    dist.all_reduce(t, group=group)
    dist.all_reduce(t, group=group, async_op=True).wait()
    monkeypatch.delenv("MPICOLL_DEBUG")
    err = capfd.readouterr().err
    check(f"mpicoll.torch rank {rank}/{size}: all_reduce(float32[10] SUM) (blocking)" in err
          and "all_reduce(float32[10] SUM) (requests)" in err and "Iallreduce (started) algorithm=ring" in err,
          err[-800:])
    check(torch.equal(t, torch.full((10,), float(size * size))))


def test_inline_executor_gives_the_same_answers(rank, size):
    group = dist.new_group(pg_options=mpicoll.torch.Options(progress_thread=False))
    t = torch.full((4,), float(rank))
    work = dist.all_reduce(t, group=group, async_op=True)
    check(work.is_completed())  # ran in the caller
    work.wait()
    outs = [torch.empty(4) for _ in range(size)]
    dist.all_gather(outs, t, group=group)
    check(torch.equal(t, torch.full((4,), float(sum(range(size))))) and all(torch.equal(o, t) for o in outs))


def test_environment_came_from_mpi():
    check(os.environ["RANK"] == str(WORLD.Get_rank()) and os.environ["WORLD_SIZE"] == str(WORLD.Get_size()))
    check(dist.get_backend() == "mpicoll" and dist.get_rank() == WORLD.Get_rank())


@pytest.mark.parametrize("bad", ["peer", "tag"])
def test_bad_peers_and_tags_are_refused(bad, size):
    peer, tag = (size, 0) if bad == "peer" else (0, -1)
    try:
        dist.group.WORLD.send([torch.ones(1)], peer, tag)
    except ValueError as exc:
        check(bad in str(exc), str(exc))
    else:
        check(False, "accepted")
