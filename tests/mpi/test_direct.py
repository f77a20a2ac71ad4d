"""MPI called from C (``mpicoll.engine.direct``): in use where it should be, and its requests as any other.

The rest of the suite runs through the direct path wherever it applies (blocking plans, requests of cached
plans, persistent requests) and, in the "no-ext" phase of ``tests/run_all.py``, without it.  Here: that it
is in use on both MPI families when the extension is built; that requests C posts, waited on in another
order than they were started (the engine's ``Waitany`` over requests it does not own), mixed with MPI's own,
and waited on by mpi4py's functions, complete with the right sums; that a persistent request falls back to
Python where C must not run it (a status to fill, another request outstanding).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll import compiled, config
from mpicoll.engine import direct
from mpicoll.engine.requests import Request

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P = WORLD.size
RANK = WORLD.rank
SUM = P * (P - 1) // 2


def _direct_expected() -> bool:
    return compiled.extension("_direct") is not None and not config.fault_tolerant()


def test_the_direct_path_is_in_use_where_it_is_built():
    used, why = direct.available()
    check(used == _direct_expected(), f"direct path: {why}")


def test_requests_posted_from_c_complete_in_any_order(comm):
    n = 5
    xs = [np.full(3 + k, float(RANK + k)) for k in range(n)]
    ys = [np.zeros(3 + k) for k in range(n)]
    for _ in range(2):      # the second time every call hits its cached plan: the rounds C posts
        reqs = [comm.Iallreduce(x, y) for x, y in zip(xs, ys)]
        if _direct_expected() and P > 1:
            check(all(r._direct is not None for r in reqs), "a cached plan's request is not posted from C")
        for r in reversed(reqs):         # a Wait with others outstanding: the engine waits on any message
            r.Wait()
        check(all(np.array_equal(y, np.full(3 + k, float(SUM + P * k))) for k, y in enumerate(ys)),
              f"wrong sums {[y[0] for y in ys]}")


def test_requests_posted_from_c_with_mpi_requests_and_mpi_waitall(comm):
    peer = (RANK + 1) % P
    x, y, y2 = np.full(4, float(RANK)), np.zeros(4), np.zeros(2)
    for _ in range(3):
        incoming = np.zeros(1)
        mine = [comm.Iallreduce(x, y), comm.Iallreduce(x[:2], y2)]
        theirs = [WORLD.Irecv(incoming, source=(RANK - 1) % P, tag=9), WORLD.Isend(np.ones(1), dest=peer, tag=9)]
        MPI.Request.Waitall(theirs + mine)      # mpi4py's own: the requests complete without their Wait
        check(np.array_equal(y, np.full(4, float(SUM))) and np.array_equal(y2, y[:2]) and incoming[0] == 1.0,
              f"wrong result {y} {y2} {incoming}")


def test_persistent_request_with_a_status_and_with_another_outstanding(comm):
    x, y, z = np.full(2, float(RANK)), np.zeros(2), np.zeros(2)
    persistent = comm.Allreduce_init(x, y)
    for _ in range(3):
        status = MPI.Status()
        status.Set_error(5)
        persistent.Start()
        persistent.Wait(status)          # a status to fill
        check(status.Get_error() == MPI.SUCCESS and status.Get_source() == MPI.ANY_SOURCE, "status not empty")
        persistent.Start()
        other = comm.Iallreduce(x, z)    # another request outstanding: the Python engine waits
        persistent.Wait()
        other.Wait()
        check(np.array_equal(y, np.full(2, float(SUM))) and np.array_equal(z, y), f"wrong sums {y} {z}")
    persistent.Free()


def _counting_requests(monkeypatch) -> list:
    """A list that grows by one for every request made in Python (the compiled start makes none)."""
    made: list = []
    init = Request.__init__
    monkeypatch.setattr(Request, "__init__", lambda self, *args, **kwargs: made.append(init(self, *args, **kwargs)))
    return made


def test_a_dropped_request_is_started_again_as_new(comm, monkeypatch):
    """A cached plan's last request, once the program has dropped it, is what the next equal call returns
    (started again from C): with a tag and a record of its own, the call's arguments held (a temporary send
    buffer); a request the program still holds is never the next one."""
    x, y = np.full(3, float(RANK)), np.zeros(3)
    expected = np.full(3, float(SUM))
    made = _counting_requests(monkeypatch)
    tags = []
    for _ in range(8):
        req = comm.Iallreduce(np.full(3, float(RANK)), y)     # (the temporary is held by the request)
        tags.append(req.tag)
        req.Wait()
        del req
    check(np.array_equal(y, expected) and len(set(tags)) == 8, f"wrong sum {y}, or tags {tags}")
    if _direct_expected() and P > 1:    # (the progress thread may hold one for a moment: then a new one is made)
        check(len(made) < 8, "no request was started again")
    held = comm.Iallreduce(x, y)
    held.Wait()
    after = comm.Iallreduce(x, y)
    check(after is not held and after.tag != held.tag, "a request the program holds was started again")
    after.Wait()
    check(np.array_equal(y, expected) and held.Test(), f"wrong sum {y}")
    records = [entry for entry in comm._state.recorder.slots() if entry["kind"] != "blocking"][-3:] \
        if comm._state.recorder is not None else []
    check(len({entry["seq"] for entry in records}) == len(records) and all(e["end"] for e in records),
          f"records {records}")


def test_requests_completed_by_mpi_alone_are_started_again(comm, monkeypatch):
    """Requests waited for only by mpi4py's functions (the progress hook completes them, their handles freed by
    MPI) give the right sums, call after call, and the dropped one is the next call's request."""
    made = _counting_requests(monkeypatch)
    x, y = np.full(2, float(RANK)), np.zeros(2)
    for k in range(8):
        x[1] = k
        req = comm.Iallreduce(x, y)
        if k % 2:
            MPI.Request.Waitall([req])
        else:
            while not MPI.Request.Testall([req]):
                pass
        check(np.array_equal(y, [SUM, P * k]), f"call {k}: wrong sum {y}")
        del req
    if _direct_expected() and P > 1:
        check(len(made) < 8, f"{len(made)} requests made for 8 equal calls")


@pytest.mark.skipif(P < 2, reason="two ranks send")
@pytest.mark.skipif(not _direct_expected(), reason="the direct path is not in use")
def test_a_truncated_receive_in_a_round_of_several_is_an_error():
    """Two messages one byte longer than their receives (a stand-in's marks), there before a round of several
    messages is posted: the round fails, and the marked run ends in ``ArgumentError``.  (Open MPI 5.0's
    ``MPI_Waitall`` with ``MPI_STATUSES_IGNORE`` returns success when its requests completed in error as they
    were posted: rank 1 of Bruck's ``Allgather`` at p = 4 returned the stand-in's scratch, the old xfail of
    tests/mpi/test_standin_marks.py.)"""
    import mpicoll

    comm = WORLD.Dup()
    try:
        if RANK == 0:
            for _ in range(2):
                comm.Send(np.zeros(25, np.uint8), 1, 7)   # small: sent before they are received
        if RANK == 1:
            comm.Probe(0, 7)
        WORLD.Barrier()     # (rank 1 has both messages before it posts its receives)
        got = {0: "sent", 1: "?"}.get(RANK, "idle")
        if RANK == 1:
            a, b = np.zeros(24, np.uint8), np.zeros(24, np.uint8)
            run = direct.blocking([([], [([MPI.buffer(a), MPI.BYTE], 0), ([MPI.buffer(b), MPI.BYTE], 0)], [])],
                                  comm)
            try:
                run(7)
                got = "returned"
            except mpicoll.ArgumentError:
                got = "marked"
        check(got in ("sent", "marked", "idle"), f"rank {RANK}: the truncated round {got}")
    finally:
        comm.Free()
