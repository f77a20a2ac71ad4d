"""The blocking executor: run one rank's schedule with mpi4py point-to-point calls.

:func:`bind` resolves every block of a schedule to array views once (MPI sees
raw bytes, so any dtype travels, bfloat16 included; reductions see typed
views).  :func:`execute` then runs the rounds by the :data:`PLAIN` policy of
:func:`mpicoll.engine.rounds.run`: a round with exactly one send and one
receive uses ``Sendrecv``, a lone send or receive uses ``Send``/``Recv``,
anything else posts every receive and send nonblocking and waits for all; then
the round's local steps run in order.  A round whose messages raise is handed
to :func:`mpicoll.engine.standin.continue_marked` (a peer's stand-in marked
its messages; a correct call never gets there).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.compiled import extension
from mpicoll.data.datatypes import byte_message
from mpicoll.engine import flags
from mpicoll.engine.rounds import Exchange, exchange, run, send_receive
from mpicoll.engine.standin import continue_marked
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Block, Reduce, Schedule, ScheduleError

__all__ = ["bind", "execute", "for_mpi", "BoundRound", "PLAIN"]

BoundRound = tuple[list[tuple[Any, int]], list[tuple[Any, int]], list[Callable[[], None]]]


def bind(schedule: Schedule, arrays: dict[str, Any], layouts: dict[str, Layout], reduce: Callable,
         xp: Any) -> list[BoundRound]:
    """Resolve a schedule against real buffers.

    ``arrays`` maps buffer names to one-dimensional typed arrays (an in-place
    call maps ``send`` to the receive array); ``layouts`` maps every buffer
    name the schedule uses to its layout (:meth:`Schedule.layouts` completes a
    call's layouts from the algorithm's scratch declarations).

    Raises
    ------
    ScheduleError
        The schedule names a buffer that ``arrays`` or ``layouts`` lacks (a scratch
        buffer the algorithm does not declare is never allocated).
    """
    names = schedule.buffers()
    if not (names <= arrays.keys() and names <= layouts.keys()):
        missing = sorted(name for name in names if name not in arrays or name not in layouts)
        raise ScheduleError(f"bind: {schedule.collective}/{schedule.algorithm} rank {schedule.rank} uses buffer(s) "
                            f"{', '.join(missing)} with no array or layout (declared scratch: "
                            f"{', '.join(schedule.declared) or 'none'})")
    raw: dict[str, tuple[Any, int]] = {}    # a buffer's bytes and item size, for messages (MPI sees raw bytes)

    def typed(block: Block) -> Any:
        start, stop = layouts[block.buf].span(block.lo, block.hi)
        return arrays[block.buf][start:stop]

    def message(block: Block) -> Any:
        start, stop = layouts[block.buf].span(block.lo, block.hi)
        seen = raw.get(block.buf)
        if seen is None:
            arr = arrays[block.buf]
            seen = raw[block.buf] = (arr.view("u1"), arr.dtype.itemsize)
        data, k = seen
        return data[start * k:stop * k]

    ufunc = getattr(reduce, "ufunc", None)   # a predefined op: the ufunc takes (left, right, out=out) itself
    bound: list[BoundRound] = []
    for rnd in schedule.rounds:
        if not rnd:
            continue
        steps: list[Callable[[], None]] = []
        for st in rnd.steps:
            if isinstance(st, Reduce):
                out, left, right = typed(st.out), typed(st.left), typed(st.right)
                if ufunc is None:
                    steps.append(partial(reduce, out, left, right))
                else:
                    steps.append(_ufunc_step(ufunc, left, right, out))
            elif not _same_memory(arrays, st.out, st.src):
                steps.append(_copy(typed(st.out), typed(st.src), xp))
        bound.append(([(message(x.block), x.peer) for x in rnd.sends],
                      [(message(x.block), x.peer) for x in rnd.recvs], steps))
    return bound


def for_mpi(bound: list[BoundRound]) -> list[BoundRound]:
    """The same rounds, each NumPy message given as ``[MPI.buffer(view), MPI.BYTE]``.

    mpi4py reads that form faster than the array itself: the buffer object's
    export is cheap and the datatype is given, where a NumPy array exports a
    format that mpi4py then looks up (about 0.1 us less per message).  What a
    plan run many times keeps; other messages (GPU arrays) stay as they are.  A message of 2^31 bytes
    or more is one element of a datatype of its size (:func:`~mpicoll.data.datatypes.byte_message`).
    """
    def spec(buf: Any) -> Any:
        return byte_message(buf) if type(buf) is np.ndarray else buf

    return [([(spec(buf), peer) for buf, peer in sends], [(spec(buf), peer) for buf, peer in recvs], steps)
            for sends, recvs, steps in bound]


def _ufunc_step(ufunc: Any, left: Any, right: Any, out: Any) -> Callable[[], None]:
    """``ufunc(left, right, out)`` as a call with no arguments, ``out`` by keyword where NumPy asks for it.

    NumPy 2.4 deprecates a third positional argument to ``np.maximum`` and
    ``np.minimum`` (a later NumPy may read it as a third input and never write
    ``out``); for every other ufunc a positional ``out`` is documented and the
    cheapest call.  Counted by callgrind, per step on 8 doubles: ``np.add``
    3,800 instructions positional, 4,300 through the compiled ``out_call``
    (which hands the keyword to the ufunc's vectorcall), 5,100 through a
    ``partial`` with a keyword (which merges a dict on every call);
    ``np.maximum`` 15,000 positional (the deprecation's warning machinery),
    4,200 through ``out_call``.  ``tests/unit/test_compiled_path.py`` runs every
    predefined op's step with warnings as errors, so a NumPy that deprecates
    more fails there.
    """
    compiled = _compiled_step(ufunc, left, right, out)
    if compiled is not None:
        return compiled
    if getattr(ufunc, "__name__", None) not in _OUT_BY_KEYWORD:
        return partial(ufunc, left, right, out)
    if _OUT_CALL is not None:
        return _OUT_CALL(ufunc, left, right, out)
    return partial(ufunc, left, right, out=out)


#: the ufuncs to which a positional ``out`` is deprecated (NumPy 2.4)
_OUT_BY_KEYWORD = frozenset({"maximum", "minimum"})

#: the ufuncs and dtypes (kind, item size) the compiled ``Reduce`` step computes, as its indexes (see
#: ``mpicoll/engine/_steps.c``: the float ones only ``add`` and ``multiply``)
_COMPILED_OPS = {"add": 0, "multiply": 1, "minimum": 2, "maximum": 3, "bitwise_and": 4, "bitwise_or": 5,
                 "bitwise_xor": 6}
_COPY = 7
_COMPILED_MAX = 1024
_COMPILED_TYPES = {("f", 4): 0, ("f", 8): 1, ("i", 1): 2, ("i", 2): 3, ("i", 4): 4, ("i", 8): 5, ("u", 1): 6,
                   ("u", 2): 7, ("u", 4): 8, ("u", 8): 9}


def _compiled_step(ufunc: Any, left: Any, right: Any, out: Any) -> Callable[[], None] | None:
    """``ufunc(left, right, out)`` as the compiled ``Reduce`` step, where it gives the same bits (one IEEE
    operation per element, or exact integer arithmetic): NumPy arrays of one native dtype, of at most
    :data:`_COMPILED_MAX` elements (larger blocks are worth NumPy's vectorized loops); None elsewhere."""
    if _REDUCE is None or not type(out) is type(left) is type(right) is np.ndarray or out.size > _COMPILED_MAX:
        return None
    dtype = out.dtype
    op = _COMPILED_OPS.get(getattr(ufunc, "__name__", ""))
    kind = _COMPILED_TYPES.get((dtype.kind, dtype.itemsize))
    if op is None or kind is None or not dtype.isnative or left.dtype != dtype or right.dtype != dtype \
            or (dtype.kind == "f" and op > 1):
        return None
    try:
        return _REDUCE(op, kind, out, left, right)
    except (ValueError, BufferError):    # unaligned, or partly overlapping: the ufunc sorts that out
        return None


def _copy(out: Any, src: Any, xp: Any) -> Callable[[], None]:
    """``out[...] = src`` as a call with no arguments: for NumPy arrays of one dtype, the compiled step's copy
    (a ``memcpy``); else item assignment (cheaper than copyto) or ``xp.copyto``."""
    if type(out) is np.ndarray:
        if _REDUCE is not None and type(src) is np.ndarray and src.dtype == out.dtype and not out.dtype.hasobject:
            try:
                return _REDUCE(_COPY, _COMPILED_TYPES[("u", 1)], out, src, src)
            except (ValueError, BufferError):    # not contiguous, or partly overlapping
                pass
        return partial(out.__setitem__, Ellipsis, src)
    return partial(xp.copyto, out, src)


def _same_memory(arrays: dict[str, Any], a: Block, b: Block) -> bool:
    return arrays[a.buf] is arrays[b.buf] and (a.lo, a.hi) == (b.lo, b.hi)


class Plain(Exchange):
    """The policy of every blocking call: its messages by :func:`mpicoll.engine.rounds.send_receive` (one send
    and one receive as ``Sendrecv``, ...); a round whose messages raise is handed
    to :func:`mpicoll.engine.standin.continue_marked` (a peer's stand-in marked its messages; a correct call
    never gets there)."""

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        send_receive(comm, tag, sends, recvs)

    def failed(self, rounds: Any, comm: MPI.Comm, tag: int, t: int, exc: MPI.Exception) -> None:
        continue_marked(rounds, comm, tag, t, exc)


PLAIN = Plain()


def _execute(bound: list[BoundRound], comm: MPI.Comm, tag: int = 0) -> None:
    """Run bound rounds on ``comm`` (a private communicator), in order: :func:`mpicoll.engine.rounds.run` with
    the :data:`PLAIN` policy.

    The definition of :func:`execute`, which is the same loop compiled
    (``mpicoll/engine/_rounds.c``) when that was built, and this function otherwise.
    """
    run(bound, comm, tag, PLAIN)


def _compiled_execute(rounds: Any) -> Callable[..., None]:
    if rounds is None or not hasattr(rounds, "on_failure"):   # not built, or built from an older _rounds.c
        return _execute
    rounds.init(exchange)
    rounds.on_failure(continue_marked)
    rounds.on_mismatch(flags.FLAGGED, flags.check)
    return rounds.execute


_ROUNDS = extension("_rounds")
execute = _compiled_execute(_ROUNDS)
_OUT_CALL = getattr(_ROUNDS, "out_call", None)   # None: not built, disabled, or built from an older _rounds.c
_REDUCE = getattr(extension("_direct"), "Reduce", None)   # None: not built, or disabled
