"""The paths a collective call on an ``mpicoll.Comm`` takes: blocking, nonblocking, persistent.

A blocking call, ``comm.Allreduce(x, y)``:

1. :func:`run_blocking` (compiled: ``mpicoll.program._callkey.run``) draws the
   call's tag from the communicator's state, builds the call's key, and runs
   the cached plan's entry on a hit;
2. otherwise it hands the call, with its tag and key, to the state's
   ``slow_path``, chosen once when the communicator was made:
   :func:`fast_miss` (prepare the plan, or move a cached one of the same shape
   to the new memory, cache it and run it) or the careful path
   (:func:`mpicoll.comm.careful.run`: a timeout or ``MPICOLL_DEBUG``).

While this process has nonblocking requests outstanding, a blocking call takes
the slow path, which decides in one place
(:func:`mpicoll.comm.preparing.run_plan`) to run it as a request so that the
outstanding ones keep moving.
"""

from __future__ import annotations

from typing import Any

from mpicoll.calls.table import TABLE, VALUE_ARGS
from mpicoll.comm import careful, inter
from mpicoll.comm.inter import InterState
from mpicoll.comm.preparing import exchanged, prepare, run_plan, stand_in
from mpicoll.compiled import extension
from mpicoll.engine import recorder, requests
from mpicoll.engine.forms import BLOCKING, NONBLOCKING, PERSISTENT, draw, number
from mpicoll.engine.inflight import ACTIVE, ELSEWHERE
from mpicoll.engine.requests import Prequest, Request
from mpicoll.program import callkey
from mpicoll.program.callkey import call_key, held, shape_key
from mpicoll.program.plan import NOTHING, Plan
from mpicoll.program.state import CommState

__all__ = ["run_blocking", "fast_miss", "start", "init"]


def fast_miss(state: CommState, method: str, algorithm: str, args: tuple, tag: int, key: Any) -> None:
    """A blocking call the plan cache did not hold (``key``: its key, built by the hot path): prepare it (or
    move a plan of its shape), cache it, run it."""
    if TABLE[method].exchange is not None:
        args = exchanged(state, method, args)
        key = call_key(method, args, algorithm, TABLE[method].values)
    try:
        plan = _cached_prepare(state, method, args, algorithm, key)
    except Exception as exc:
        stand_in(state, method, args, algorithm, tag, exc)
        raise
    recorder.named(state.recorder, number(state.tags, tag), plan)
    run_plan(state, plan, tag, method)


def _cached_prepare(state: CommState, method: str, args: tuple, algorithm: str, key: Any) -> Plan | None:
    collective = TABLE[method]
    plans = state.plans
    shape = None
    if key is not None:
        plan = plans.get(key)
        if plan is not None:
            return None if plan is NOTHING else plan
        if collective.cacheable is None or collective.cacheable(*args):
            shape, spans = shape_key(method, args, algorithm, collective.values)
            plan = plans.rebased(shape, spans)
            if plan is not None:
                plans.put(key, plan, held(args, collective.values), spans, comm=state.private)
                return None if plan is NOTHING else plan
    plan = prepare(state, method, args, algorithm, plans.arena)
    if shape is not None:
        plans.put(key, plan, held(args, collective.values), spans, comm=None if plan is None else state.private,
                  shape=shape)
    return plan


def _start(comm: Any, method: str, args: tuple, algorithm: str) -> Request:
    """A nonblocking call: prepared (or a cached plan lent) and started; it never waits for another rank (the
    Python definition of the compiled ``start``)."""
    state = _state(comm)
    if type(state) is InterState:
        return inter.start(state, method, args, algorithm)
    return start_drawn(state, method, args, algorithm, state.next_tag(NONBLOCKING))


def start_drawn(state: CommState, method: str, args: tuple, algorithm: str, tag: int) -> Request:
    """:func:`start` once the call's tag is drawn (where the compiled ``start`` hands a call it does not run)."""
    args = exchanged(state, method, args)
    if state.careful:
        return careful.start(state, method, args, algorithm, tag)
    try:
        plan, lent = _lend(state, method, args, algorithm)
    except Exception as exc:
        stand_in(state, method, args, algorithm, tag, exc, request=True)
        raise
    return requests.start(plan, state, tag, lent=lent, keep=args)


def _lend(state: CommState, method: str, args: tuple, algorithm: str) -> tuple[Plan | None, bool]:
    """The plan of a nonblocking call, and whether it is a cached one lent to this request.

    A cached plan serves one request at a time (its scratch is its own); an equal call made while it is
    lent gets a fresh plan.  Plans that stage GPU buffers, pack datatypes or finish into the caller's objects
    are never cached (an in-place call's copy into the caller's buffer is by address: it is cached).
    """
    collective = TABLE[method]
    key = call_key(method, args, algorithm, collective.values)
    cache = state.request_plans
    if key is not None:
        plan = cache.get(key)
        if plan is NOTHING:
            return None, False
        if plan is not None and not plan.lent:
            return plan, True
    plan = prepare(state, method, args, algorithm)
    if key is None or (collective.cacheable is not None and not collective.cacheable(*args)) or key in cache.data:
        return plan, False
    if plan is not None and (plan.device is not None or plan.before is not None
                             or (plan.finish is not None and not plan.finish_by_name)):
        return plan, False
    cache.put(key, plan, held(args, collective.values), shape_key(method, args, algorithm, collective.values)[1],
              comm=state.private)
    return plan, plan is not None and key in cache.data


def init(comm: Any, method: str, args: tuple, algorithm: str) -> Prequest:
    """A persistent call: prepared and bound once, with a tag of its own for its whole life."""
    state = _state(comm)
    if type(state) is InterState:
        return inter.init(state, method, args, algorithm)
    tag = state.next_tag(PERSISTENT)
    plan = prepare(state, method, exchanged(state, method, args), algorithm)
    before = plan.begin if plan is not None and (plan.device is not None or plan.before is not None) else None
    # (GPU buffers staged in, datatypes packed again, at every start)
    return requests.persistent(plan, state, tag, before, keep=args)


def _state(comm: Any) -> CommState | InterState:
    state = comm._state
    if state is None:
        raise ValueError("the communicator is MPI.COMM_NULL")
    return state


def _run_blocking(comm: Any, method: str, algorithm: str, *args: Any) -> None:
    """A blocking call (the Python definition of the compiled ``run``): a cached plan's entry, or the slow path,
    noted in the communicator's flight recorder (:func:`mpicoll.engine.recorder.begin`, ``end``, ``failed``)."""
    state = _state(comm)
    tag = draw(state.tags, BLOCKING)     # (state: a CommState or an InterState)
    key = call_key(method, args, algorithm, VALUE_ARGS.get(method, ()))
    entries = state.entries
    entry = entries.get(key) if entries is not None and key is not None and not ACTIVE and not ELSEWHERE else None
    traced = state.recorder
    slot = recorder.begin(traced, number(state.tags, tag), (entry.what or method) if entry is not None else method) \
        if traced is not None else None
    try:
        if entry is not None:
            entry.used = True
            entry.run(tag)
        else:
            state.slow_path(state, method, algorithm, args, tag, key)
    except BaseException as exc:
        if slot is not None:
            recorder.failed(slot, exc)
        raise
    if slot is not None:
        recorder.end(slot)


def _compiled_run_blocking() -> Any:
    """The compiled ``run`` where the key builder is compiled too, else :func:`_run_blocking`."""
    if call_key is callkey._call_key:
        return _run_blocking
    _callkey = extension("_callkey")
    _callkey.init_run(ACTIVE, ELSEWHERE, VALUE_ARGS, recorder.failed)
    return _callkey.run


#: ``run_blocking(comm, method, algorithm, *args)``: what every blocking collective method calls
run_blocking = _compiled_run_blocking()


def _compiled_start() -> Any:
    """The compiled ``start`` where the key builder and the requests' C paths are compiled, else :func:`_start`.

    It runs a hit whose cached plan's last request (``Plan.spare``) nothing else holds any more: that request
    is started again (``mpicoll.engine._direct.restart``), as :func:`_start` would start a new one; every
    other call goes to :func:`start_drawn` with the tag it drew (to :func:`_start` on an intercommunicator).
    """
    if call_key is callkey._call_key or requests.RESTART is None:
        return _start
    _callkey = extension("_callkey")
    startable = frozenset(name for name, collective in TABLE.items() if collective.exchange is None)
    _callkey.init_start(CommState, Plan, startable, _start, start_drawn, requests.RESTART, NONBLOCKING)
    return _callkey.start


#: ``start(comm, method, args, algorithm)``: what every nonblocking collective method calls
start = _compiled_start()
