"""MPI called from C (``mpicoll.runtime.direct``): in use where it should be, and its requests as any other.

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

from mpicoll import config
from mpicoll.runtime import compiled, direct

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


def test_a_dropped_request_is_started_again_as_new(comm):
    """A cached plan's last request, once the program has dropped it, is what the next equal call returns
    (started again from C): with a tag and a record of its own, the call's arguments held (a temporary send
    buffer), complete under mpi4py's ``Waitall`` too; a request the program still holds is never the next one."""
    x, y = np.full(3, float(RANK)), np.zeros(3)
    expected = np.full(3, float(SUM))
    for _ in range(3):
        comm.Iallreduce(np.full(3, float(RANK)), y).Wait()     # (the temporary is held by the request)
    check(np.array_equal(y, expected), f"wrong sum {y}")
    first = comm.Iallreduce(x, y)
    first.Wait()
    ident, tag = id(first), first.tag
    del first
    second = comm.Iallreduce(x, y)
    if _direct_expected() and P > 1:
        check(id(second) == ident, "the dropped request was not started again")
    check(second.tag != tag, f"the same tag {tag} twice")
    held = second
    MPI.Request.Waitall([second])
    third = comm.Iallreduce(x, y)
    check(third is not held and third.tag != held.tag, "a request the program holds was started again")
    third.Wait()
    check(np.array_equal(y, expected) and held.Test(), f"wrong sum {y}")
    records = [entry for entry in comm._state.recorder.slots() if entry["kind"] != "blocking"][-3:] \
        if comm._state.recorder is not None else []
    check(len({entry["seq"] for entry in records}) == len(records) and all(e["end"] for e in records),
          f"records {records}")
