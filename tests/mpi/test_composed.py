"""A composed plan (``mpicoll.program.composer.Composer``): the plans of its parts, rounds of messages and local
steps, each round on its own communicator, run in order by every entry of the engine (blocking, ``I*``,
persistent) from the one plan.  The intercommunicator's stages and the reproducible requests are composed this
way (their own tests check their results); here a composition of self-messages on two communicators shows the
order and the communicators directly, on every rank."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine.forms import NONBLOCKING
from mpicoll.engine.requests import Prequest, Request
from mpicoll.program.composer import Composer
from mpicoll.program.plan import Plan

pytestmark = pytest.mark.mpi


@pytest.fixture
def two():
    """Two private communicators of this rank alone."""
    comms = [MPI.COMM_SELF.Dup(), MPI.COMM_SELF.Dup()]
    yield comms
    for comm in comms:
        comm.Free()


def _composition(two):
    """x -> y on the first communicator, y -> z on the second, a step after each."""
    a, b = two
    x, y, z = np.arange(1.0, 5.0), np.zeros(4), np.zeros(4)
    seen: list = []
    c = Composer()
    c.messages(a, [(x, 0)], [(y, 0)])
    c.step(lambda: seen.append(("a", y.sum(), z.sum())))
    c.messages(b, [(y, 0)], [(z, 0)])
    c.step(lambda: seen.append(("b", y.sum(), z.sum())))
    return c, (x, y, z), seen


def test_the_blocking_runner_runs_each_stretch_on_its_communicator_in_order(two):
    c, (x, y, z), seen = _composition(two)
    plan = c.program()
    assert isinstance(plan, Plan)
    assert [comm for comm, _ in plan.stretches()] == two     # consecutive rounds of one communicator together
    assert plan.comms == two
    plan.runner(None)(7)
    assert seen == [("a", 10.0, 0.0), ("b", 10.0, 10.0)]
    assert np.array_equal(z, x)


def test_a_request_and_a_persistent_request_run_the_same_plan(two):
    c, (x, y, z), seen = _composition(two)
    plan = c.program()
    req = Request(plan.rounds(), plan.comms, 11, None)
    req._launch()
    MPI.Request.Waitall([req])                          # waited by mpi4py's own function
    assert seen == [("a", 10.0, 0.0), ("b", 10.0, 10.0)]
    rounds, steps, posted_from_c, comms = plan.request_parts(None)
    assert posted_from_c is None and comms == two       # (rounds on two communicators: posted by mpi4py)
    starts = []
    c.before.append(lambda: starts.append(x.copy()))     # (what runs at every start: packing, codes)
    again = c.program()
    persistent = Prequest(again.rounds(), again.comms, 12, None, again.before)
    for k in range(3):
        x[:] = k
        y[:] = z[:] = -1
        persistent.Start()
        persistent.Wait()
        assert np.array_equal(z, x) and len(starts) == k + 1
    persistent.Free()


def test_a_part_brings_its_rounds_and_its_finish():
    """A part is another collective's plan, prepared as any call is; its rounds go on the communicator given."""
    from mpicoll.comm.preparing import prepare

    comm = mpicoll.Comm(MPI.COMM_WORLD)
    state = comm._state
    x, y = np.full(3, float(comm.Get_rank() + 1)), np.zeros(3)
    c = Composer()
    c.part(prepare(state, "Allreduce", (x, y, MPI.SUM), "auto"), state.private)
    totals = []
    c.step(lambda: totals.append(y.copy()))
    plan = c.program()
    p = comm.Get_size()
    assert plan.comms and all(on is state.private for on in plan.comms)   # (p = 1: a round copying x to y)
    plan.runner(None)(state.next_tag(NONBLOCKING))
    assert np.array_equal(totals[0], np.full(3, p * (p + 1) / 2))
