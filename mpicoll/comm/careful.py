"""The careful path of a collective call: debug agreement, the watchdog, stand-ins, call logging.

A communicator's calls take this path when it was made with a timeout
(``MPICOLL_TIMEOUT=seconds`` or ``mpicoll.Comm(comm, timeout=seconds)``) or with
``MPICOLL_DEBUG`` set (see :mod:`mpicoll.engine.debug`); the choice is made
once, when the communicator is made.  Here a blocking call

1. checks its arguments (``prepare``, which sends nothing); with
   ``MPICOLL_DEBUG`` every rank then agrees on the outcome before any message
   (:func:`mpicoll.engine.debug.agree`); without it, a rank whose checks
   failed plays its part on scratch memory (:mod:`mpicoll.engine.standin`) and
   raises;
2. runs its schedule with :func:`mpicoll.engine.watchdog.execute` (through
   :func:`mpicoll.comm.preparing.run_plan`, as every prepared call runs): a deadline
   on every wait and every received message's size checked;
3. with ``MPICOLL_DEBUG=2``, logs algorithm, sizes and time.

Nonblocking calls are checked the same way and their requests carry the
timeout into ``Wait`` (:func:`mpicoll.engine.watchdog.wait`).
"""

from __future__ import annotations

import time
from typing import Any

from mpicoll.calls.table import TABLE
from mpicoll.comm.preparing import exchanged, prepare, run_plan, signed, stand_in
from mpicoll.data.datatypes import packing
from mpicoll.engine import debug, recorder, requests, watchdog
from mpicoll.engine.forms import number
from mpicoll.program.state import CommState, Preparation

__all__ = ["run", "start"]


def _checked(state: CommState, method: str, args: tuple, algorithm: str, tag: int, request: bool = False) -> Any:
    """The call's plan: agreed on by every rank (debug), or stood in for on scratch before raising."""
    if state.debug:
        preparation = Preparation(state)

        def checked() -> Any:
            with packing() as packed:
                return packed.attach(TABLE[method].prepare(preparation, *args, algorithm=algorithm))

        return signed(debug.agree(preparation, method, checked, state.timeout), preparation, method)
    try:
        return prepare(state, method, args, algorithm)
    except Exception as exc:
        stand_in(state, method, args, algorithm, tag, exc, request=request)
        raise


def run(state: CommState, method: str, algorithm: str, args: tuple, tag: int, key: object = None) -> None:
    """A blocking collective on the careful path (``tag``: the call's, drawn by the hot path; its ``key`` is
    not used: careful calls are not cached)."""
    state.check_in_step()
    t0 = time.perf_counter()
    try:
        args = exchanged(state, method, args)
        plan = _checked(state, method, args, algorithm, tag)
        recorder.named(state.recorder, number(state.tags, tag), plan)
        run_plan(state, plan, tag, method)
    except watchdog.CollectiveTimeout as exc:   # (in the call, or in the ranks' agreement on it)
        state.went_out_of_step(exc)
        raise
    if state.debug >= 2:
        debug.log(state, plan, method, time.perf_counter() - t0)


def start(state: CommState, method: str, args: tuple, algorithm: str, tag: int) -> Any:
    """A nonblocking collective on the careful path: its request carries the timeout into ``Wait``."""
    state.check_in_step()
    try:
        plan = _checked(state, method, args, algorithm, tag, request=True)
    except watchdog.CollectiveTimeout as exc:
        state.went_out_of_step(exc)
        raise
    req = requests.start(plan, state, tag, keep=args)
    if state.timeout is not None:
        req.watch = (method, state.timeout, state.rank, state.went_out_of_step)
    if state.debug >= 2:
        debug.log(state, plan, "I" + method[0].lower() + method[1:] + " (started)", 0.0)
    return req
