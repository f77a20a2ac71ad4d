"""One module per collective: its contract, its argument checks and its binding.

Each module ``mpicoll.calls.<collective>`` defines

- ``SPEC``: what the collective computes, on symbolic blocks (used by the
  checker) and on arrays (used by the simulator), see :class:`Spec`;
- ``prepare(comm, ...)``: validates a call's arguments (before any message),
  chooses the algorithm and returns a :class:`Plan` (or None when there is
  nothing to do), which the blocking, nonblocking and persistent paths run.

A symbolic value is ``(block, runs)``: the data of block index ``block`` reduced
over the ranks in ``runs``, a tuple of half-open ranges ``(lo, hi)`` in the order
they were combined.  Rank r's own input of block b is ``(b, ((r, r + 1),))``; a
complete all-reduce result is ``(b, ((0, p),))``.  Data-movement collectives use
the same form with a single contributing rank.
"""

from __future__ import annotations

import importlib
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from .. import backends, registry, selection
from ..datatypes import check_reducible
from ..debug import MismatchError, debug_check
from ..exec.blocking import bind, execute
from ..layout import Layout
from ..ops import Op, reducer
from ..schedule import Schedule

if TYPE_CHECKING:
    from ..comm import Comm

__all__ = ["Spec", "spec", "Plan", "make_plan", "run", "MismatchError", "debug_check", "own", "call_key",
           "cached_plan", "remember_plan"]

Value = tuple[int, tuple[tuple[int, int], ...]]


def own(rank: int, block: int) -> Value:
    """Rank ``rank``'s own input of block ``block``."""
    return (block, ((rank, rank + 1),))


@dataclass(frozen=True)
class Spec:
    """The contract of one collective.

    ``inputs(rank, size, nblocks, **params)`` and ``outputs(...)`` give, per
    buffer name, the symbolic values before and (expected) after the call;
    ``None`` entries in outputs are not checked.  ``simulate(inputs, nblocks,
    **params)`` gives per rank ``(arrays, layouts, result_names)`` for the
    simulator, from one input array per rank.
    """

    name: str
    reduces: bool
    in_place: bool
    inputs: Callable[..., dict[str, list]]
    outputs: Callable[..., dict[str, list]]
    simulate: Callable[..., list[tuple[dict[str, Any], dict[str, Layout], str]]] | None = None
    params: tuple[str, ...] = field(default=())


def spec(collective: str) -> Spec:
    """The :class:`Spec` of ``collective``."""
    try:
        module = importlib.import_module(f"{__name__}.{collective}")
    except ModuleNotFoundError:
        raise ValueError(f"unknown collective {collective!r}") from None
    return module.SPEC


@dataclass
class Plan:
    """A schedule bound to this call's buffers, ready to run (blocking or not)."""

    schedule: Schedule
    arrays: dict[str, Any]
    layouts: dict[str, Layout]
    kernel: Callable[[Any, Any, Any], None] | None
    xp: Any
    finish: Callable[[], None] | None = None   # e.g. copy a staged result back to the GPU
    device: Any = None     # a backends.call.DeviceCall when the buffers are on a GPU: it runs the plan
    before: Callable[[], None] | None = None   # run at each start: packs non-contiguous datatypes again

    _rounds: list | None = field(default=None, repr=False)

    def bound(self) -> list:
        """Freshly bound rounds (the nonblocking paths own theirs)."""
        if self.device is not None:
            return self.device.bound()
        return bind(self.schedule, self.arrays, self.layouts, self.kernel, self.xp)

    def rounds(self) -> list:
        """Bound rounds, bound once and kept: what the blocking path runs on every call."""
        if self._rounds is None:
            self._rounds = self.bound()
        return self._rounds

    def begin(self) -> None:
        """A request starts: GPU buffers make their inputs visible to MPI, buffers of non-contiguous
        datatypes are packed again (nothing to do for plain host buffers)."""
        if self.before is not None:
            self.before()
        if self.device is not None:
            self.device.begin()

    @property
    def scratch_bytes(self) -> int:
        held = self.device.nbytes if self.device is not None else 0
        return held + sum(arr.nbytes for name, arr in self.arrays.items() if name.startswith("tmp"))


# -- plans cached across blocking calls ------------------------------------------------------------
#
# A program that calls the same collective on the same arrays again and again
# (a training loop, a solver) pays for parsing, checking, choosing and binding
# once.  The key holds each NumPy array's identity, shape, strides, dtype and
# writability, the op's identity and the algorithm asked for, plus the
# environment that steers the choice; the cache keeps strong references to the
# keyed objects so that an id can never be reused by another object while its
# entry lives (and NumPy then refuses to ``resize`` the array in place).
# Anything else (lists, datatypes, GPU arrays, ``MPICOLL_DEBUG``) is not cached.

PLAN_CACHE_ENTRIES = 16
PLAN_CACHE_SCRATCH = 256 * 1024 * 1024   # bytes of scratch the cached plans of one communicator may hold


def _environ() -> dict:
    # os.environ's own dict (kept in step by os.environ's setters): a plain dict lookup,
    # where os.environ.get encodes the key and costs a microsecond per call
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else {k.encode(): v for k, v in os.environ.items()}


_ALGO, _DEBUG, _GPU = b"MPICOLL_ALGO", b"MPICOLL_DEBUG", b"MPICOLL_GPU_TRANSPORT"


def call_key(*objects: Any) -> tuple | None:
    """A cache key for a call on these arguments, or None when the call must not be cached."""
    env = _environ()
    debug = env.get(_DEBUG)
    if debug and debug != b"0":
        return None
    parts: list[Any] = [env.get(_ALGO), env.get(_GPU), selection._GENERATION]
    for obj in objects:
        if type(obj) is np.ndarray:
            parts.append((id(obj), obj.shape, obj.strides, obj.dtype, obj.flags.writeable))
        elif backends.on_device(obj):   # a GPU array: its plan keeps pinned mirrors or IPC bookkeeping
            parts.append((id(obj), obj.shape, obj.strides, obj.dtype, type(obj)))
        elif obj is None or obj is MPI.IN_PLACE or type(obj) is str or type(obj) is int:
            parts.append(obj)   # IN_PLACE, a root, an algorithm name
        elif isinstance(obj, (MPI.Op, Op)):
            parts.append(id(obj))
        else:
            return None
    return tuple(parts)


def cached_plan(comm: Comm, key: tuple | None) -> Plan | None:
    """The plan cached under ``key`` on ``comm``, if any (and mark it recently used)."""
    if key is None:
        return None
    cache = comm.__dict__.get("_plans")
    if cache is None:
        return None
    hit = cache.get(key)
    if hit is None:
        return None
    cache.move_to_end(key)
    return hit[0]


def remember_plan(comm: Comm, key: tuple | None, plan: Plan | None, objects: tuple) -> None:
    """Cache ``plan`` under ``key`` with strong references to ``objects``; evict the least recently used."""
    if key is None or plan is None or (plan.finish is not None and plan.device is None) \
            or plan.scratch_bytes > PLAN_CACHE_SCRATCH:
        return
    cache = comm.__dict__.setdefault("_plans", OrderedDict())
    cache[key] = (plan, objects)
    while len(cache) > PLAN_CACHE_ENTRIES or sum(e[0].scratch_bytes for e in cache.values()) > PLAN_CACHE_SCRATCH:
        cache.popitem(last=False)


def make_plan(comm: Comm, collective: str, name: str, params: dict[str, Any], arrays: dict[str, Any],
              layouts: Callable[[int], dict[str, Layout]], *, op: Any = None, dtype: np.dtype,
              scratch_count: int | dict[str, int], datatype: Any = None) -> Plan:
    """Build (cached) this rank's schedule and attach buffers, scratch space and the kernel.

    ``layouts(nblocks)`` returns the layout of each buffer name (``bind`` uses
    ``layouts["recv"]`` for names it does not list); ``scratch_count`` is the
    element count of every scratch buffer (``tmp*``), or a dict by name.

    GPU arrays get a plan whose ``device`` (:class:`mpicoll.backends.call.DeviceCall`)
    moves them with a GPU transport, chosen when the plan first runs.
    """
    if op is not None:
        check_reducible(datatype)
    sched = registry.schedule(collective, name, comm.rank, comm.size, **params)
    device = backends.device_for(arrays)
    if device is not None:
        from ..backends.call import DeviceCall  # noqa: PLC0415 - GPU calls only

        bound_layouts = layouts(sched.nblocks)
        scratch = {s: scratch_count[s] if isinstance(scratch_count, dict) else scratch_count for s in sched.scratch()}
        call = DeviceCall(device, comm, collective, sched, dict(arrays), bound_layouts, scratch, dtype=dtype, op=op,
                          datatype=datatype)
        return Plan(sched, dict(arrays), bound_layouts, None, device.xp, call.finish, device=call)
    xp: Any = np
    arrays = dict(arrays)
    for scratch_name in sched.scratch():
        count = scratch_count[scratch_name] if isinstance(scratch_count, dict) else scratch_count
        arrays[scratch_name] = xp.empty(count, dtype)
    kernel = reducer(op, dtype, xp, datatype).reduce if op is not None else None
    return Plan(sched, arrays, layouts(sched.nblocks), kernel, xp)


def run(plan: Plan | None, comm: Comm) -> None:
    """Run a plan to completion on the communicator's private duplicate."""
    if plan is None:
        return
    if plan.device is not None:
        plan.device.run(comm.private)
    else:
        execute(plan.rounds(), comm.private)
    if plan.finish is not None:
        plan.finish()
