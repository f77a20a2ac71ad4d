"""A call's plan (its schedule bound to buffers) and the cache that lets repeated calls skip building it.

A :class:`Plan` is what every path runs: the blocking executor
(:func:`mpicoll.runtime.blocking.execute`), nonblocking requests and persistent
requests all take its bound rounds, the private MPI communicator and a tag.

Blocking calls look their plan up in a :class:`PlanCache` (one per
communicator) before parsing anything.  The key (:func:`call_key`) is built
from what determines the binding:

- each buffer's *memory*: its address, extent and writability, and how the
  call reads it (a NumPy array's dtype; another object's type and element
  format);
- the counts, displacements and (predefined) datatypes of ``[buf, ...]`` specs;
- the op, the root, the algorithm asked for, and the configuration's generation
  (:func:`mpicoll.config.reload` makes every plan be prepared anew).

The key is built on every blocking call, so it is compiled when it can be
(``mpicoll/_callkey.c``, an optional C extension whose keys, bytes, are equal
exactly where those of the Python definition, :func:`_call_key`, are; it hands
that function the forms it does not handle itself).  The same extension runs the whole hit of a blocking call
(``mpicoll.comm.comm.run``: tag, key, lookup, the entry's runner).

A miss need not prepare the call again: a call whose *shape* (the key without
the buffers' addresses, :func:`shape_key`) is that of a cached plan gets that
plan moved to its memory (:meth:`Plan.rebased`), which skips the checks, the
choice of algorithm and the allocation of scratch.  Nonblocking calls have a
cache of their own (``Comm.request_plans``), whose plans own their scratch and
are lent to one request at a time.

A cached plan views the user's memory through raw addresses
(``MPI.buffer.fromaddress``), not through the user's objects, so caching
never keeps a user's buffer alive, never stops a ``bytearray`` from growing or
an ``mmap`` from closing.  That is safe because a plan is only ever reused by a
call whose buffers occupy exactly the same memory range with the same format
at that moment.  GPU arrays are keyed by identity instead, and their entry keeps
them alive (their plan holds pinned mirrors or IPC mappings).  Calls the key
cannot describe (derived datatypes, user objects of unknown kind,
``MPICOLL_DEBUG``), and plans that finish by writing to a user object (an
in-place result copied back), are not cached.

The cache holds at most :data:`PLAN_CACHE_ENTRIES` plans per communicator
(evicted by the clock algorithm, an approximation of least recently used).
Blocking calls on one communicator run one at a time, so the scratch buffers
of their plans all view one arena per communicator (:meth:`PlanCache.arena`),
as large as the largest scratch a plan needs, at most
:data:`PLAN_CACHE_SCRATCH` bytes; memory a plan allocates for itself otherwise
(a non-root's stand-in receive buffer, say) totals at most that much again.
"""

from __future__ import annotations

import array
import mmap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.config import GENERATION
from mpicoll.families import registry
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Schedule
from mpicoll.runtime import gpu as backends
from mpicoll.runtime.blocking import bind, execute, for_mpi
from mpicoll.runtime.compiled import extension
from mpicoll.runtime.datatypes import check_reducible
from mpicoll.runtime.ops import Op, reducer

__all__ = ["Plan", "NOTHING", "make_plan", "PlanCache", "call_key", "shape_key", "held",
           "PLAN_CACHE_ENTRIES", "PLAN_CACHE_SCRATCH",
           "REQUEST_PLAN_SCRATCH"]

PLAN_CACHE_ENTRIES = 64
PLAN_CACHE_SCRATCH = 256 * 1024 * 1024   # bytes of scratch the cached plans of one communicator may hold
REQUEST_PLAN_SCRATCH = 64 * 1024 * 1024  # ... and its cached nonblocking plans, each with scratch of its own


@dataclass
class Plan:
    """A schedule bound to this call's buffers, ready to run (blocking or not)."""

    schedule: Schedule
    arrays: dict[str, Any]
    layouts: dict[str, Layout]
    kernel: Callable[[Any, Any, Any], None] | None
    xp: Any
    finish: Callable[[], None] | None = None   # e.g. unpack a result staged for a non-contiguous datatype
    device: Any = None     # a backends.call.DeviceCall when the buffers are on a GPU: it runs the plan
    before: Callable[[], None] | None = None   # run at each start: packs non-contiguous datatypes again

    owned_bytes: int = 0                        # memory the plan allocated itself (known once detached)
    shared: frozenset[str] = frozenset()        # scratch buffers that are views of the communicator's arena
    #: once detached: where each array viewing the caller's memory lies, ``name: (span index, byte offset)``;
    #: None before, and for a plan that cannot be moved to other memory (see :meth:`rebased`)
    relocations: dict[str, tuple[int, int]] | None = None

    lent: bool = False     # a cached nonblocking plan in use by an unfinished request (see Comm._lend)

    _rounds: list | None = field(default=None, repr=False)
    _runner: tuple[Any, Callable[[int], None]] | None = field(default=None, repr=False)   # (comm, runner(comm))
    _request_parts: tuple | None = field(default=None, repr=False)   # see request_parts

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

    def request_parts(self) -> tuple[list, list[list[Callable[[], None]]]]:
        """What a request running this cached plan needs, made once: its rounds in the form MPI reads
        fastest (:func:`~mpicoll.runtime.blocking.for_mpi`) and each round's local steps (see ``Comm._lend``)."""
        parts = self._request_parts
        if parts is None:
            rounds = for_mpi(self.rounds())
            parts = self._request_parts = (rounds, [steps for _, _, steps in rounds])
        return parts

    def runner(self, comm: Any) -> Callable[[int], None]:
        """``run(tag)``: this plan run blocking on ``comm`` (the private communicator), ready-made.

        What a cache entry calls on a hit: for plain host buffers, the blocking
        executor on the bound rounds; otherwise the GPU transport, and the
        unpacking of a result staged for a non-contiguous datatype.  Made once
        (per communicator: a plan only ever runs on one).
        """
        made = self._runner
        if made is not None and made[0] is comm:
            return made[1]
        run = self._make_runner(comm)
        self._runner = (comm, run)
        return run

    def _make_runner(self, comm: Any) -> Callable[[int], None]:
        if self.device is None and self.finish is None:
            return partial(execute, for_mpi(self.rounds()), comm)
        device, rounds, finish = self.device, None if self.device else for_mpi(self.rounds()), self.finish

        def run(tag: int) -> None:
            if device is not None:
                device.run(comm, tag)
            else:
                execute(rounds, comm, tag)
            if finish is not None:
                finish()

        return run

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
        return held + sum(self.arrays[name].nbytes for name in self.schedule.declared if name in self.arrays)

    def detach(self, spans: Sequence[tuple[int, int]]) -> None:
        """View the caller's memory by address, so that the plan keeps none of the caller's objects alive.

        ``spans`` are the caller's buffers, ``(address, nbytes)``: only arrays lying
        inside one are replaced; memory the plan allocated itself (scratch space,
        a non-root's stand-in receive buffer) stays owned by the plan.  Where each
        replaced array lies is kept in :attr:`relocations`.  A plan already
        detached (one made by :meth:`rebased`) is left as it is.
        """
        if self.relocations is not None:
            return
        seen: dict[int, Any] = {}
        self.owned_bytes = 0
        if self.device is not None:     # GPU buffers: the cache entry keeps the arrays alive instead
            self.owned_bytes = self.scratch_bytes
            return
        relocations: dict[str, tuple[int, int]] | None = {}
        for name, arr in list(self.arrays.items()):
            if name in self.shared:
                continue
            if type(arr) is not np.ndarray or arr.nbytes == 0:
                if arr is not None and getattr(arr, "nbytes", 0):
                    relocations = None     # a non-NumPy view of some memory: the plan cannot be moved
                continue
            address, end = _bounds(arr)
            span = None
            for i, (lo, n) in enumerate(spans):
                if lo <= address and end <= lo + n:
                    span = i
                    break
            if span is None:
                self.owned_bytes += 0 if id(arr) in seen else arr.nbytes
                seen[id(arr)] = arr
                continue
            if relocations is not None:
                relocations[name] = (span, address - spans[span][0])
            raw = seen.get(id(arr))
            if raw is None:
                raw = seen[id(arr)] = _by_address(arr, address)
            self.arrays[name] = raw
        self.relocations = relocations
        self._rounds = self._runner = self._request_parts = None

    def rebased(self, spans: Sequence[tuple[int, int]]) -> Plan:
        """This (detached) plan moved to other memory: the same call on buffers at ``spans``.

        ``spans`` are the new call's buffers, ``(address, nbytes)``, in the order
        and with the extents of the spans this plan was detached from.  Only the
        arrays viewing the caller's memory change; scratch space is shared with
        this plan (the blocking calls of a communicator run one at a time).
        """
        assert self.relocations is not None and self.device is None and self.owned_bytes == 0
        arrays = dict(self.arrays)
        moved: dict[int, np.ndarray] = {}
        for name, (span, offset) in self.relocations.items():
            arr = self.arrays[name]
            new = moved.get(id(arr))      # an array under two names (in place) stays one array
            if new is None:
                new = moved[id(arr)] = _by_address(arr, spans[span][0] + offset)
            arrays[name] = new
        plan = object.__new__(Plan)       # a copy (dataclasses.replace would run __init__ and field checks)
        plan.__dict__.update(self.__dict__, arrays=arrays, _rounds=None, _runner=None, _request_parts=None)
        return plan


def _bounds(arr: np.ndarray) -> tuple[int, int]:
    """The memory of a contiguous array, ``(start address, end address)``."""
    view = MPI.buffer(arr)     # cheaper than __array_interface__, which builds a dict
    return view.address, view.address + view.nbytes


def _by_address(arr: np.ndarray, address: int) -> np.ndarray:
    """A view of ``arr``'s memory that does not reference ``arr`` (one-dimensional, same dtype and writability)."""
    raw = MPI.buffer.fromaddress(address, arr.nbytes, readonly=not arr.flags.writeable)
    return np.frombuffer(raw, dtype=arr.dtype)


#: what the cache holds for a call with nothing to do (a zero count; a collective on one rank)
NOTHING = Plan(Schedule("none", "nothing", 0, 1, 1, ()), {}, {}, None, np)


def make_plan(comm: Any, collective: str, name: str, params: dict[str, Any], arrays: dict[str, Any],
              layouts: Callable[[int], dict[str, Layout]], *, op: Any = None, dtype: np.dtype,
              datatype: Any = None) -> Plan:
    """Build (cached) this rank's schedule and attach buffers, scratch space and the kernel.

    ``layouts(nblocks)`` returns the layout of ``recv``, of ``send`` when it
    differs from ``recv``'s, and of each scratch buffer the algorithm declares
    ``like="own"``.  Every scratch buffer the rank's schedule uses is allocated
    as its declaration says (:meth:`mpicoll.ir.schedule.Schedule.layouts`): as many
    elements as its layout spans.  A buffer name the algorithm does not declare
    raises :class:`~mpicoll.ir.schedule.ScheduleError`.

    GPU arrays get a plan whose ``device`` (:class:`mpicoll.runtime.gpu.call.DeviceCall`)
    moves them with a GPU transport, chosen when the plan first runs.
    """
    if op is not None:
        check_reducible(datatype)
    sched = registry.schedule(collective, name, comm.rank, comm.size, **params)
    bound_layouts = sched.layouts(layouts(sched.nblocks))
    scratch = {s: max(bound_layouts[s].ends, default=0) for s in sched.scratch()}   # elements of each
    device = backends.device_for(arrays)
    if device is not None:
        from mpicoll.runtime.gpu.call import DeviceCall  # noqa: PLC0415 - GPU calls only

        call = DeviceCall(device, comm, collective, sched, dict(arrays), bound_layouts, scratch, dtype=dtype, op=op,
                          datatype=datatype)
        return Plan(sched, dict(arrays), bound_layouts, None, device.xp, call.finish, device=call)
    xp: Any = np
    arrays = dict(arrays)
    arena = getattr(comm, "arena", None)
    offsets, total = _packed(scratch, np.dtype(dtype).itemsize)
    block = arena(total) if arena is not None and scratch else None
    for scratch_name, count in scratch.items():
        if block is None:
            arrays[scratch_name] = xp.empty(count, dtype)
        else:
            start = offsets[scratch_name]
            arrays[scratch_name] = block[start:start + count * np.dtype(dtype).itemsize].view(dtype)
    kernel = reducer(op, dtype, xp, datatype).reduce if op is not None else None
    shared = frozenset(scratch) if block is not None else frozenset()
    return Plan(sched, arrays, bound_layouts, kernel, xp, shared=shared)


# -- scratch shared by the blocking calls of one communicator --------------------------------------

_ALIGN = 64   # bytes: each scratch buffer in an arena starts on a cache line


def _packed(scratch: dict[str, int], itemsize: int) -> tuple[dict[str, int], int]:
    """Byte offsets of the scratch buffers laid one after another (each aligned), and the bytes in all."""
    offsets, total = {}, 0
    for name, count in scratch.items():
        offsets[name] = total
        total += -(-count * itemsize // _ALIGN) * _ALIGN
    return offsets, total


# -- the cache key ---------------------------------------------------------------------------------

_PLAIN = (int, str, float, bool, type(None))
_BUFFERS = frozenset((bytearray, bytes, memoryview, mmap.mmap, array.array))
_IN_PLACE = MPI.IN_PLACE
_buffer = MPI.buffer
# mpi4py's predefined datatypes and reduction ops are module-level objects alive for the whole run:
# recognised by identity (cheaper than Datatype.is_predefined or Op.__eq__) and keyed by handle
# (their key parts are made once: ``("dt", handle)``, ``("op", handle)``)
_PREDEFINED_TYPES = {id(v): ("dt", v.handle) for v in vars(MPI).values()
                     if type(v) is MPI.Datatype and v != MPI.DATATYPE_NULL}
_PREDEFINED_OPS = {id(v): ("op", v.handle) for v in vars(MPI).values() if type(v) is MPI.Op and v != MPI.OP_NULL}


class _Uncacheable(Exception):
    """Raised inside the key builder for an argument the key cannot describe."""


def _element(obj: Any, t: type) -> str:
    """The element format a bytes-like object is read as (NumPy reads a buffer in its own format)."""
    if t is array.array:
        return obj.typecode
    if t is memoryview:
        return obj.format
    return "B"


def _address(buf: Any, spans: list | None) -> int | None:
    """``buf``'s address for a call's key; for its shape's key (``spans`` given), None, and the span noted."""
    if spans is None:
        return buf.address
    spans.append((buf.address, buf.nbytes))
    return None


def _memory(obj: Any, spans: list | None = None) -> tuple:
    """What identifies the memory of one buffer object: address, extent, writability, element format."""
    t = type(obj)
    if t in _BUFFERS or isinstance(obj, np.ndarray):
        try:
            buf = _buffer(obj)   # raises for a non-contiguous array (not cached; prepare explains)
        except Exception:
            raise _Uncacheable from None
        element = obj.dtype if isinstance(obj, np.ndarray) else (t, _element(obj, t))
        return (_address(buf, spans), buf.nbytes, buf.readonly, element)
    if backends.on_device(obj):     # a GPU array: keyed by identity, kept alive by the entry (see held)
        return ("device", id(obj), obj.shape, obj.strides, obj.dtype, type(obj))
    raise _Uncacheable


def _value(obj: Any) -> Any:
    """A hashable stand-in for counts, displacements, datatypes and other plain arguments."""
    t = type(obj)
    if t in _PLAIN:
        return obj
    if t is list or t is tuple:
        return (t, *map(_value, obj))
    if isinstance(obj, MPI.Datatype):
        if not obj.is_predefined:   # a derived datatype may be freed and its handle reused
            raise _Uncacheable
        return ("dt", obj.handle)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "iu" or obj.size > 4096:
            raise _Uncacheable
        return ("ints", obj.tobytes(), obj.dtype.str, obj.shape)
    if t is array.array and obj.typecode in "bBhHiIlLqQ" and len(obj) <= 4096:   # counts as array("i", ...)
        return ("array", obj.typecode, obj.tobytes())
    if isinstance(obj, np.integer):
        return int(obj)
    raise _Uncacheable


def _spec(spec: Any, key: list, spans: list | None) -> None:
    """Append the key of a ``[buf, count, displ, datatype]``-style spec (the common forms inline)."""
    if not spec:
        raise _Uncacheable
    obj = spec[0]
    t = type(obj)
    key.append((type(spec), len(spec)))
    if t in _BUFFERS:
        buf = _buffer(obj)
        key += (_address(buf, spans), buf.nbytes, buf.readonly, t, _element(obj, t))
    else:
        key.append(_memory(obj, spans))
    for item in spec[1:]:
        predefined = _PREDEFINED_TYPES.get(id(item))
        if predefined is not None:
            key.append(predefined)
        elif type(item) is int:
            key.append(item)
        else:
            key.append(_value(item))


def _call_key(method: str, args: Sequence[Any], algorithm: Any, values: tuple[int, ...] = (),
              spans: list | None = None) -> tuple | None:
    """The plan cache's key for a blocking call, or None: the call must not be cached.

    This is the definition; :func:`call_key` is the compiled builder
    (``mpicoll/_callkey.c``: bytes keys that decide as these tuples do) when
    that was built, and this function otherwise.

    ``values`` are the positions of arguments that are counts, not buffers
    (``Reduce_scatter``'s ``recvcounts``).  This runs on every blocking call, so
    the common arguments (NumPy arrays, bytes-like objects in ``[buf, count,
    datatype]`` specs, ints, predefined datatypes and ops) are handled inline.

    A NumPy array is keyed by address, extent, writability and dtype: it is
    contiguous (``MPI.buffer`` refuses it otherwise) and bound in memory order,
    so its shape and strides do not change the binding.  What the entry must
    keep alive come from :func:`held`, computed only when a plan is stored.

    With a list ``spans``, the key leaves every buffer's address out (it is the
    key of the call's *shape*, see :func:`shape_key`) and the buffers' ``(address,
    nbytes)`` are appended to ``spans`` instead, in the order of the arguments.
    """
    if type(algorithm) is not str:
        return None
    key: list = [method, algorithm, GENERATION[0]]
    try:
        for i, a in enumerate(args):
            t = type(a)
            if values and i in values:    # counts by value, even in a NumPy array (its contents may change)
                key.append(_value(a))
            elif t is np.ndarray:
                buf = _buffer(a)
                key += (_address(buf, spans), buf.nbytes, buf.readonly, a.dtype)
            elif t is int or a is None:
                key.append(a)
            elif t is list or t is tuple:
                _spec(a, key, spans)
            elif t is MPI.Op and id(a) in _PREDEFINED_OPS:
                key.append(_PREDEFINED_OPS[id(a)])
            elif a is _IN_PLACE:
                key.append("IN_PLACE")
            elif isinstance(a, (MPI.Op, Op)):   # kept alive by the entry (see held): its id is not reused meanwhile
                key.append(("op", id(a), a.handle if isinstance(a, MPI.Op) else 0))
            else:
                key.append(_memory(a, spans))
    except Exception:   # _Uncacheable, or e.g. MPI.buffer refused a non-contiguous array: prepare explains
        return None
    return tuple(key)


def _compiled_call_key() -> Callable[..., tuple | None]:
    """The compiled key builder bound to this module's tables, or this module's own where it is not built."""
    _callkey = extension("_callkey")
    if _callkey is None:
        return _call_key
    _callkey.init(_call_key, GENERATION, np.ndarray, _BUFFERS, _PREDEFINED_TYPES, _PREDEFINED_OPS,
                  MPI.Op, _IN_PLACE)
    return _callkey.call_key


#: ``call_key(method, args, algorithm, values=())``: what every blocking call runs (see :func:`_call_key`)
call_key = _compiled_call_key()


def shape_key(method: str, args: Sequence[Any], algorithm: Any,
              values: tuple[int, ...] = ()) -> tuple[tuple | None, list]:
    """The key of a call's *shape*, its cache key without the buffers' addresses; and its buffers' spans.

    The spans are the host buffers' ``(address, nbytes)``, in the order of the
    arguments: the memory a plan may view by address (:meth:`Plan.detach`).  Two
    calls of one shape differ only in where their buffers lie, so the plan of one,
    moved (:meth:`Plan.rebased`), is the plan of the other, provided that in
    neither call two buffers overlap (:meth:`PlanCache.rebased` checks that).
    The key is None where the call's is (the call is not cached).
    """
    spans: list = []
    return _call_key(method, args, algorithm, values, spans), spans


def held(args: Sequence[Any], values: tuple[int, ...] = ()) -> list:
    """The objects the cache entry of a cacheable call keeps alive.

    User-defined ops, GPU arrays and NumPy arrays' dtypes: the key names them by identity.
    """
    refs: list = []
    for i, a in enumerate(args):
        if i in values or a is None or a is _IN_PLACE or type(a) is int:
            continue
        obj = a[0] if (type(a) is list or type(a) is tuple) and a else a
        if isinstance(obj, (MPI.Op, Op)):
            if id(obj) not in _PREDEFINED_OPS:
                refs.append(obj)
        elif backends.on_device(obj):
            refs.append(obj)
        elif isinstance(obj, np.ndarray):
            refs.append(obj.dtype)   # the compiled key names a dtype by identity (small; no user memory)
    return refs


def _disjoint(spans: Sequence[tuple[int, int]]) -> bool:
    """True when no two of the memory ranges ``(address, nbytes)`` overlap (empty ones never do)."""
    if len(spans) == 2:      # the common case, inline
        (a, n), (b, m) = spans
        return not (n and m and a < b + m and b < a + n)
    ranges = sorted((address, address + n) for address, n in spans if n)
    return all(end <= start for (_, end), (start, _) in zip(ranges, ranges[1:]))


# -- the cache -------------------------------------------------------------------------------------

def _skip(tag: int) -> None:
    """What a cached call with nothing to do runs."""


class _Entry:
    """One cached plan, ``run(tag)`` (the plan's runner), what it keeps alive, and whether it was used
    since the last eviction sweep."""

    __slots__ = ("plan", "run", "refs", "used")

    def __init__(self, plan: Plan, run: Callable[[int], None], refs: list) -> None:
        self.plan, self.run, self.refs, self.used = plan, run, refs, False


class PlanCache:
    """Bound plans of one communicator's blocking calls, least recently used first out (approximately).

    Holds at most ``entries`` plans whose own memory (scratch buffers) totals at
    most ``scratch`` bytes.  Plans view the callers' memory by address (see
    :meth:`Plan.detach`), so an entry keeps no buffer of the caller alive.

    Eviction is "second chance" (the clock algorithm): a hit only marks its
    entry used, which costs nothing like the re-hashing of a strict LRU move;
    when room is needed, the oldest entry goes unless it was used since the last
    sweep, in which case it is unmarked and moved to the young end.

    A miss need not prepare the call again: the cache also remembers, per call
    *shape* (the key without the buffers' addresses, :func:`shape_key`), the
    newest plan of that shape, and :meth:`rebased` moves it to the new call's
    memory.  At most ``entries`` shapes are remembered (the oldest go first), only
    plans that own no memory (their scratch is the arena's), so they hold none
    beyond the plans' small objects.
    """

    def __init__(self, entries: int = PLAN_CACHE_ENTRIES, scratch: int = PLAN_CACHE_SCRATCH) -> None:
        self.entries = entries
        self.scratch = scratch
        self.scratch_held = 0
        self.data: dict[tuple, _Entry] = {}
        self.shapes: dict[tuple, Plan] = {}      # shape key: the newest plan of that shape (see rebased)
        self.shared: np.ndarray | None = None   # the scratch arena of the blocking plans (see arena)

    def __len__(self) -> int:
        return len(self.data)

    def plans(self) -> list[Plan]:
        """The cached plans, oldest first."""
        return [entry.plan for entry in self.data.values()]

    def get(self, key: tuple) -> Plan | None:
        """The plan cached under ``key`` (:data:`NOTHING` for a call with nothing to do), or None."""
        hit = self.data.get(key)
        if hit is None:
            return None
        hit.used = True
        return hit.plan

    def rebased(self, shape: tuple, spans: list) -> Plan | None:
        """The plan of a call of ``shape`` on the memory ``spans`` (see :func:`shape_key`), or None.

        None when no plan of that shape is remembered, or when two of the call's
        buffers overlap: what a call does with overlapping buffers may depend on
        the overlap, which the shape does not tell.
        """
        plan = self.shapes.get(shape)
        if plan is None or plan is NOTHING:
            return plan
        return plan.rebased(spans) if _disjoint(spans) else None

    def put(self, key: tuple, plan: Plan | None, refs: list, spans: list, comm: Any = None,
            shape: tuple | None = None) -> None:
        """Remember ``plan`` (detached from the caller's memory ``spans``) under ``key``; evict to make room.

        ``comm`` is the private communicator the plan will run on (unused for None).
        A call with nothing to do (``plan`` None: a zero count, one rank) is
        remembered as :data:`NOTHING`, so that repeating it skips its checks too.
        With ``shape`` (the call's :func:`shape_key`), the plan is also remembered
        for the later calls of that shape on other memory (see :meth:`rebased`).
        """
        if plan is None or plan is NOTHING:
            plan = NOTHING
        elif plan.finish is not None and plan.device is None:   # finishes hold user objects
            return
        else:
            plan.detach(spans)
            if plan.owned_bytes > self.scratch:
                return
        self.discard(key)
        self.data[key] = _Entry(plan, _skip if plan is NOTHING else plan.runner(comm), refs)
        self.scratch_held += plan.owned_bytes
        if shape is not None and (plan is NOTHING or (plan.relocations is not None and plan.device is None
                                                      and plan.owned_bytes == 0 and _disjoint(spans))):
            shapes = self.shapes
            shapes.pop(shape, None)
            shapes[shape] = plan
            if len(shapes) > self.entries:
                del shapes[next(iter(shapes))]
        data = self.data
        while len(data) > self.entries or self.scratch_held > self.scratch:
            oldest = next(iter(data))
            entry = data[oldest]
            if entry.used and oldest != key:   # a second chance: to the young end, unmarked
                entry.used = False
                data[oldest] = data.pop(oldest)
            else:
                self.discard(oldest)

    def discard(self, key: tuple) -> None:
        entry = self.data.pop(key, None)
        if entry is not None:
            self.scratch_held -= entry.plan.owned_bytes

    def clear(self) -> None:
        self.data.clear()
        self.shapes.clear()
        self.scratch_held = 0

    def arena(self, nbytes: int) -> np.ndarray | None:
        """A byte array of at least ``nbytes`` shared by the scratch buffers of every cached plan.

        The blocking calls of one communicator run one at a time, so their plans can
        all use the same scratch memory: the cache holds the largest scratch any
        plan needs, not the sum.  Growing the arena drops the cached plans (they
        view the old one, which is then freed).  Above the cache's scratch bound a
        plan gets scratch of its own (None here), freed with the plan.
        """
        if nbytes > self.scratch:
            return None
        held = self.shared
        if held is None or held.nbytes < nbytes:
            self.clear()
            grown = 1 << max(nbytes - 1, 0).bit_length()   # a power of two: few regrowths as calls grow
            self.shared = held = np.empty(grown if grown <= self.scratch else nbytes, np.uint8)
        return held
