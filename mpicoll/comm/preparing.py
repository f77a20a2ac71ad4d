"""What every path of a call does before it runs: the collective's own first exchange, preparation (no
message), and, where a rank's checks failed, its part played on scratch memory.

Shared by the fast path (:mod:`mpicoll.comm.dispatch`) and the careful path (:mod:`mpicoll.comm.careful`).
"""

from __future__ import annotations

from typing import Any

from mpicoll.calls.table import TABLE
from mpicoll.data.datatypes import packing
from mpicoll.engine import inflight, mismatch, recorder, requests, standin, watchdog
from mpicoll.engine.forms import number
from mpicoll.program.plan import Plan
from mpicoll.program.state import CommState, Preparation

__all__ = ["exchanged", "prepare", "run_plan", "stand_in"]


def exchanged(state: CommState, method: str, args: tuple) -> tuple:
    """The call's arguments after the collective's own first exchange, if it has one (every rank makes it,
    before any check: see :class:`mpicoll.calls.table.Collective`)."""
    exchange = TABLE[method].exchange
    return args if exchange is None else exchange(state.private, *args)


def prepare(state: CommState, method: str, args: tuple, algorithm: str, arena: Any = None) -> Plan | None:
    """Check the call and bind its plan (no message); None when there is nothing to do.

    Buffers of non-contiguous datatypes are packed now and unpacked when the plan finishes.
    """
    preparation = Preparation(state, arena)
    with packing() as packed:
        plan = packed.attach(TABLE[method].prepare(preparation, *args, algorithm=algorithm))
    return signed(plan, preparation, method)


def signed(plan: Plan | None, preparation: Preparation, method: str) -> Plan | None:
    """``plan`` with what every rank must agree on, as its prepare recorded it: its messages carry it
    (:mod:`mpicoll.engine.mismatch`)."""
    if plan is not None:
        plan.signature = mismatch.signature(preparation.signature, method)
        plan.sig = mismatch.sig_of(plan.signature, preparation.state.tags[2])
    return plan


def run_plan(state: CommState, plan: Plan | None, tag: int, method: str = "") -> None:
    """Run a prepared plan blocking, the one place that decides how (``method``: the call, for errors).

    While this thread has requests outstanding it runs as a request, so that they move too (its waits watched
    where the communicator has a timeout).  Otherwise, on a careful communicator's host buffers (a timeout or
    ``MPICOLL_DEBUG``: :mod:`mpicoll.comm.careful`), with the watchdog (a deadline on every wait, every
    received size checked); else the plan's own runner (device buffers: its GPU transport, unwatched).
    """
    if inflight.outstanding():
        req = requests.start(plan, state, tag)
        if state.timeout is not None:
            req.watch = (method, state.timeout, state.rank, state.went_out_of_step)
        req.Wait()
    elif plan is None:
        return
    elif (state.timeout is not None or state.debug) and plan.device is None:
        watchdog.execute(plan.rounds(), state.private, tag + plan.sig, method, state.timeout)
        if plan.finish is not None:
            plan.finish()
    else:
        plan.runner(state.private)(tag)


def stand_in(state: CommState, method: str, args: tuple, algorithm: str, tag: int, error: BaseException,
             request: bool = False) -> None:
    """Play this rank's part of a call whose checks failed on scratch memory (see :mod:`mpicoll.engine.standin`),
    so that its peers are not left waiting; the caller raises ``error`` next.

    Every message it sends is marked, so that every peer whose result depends on it raises too; every wait
    is watched: with the communicator's timeout, else ``standin.TIMEOUT`` seconds (a stand-in that does not
    match what the peers do gives up instead of hanging).  ``request``: the call was a nonblocking one (its
    part is played here all the same, before its error is raised)."""
    limit = state.timeout or standin.TIMEOUT

    def run(plan: Plan | None) -> None:
        if plan is None:
            return
        if not request:     # noted as this call: a peer that called otherwise finds the mismatch (a request's
            recorder.named(state.recorder, number(state.tags, tag), plan)   # start noted nothing yet)
        if plan.device is None:   # host memory: every message marked (see mpicoll.engine.standin)
            standin.run_marked(plan.rounds(), state.private, tag + plan.sig, 0, limit, method)
            return
        req = requests.start(plan, state, tag)
        req.watch = (method, limit, state.rank)
        req.Wait()

    def prepare_candidate(name: str, *candidate: Any, algorithm: str) -> Plan | None:
        return prepare(state, name, candidate, algorithm)

    if not standin.play(state, method, args, algorithm, error, prepare_candidate, run):
        state.messages_left = True
