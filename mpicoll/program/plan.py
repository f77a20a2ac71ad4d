"""A call's plan: its schedule bound to buffers, scratch and a reduction kernel, ready to run.

A :class:`Plan` is what every path runs: the blocking executor
(:func:`mpicoll.engine.blocking.execute`), nonblocking requests and persistent
requests all take its bound rounds, the private MPI communicator and a tag.
:func:`make_plan` builds one (the collectives' ``prepare`` functions call it);
:func:`composed` makes one of rounds given with their communicators, the
program of a call built from the plans of its parts
(:class:`mpicoll.program.composer.Composer`: an intercommunicator's stages, a
reproducible sum's request).
Plans of repeated calls are cached (:mod:`mpicoll.program.plancache`, keyed by
:mod:`mpicoll.program.callkey`); a cached plan views the caller's memory by
address (:meth:`Plan.detach`) and can be moved to other memory of the same shape
(:meth:`Plan.rebased`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import gpu as backends
from mpicoll.data.datatypes import check_reducible, made_for_device, mirror
from mpicoll.data.ops import reducer
from mpicoll.engine import direct
from mpicoll.engine.blocking import bind, execute, for_mpi
from mpicoll.engine.mismatch import CallNote
from mpicoll.engine.rounds import CommRound
from mpicoll.errors import ProcFailedError
from mpicoll.families import registry
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import USER_BUFFERS, Schedule

__all__ = ["Plan", "NOTHING", "make_plan", "composed"]



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
    #: ``finish`` writes the caller's memory only through ``arrays[OUT]``, which :meth:`detach` views by address,
    #: so the plan can be cached (other finishes hold the caller's objects: see PlanCache.put)
    finish_by_name: bool = False

    owned_bytes: int = 0                        # memory the plan allocated itself (known once detached)
    shared: frozenset[str] = frozenset()        # scratch buffers that are views of the communicator's arena
    #: once detached: where each array viewing the caller's memory lies, ``name: (span index, byte offset)``;
    #: None before, and for a plan that cannot be moved to other memory (see :meth:`rebased`)
    relocations: dict[str, tuple[int, int]] | None = None

    #: a cached nonblocking plan in use by an unfinished request, cleared when the request is done with it
    #: (``_Collective._complete``; see mpicoll.engine.requests.start)
    lent: bool = False
    #: the last request this cached plan was lent to: the compiled start runs it again when nothing else holds it
    #: (see mpicoll.engine.requests.start)
    spare: Any = field(default=None, repr=False)

    _rounds: list | None = field(default=None, repr=False)
    _runner: tuple[Any, Callable[[int], None]] | None = field(default=None, repr=False)   # (comm, runner(comm))
    _request_parts: tuple | None = field(default=None, repr=False)   # see request_parts
    _what: tuple | None = field(default=None, repr=False)            # see what
    #: what every rank must agree on, readable (set by mpicoll.comm.preparing.prepare; see
    #: mpicoll.engine.mismatch.signature), and its hash as the plan's messages carry it in their tag
    signature: str = ""
    sig: int = 0
    #: a composed plan's communicator of each round (:func:`composed`); None: every round travels on the
    #: communicator the plan runs on
    comms: list | None = None
    #: a composed plan's rounds as the blocking path runs them, consecutive rounds of one communicator together,
    #: ``(comm, rounds)`` each (see :meth:`stretches`)
    _stretches: list | None = field(default=None, repr=False)

    def bound(self) -> list:
        """Freshly bound rounds (the nonblocking paths own theirs); a composed plan's own (no request changes
        them)."""
        if self.comms is not None:
            return self._rounds     # type: ignore[return-value]
        if self.device is not None:
            return self.device.bound()
        return bind(self.schedule, self.arrays, self.layouts, self.kernel, self.xp)

    def rounds(self) -> list:
        """Bound rounds, bound once and kept: what the blocking path runs on every call."""
        if self._rounds is None:
            self._rounds = self.bound()
        return self._rounds

    def request_parts(self, comm: Any) -> tuple[list, list[list[Callable[[], None]]], Any, list]:
        """What a request running this cached plan on ``comm`` (the private communicator) needs, made once: its
        rounds in the form MPI reads fastest (:func:`~mpicoll.engine.blocking.for_mpi`), each round's local
        steps, the same rounds posted from C (:func:`mpicoll.engine.direct.blocking`; None: by mpi4py), and each
        round's communicator (see :func:`mpicoll.comm.dispatch._lend`)."""
        parts = self._request_parts
        if parts is None:
            rounds = for_mpi(self.rounds())
            if self.comms is not None:    # rounds on several communicators: posted by mpi4py
                parts = (rounds, [steps for _, _, steps in rounds], None, self.comms)
            else:
                parts = (rounds, [steps for _, _, steps in rounds], direct.blocking(rounds, comm, self.sig),
                         [comm] * len(rounds))
            self._request_parts = parts
        return parts

    def stretches(self) -> list[tuple[Any, list]]:
        """A composed plan's rounds as the blocking path runs them: consecutive rounds of one communicator
        together, ``(comm, rounds)`` each, in the form MPI reads fastest (grouped once; a caller may wrap a
        stretch's rounds, as an intercommunicator's agreement does, before the plan first runs)."""
        if self._stretches is None:
            stretches: list[tuple[Any, list]] = []
            for comm, rnd in zip(self.comms or (), for_mpi(self.rounds())):
                if not stretches or stretches[-1][0] is not comm:
                    stretches.append((comm, []))
                stretches[-1][1].append(rnd)
            self._stretches = stretches
        return self._stretches

    def runner(self, comm: Any) -> Callable[[int], None]:
        """``run(tag)``: this plan run blocking on ``comm`` (the private communicator), ready-made; its messages
        carry ``tag + self.sig`` (see :mod:`mpicoll.engine.mismatch`).

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
        device, finish, sig = self.device, self.finish, self.sig
        if self.comms is not None:     # each stretch on its own communicator (``comm`` is not read)
            stretches = self.stretches()
            runners = [direct.blocking(rounds, on, sig) or partial(_run_signed, rounds, on, sig)
                       for on, rounds in stretches]
            transfer = runners[0] if len(runners) == 1 else partial(_run_in_order, stretches, runners)
        elif device is not None:
            def transfer(tag: int) -> None:
                device.run(comm, tag + sig)
        else:
            rounds = for_mpi(self.rounds())
            transfer = direct.blocking(rounds, comm, sig) or partial(_run_signed, rounds, comm, sig)
        if finish is None:
            return transfer

        def run(tag: int) -> None:
            transfer(tag)
            finish()

        return run

    def what(self) -> CallNote:
        """What the flight recorder notes of a call this plan runs (:mod:`mpicoll.engine.recorder`): its
        collective, algorithm and bytes (the largest of the caller's buffers, scratch left out), and what the
        mismatch check compares and whom it asks (:mod:`mpicoll.engine.mismatch`)."""
        if self._what is None:
            nbytes = max((getattr(self.arrays.get(name), "nbytes", 0) for name in USER_BUFFERS), default=0)
            sched = self.schedule
            peers = {m.peer for rnd in sched.rounds for m in (*rnd.sends, *rnd.recvs)}
            self._what = CallNote(sched.collective, sched.algorithm, int(nbytes),
                                  self.signature or sched.collective, self.sig, tuple(sorted(peers)))
        return self._what

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
        if self.relocations is not None or self.comms is not None:   # (a composed plan's parts were detached)
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


#: the name of the caller's array an in-place call's finish copies its result into (see finish_by_name)
OUT = "out"

#: what the cache holds for a call with nothing to do (a zero count; a collective on one rank)
NOTHING = Plan(Schedule("none", "nothing", 0, 1, 1, ()), {}, {}, None, np)


def _run_signed(rounds: list, comm: Any, sig: int, tag: int) -> None:
    execute(rounds, comm, tag + sig)


def _run_in_order(stretches: list[tuple[Any, list]], runners: list[Callable[[int], None]], tag: int) -> None:
    """A composed plan's stretches, blocking, in order; a process failure's round counted over the whole call
    (as a request counts them)."""
    first = 0
    for (_, rounds), run_stretch in zip(stretches, runners):
        try:
            run_stretch(tag)
        except ProcFailedError as exc:
            if exc.round >= 0:
                exc.round += first
            raise
        first += len(rounds)


def composed(rounds: list[CommRound], what: CallNote | None = None, *, before: Callable[[], None] | None = None,
             finish: Callable[[], None] | None = None) -> Plan:
    """The plan of rounds given with their communicators, ``(comm, sends, recvs, steps)`` each: a call built from
    the plans of its parts (:class:`mpicoll.program.composer.Composer`).  ``what``: what the flight recorder notes
    of its calls and the mismatch check compares (its ``sig`` is added to the tag of its messages); ``before``
    and ``finish`` run at every start and completion, as a plan's do.  Its rounds are bound already: it is
    neither detached nor moved (:meth:`Plan.detach`); a request runs its rounds as they are."""
    name = what.collective if what is not None else "composed"
    plan = Plan(Schedule(name, what.algorithm if what is not None else "composed", 0, 1, 1, ()), {}, {}, None, np,
                finish, before=before, comms=[r[0] for r in rounds])
    plan._rounds = [r[1:] for r in rounds]
    if what is not None:
        plan._what, plan.signature, plan.sig = what, what.signature, what.sig
    return plan


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

    GPU arrays get a plan whose ``device`` (:class:`mpicoll.gpu.call.DeviceCall`)
    moves them with a GPU transport, chosen when the plan first runs.
    """
    if op is not None:
        check_reducible(datatype)
    sched = registry.schedule(collective, name, comm.rank, comm.size, **params)
    bound_layouts = sched.layouts(layouts(sched.nblocks))
    scratch = {s: max(bound_layouts[s].ends, default=0) for s in sched.scratch()}   # elements of each
    device = backends.device_for(arrays)
    if device is not None and any(made_for_device(a) for a in arrays.values()):
        # a device buffer packed on the host (a non-contiguous datatype) beside other device buffers: the call
        # runs on host copies of those too, written back where the call writes them
        arrays = _host_copies(arrays)
        device = None
    if device is not None:
        from mpicoll.gpu.call import DeviceCall  # noqa: PLC0415 - GPU calls only

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


def _host_copies(arrays: dict[str, Any]) -> dict[str, Any]:
    """``arrays`` with each device array replaced by a host copy for the call being prepared (one copy per
    array, so that an in-place call's send and receive stay one array); only ``recv`` is written back."""
    copies: dict[int, Any] = {}
    for a in arrays.values():
        if backends.device_of(a) is not None and id(a) not in copies:
            copies[id(a)] = mirror(a, writable=a is arrays.get("recv"))
    return {name: copies.get(id(a), a) for name, a in arrays.items()}


# -- scratch shared by the blocking calls of one communicator --------------------------------------

_ALIGN = 64   # bytes: each scratch buffer in an arena starts on a cache line


def _packed(scratch: dict[str, int], itemsize: int) -> tuple[dict[str, int], int]:
    """Byte offsets of the scratch buffers laid one after another (each aligned), and the bytes in all."""
    offsets, total = {}, 0
    for name, count in scratch.items():
        offsets[name] = total
        total += -(-count * itemsize // _ALIGN) * _ALIGN
    return offsets, total
