"""One collective call on device buffers: its transports, made when first needed and kept with the plan.

A :class:`DeviceCall` sits in a plan (``Plan.device``).  The blocking path
calls :meth:`DeviceCall.run`; the request engine (nonblocking and persistent
calls) calls :meth:`begin` when a request starts, runs :meth:`bound` rounds,
and calls :meth:`finish` when it completes.  The transport of each path is
chosen on first use (:func:`mpicoll.gpu.transport.choose`) and keeps its
buffers (pinned mirrors, window layout, bound rounds) for the plan's life.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import config
from mpicoll.data.device import Device
from mpicoll.data.ops import op_name, reducer
from mpicoll.engine.blocking import bind, execute
from mpicoll.gpu.ipc import IpcTransport, windows_of
from mpicoll.gpu.staged import StagedTransport, segment_bytes
from mpicoll.gpu.transport import Choice, choose
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Schedule

__all__ = ["DeviceCall", "Communicator", "CudaAwareTransport", "debug_line"]


class CudaAwareTransport:
    """Device buffers handed to a CUDA-aware MPI as they are; reductions on the device.

    MPI does not know CuPy's streams, so the stream is synchronised before
    every round's messages (the blocks were written by kernels queued on it).
    """

    def __init__(self, device: Device, schedule: Schedule, arrays: dict[str, Any], layouts: dict[str, Layout],
                 scratch: dict[str, int], dtype: np.dtype, kernel: Callable | None) -> None:
        self.device = device
        full = dict(arrays)
        for name, count in scratch.items():
            full[name] = device.xp.empty(count, dtype)
        self.nbytes = sum(full[name].nbytes for name in scratch)
        rounds = bind(schedule, full, layouts, kernel, device.xp)
        sync = self._synchronize
        # a round's steps are followed by a synchronisation, so the next round's messages see their results
        self.rounds = [(sends, recvs, [*steps, sync] if steps else steps) for sends, recvs, steps in rounds]

    def _synchronize(self) -> None:
        self.device.current_stream().synchronize()

    def execute(self, comm: MPI.Comm, tag: int = 0) -> None:
        self._synchronize()
        execute(self.rounds, comm, tag)

    def bound(self) -> list:
        return self.rounds

    def begin(self) -> None:
        self._synchronize()

    def finish(self) -> None:
        """MPI wrote the results itself."""


class Communicator:
    """What a device call reads of its communicator's state (rank, node layout, devices, private duplicate),
    without holding the state: a plan is kept in its state's cache, so a plan holding the state would make a
    cycle, and the state (with its IPC window) would be released by the cycle collector, at its own moment
    on each rank, instead of with the communicator's last wrapper."""

    __slots__ = ("rank", "nodes", "devices", "private")

    def __init__(self, comm: Any) -> None:
        self.rank, self.nodes, self.devices, self.private = comm.rank, comm.nodes, comm.devices, comm.private


class DeviceCall:
    """A plan's device side: the call's device arrays, schedule and reduction, and its transports."""

    def __init__(self, device: Device, comm: Any, collective: str, schedule: Schedule, arrays: dict[str, Any],
                 layouts: dict[str, Layout], scratch: dict[str, int], *, dtype: np.dtype, op: Any = None,
                 datatype: Any = None) -> None:
        self.device, self.collective, self.schedule = device, collective, schedule
        self.comm = comm if isinstance(comm, MPI.Comm) else Communicator(comm)
        self.arrays, self.layouts, self.scratch, self.dtype = arrays, layouts, scratch, np.dtype(dtype)
        self.op, self.datatype = op, datatype
        self.host_ops = op is not None and not device.reduce_here(op_name(op), self.dtype)
        self.choice: Choice | None = None          # the blocking path's transport, once chosen
        self.async_choice: Choice | None = None    # the request engine's
        self._blocking: Any = None
        self._async: Any = None
        self._staged: StagedTransport | None = None

    @property
    def nbytes(self) -> int:
        """Memory the transports made so far hold (pinned mirrors, device scratch, window share)."""
        held = {id(t): t for t in (self._blocking, self._async, self._staged) if t is not None}
        return sum(getattr(t, "nbytes", 0) for t in held.values())

    def _kernel(self, xp: Any) -> Callable | None:
        if self.op is None:
            return None
        return reducer(self.op, self.dtype, xp, self.datatype).reduce

    def _staged_transport(self) -> StagedTransport:
        if self._staged is None:
            self._staged = StagedTransport(self.device, self.schedule, self.arrays, self.layouts, self.scratch,
                                           self.dtype, self._kernel(np), segment_bytes())
        return self._staged

    def _make(self, name: str) -> Any:
        if name == "staged":
            return self._staged_transport()
        if name == "cuda-aware":
            return CudaAwareTransport(self.device, self.schedule, self.arrays, self.layouts, self.scratch,
                                      self.dtype, self._kernel(self.device.xp))
        return IpcTransport(self.device, windows_of(self.comm, self.device), self.schedule, self.arrays,
                            self.layouts, self.scratch, self.dtype, self._kernel(self.device.xp))

    def run(self, comm: MPI.Comm, tag: int = 0) -> None:
        """The blocking path: run the call once on ``comm`` (the private communicator)."""
        if self._blocking is None:
            self.choice = choose(self.comm, blocking=True, host_ops=self.host_ops)
            _report(self, self.choice, "blocking")
            self._blocking = self._make(self.choice.name)
        self._blocking.execute(comm, tag)

    def _engine(self) -> Any:
        if self._async is None:
            self.async_choice = choose(self.comm, blocking=False, host_ops=self.host_ops)
            _report(self, self.async_choice, "request")
            self._async = self._make(self.async_choice.name)
        return self._async

    def bound(self) -> list:
        """The request engine's rounds (bound once)."""
        return self._engine().bound()

    def begin(self) -> None:
        """A request starts: make the device inputs visible to MPI."""
        self._engine().begin()

    def finish(self) -> None:
        """A request completed: results back to the device (a no-op after a blocking run)."""
        if self._async is not None:
            self._async.finish()


def debug_line(call: DeviceCall, choice: Choice, path: str) -> str:
    """The line ``MPICOLL_DEBUG=2`` prints when a call's transport is chosen."""
    rank = getattr(call.comm, "rank", "?")
    return (f"mpicoll[{rank}]: {call.collective} ({call.schedule.algorithm}) on {call.device.name} buffers, "
            f"{path} path: transport {choice.name} ({choice.reason})")


def _report(call: DeviceCall, choice: Choice, path: str) -> None:
    if config.current().debug >= 2:
        print(debug_line(call, choice, path), file=sys.stderr, flush=True)
