"""Staging through pinned host memory, pipelined: device-to-host copies overlap the messages they feed.

Once per plan, every user device buffer gets a pinned host mirror and the
schedule is analysed (:mod:`mpicoll.gpu.access`).  A blocking call then

1. makes its copy stream wait for an event recorded on the caller's current
   stream (so it sees all work queued before the call, with no device-wide
   synchronisation), and queues every stage-in segment device-to-host on the
   copy stream, one event per segment;
2. runs the rounds on the host mirrors; a message longer than a segment goes
   as several pieces, each sent as soon as *its* segment's event completes
   (MPI is polled meanwhile), so the copy of segment k + 1 overlaps the
   transfer of segment k;
3. queues a host-to-device copy of every piece of an output as soon as it is
   final (the last receive or step that writes it is done), so results go
   back to the device while later rounds still communicate;
4. records an event after the last copy and makes the caller's current
   stream wait for it: work queued after the call sees the result.

Nonblocking and persistent requests run the same rounds through the request
engine (:meth:`StagedTransport.bound`), bound once; their ``begin`` stages in
the inputs when the request starts and ``finish`` stages the outputs back
when it completes.  Reductions run on the host, where the data is.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import config
from mpicoll.data.device import Device
from mpicoll.engine.blocking import bind
from mpicoll.engine.rounds import Exchange, post, run
from mpicoll.gpu.access import Access, Op, analyse
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Reduce, Schedule

__all__ = ["StagedTransport", "segment_bytes"]

DEFAULT_SEGMENT = 1 << 20


def segment_bytes(env: Any = None) -> int:
    """``MPICOLL_GPU_SEGMENT`` (bytes, default 1 MiB): the pipeline's unit of copy and message."""
    return (config.current() if env is None else config.read(env)).gpu_segment


class StagedTransport:
    """A plan's device buffers mirrored in pinned host memory, and the pipelined executor over them.

    ``arrays`` maps buffer names to the call's one-dimensional device arrays
    (an in-place call maps ``send`` and ``recv`` to the same array);
    ``scratch`` gives the element count of each scratch buffer, which lives on
    the host only; ``kernel`` is the host reduction.
    """

    def __init__(self, device: Device, schedule: Schedule, arrays: dict[str, Any], layouts: dict[str, Layout],
                 scratch: dict[str, int], dtype: np.dtype, kernel: Callable | None, segment: int) -> None:
        self.device = device
        self.schedule = schedule
        self.layouts = layouts
        self.scratch = scratch
        self.kernel = kernel
        canonical: dict[str, str] = {}
        self.raw: dict[str, Any] = {}        # canonical name -> the device array's bytes
        self.mirror: dict[str, np.ndarray] = {}
        for name, arr in arrays.items():
            same = next((n for n, a in arrays.items() if a is arr), name)
            canonical[name] = same
            if same == name:
                self.raw[name] = device.raw(arr)
                self.mirror[name] = device.pinned(self.raw[name].nbytes)      # allocated once per plan
        self.host: dict[str, np.ndarray] = {name: self.mirror[canonical[name]].view(arrays[name].dtype)
                                            for name in arrays}
        for name, count in scratch.items():
            self.host[name] = np.empty(count, dtype)
            canonical[name] = name
        itemsize = {name: arr.dtype.itemsize for name, arr in self.host.items()}
        outputs = {canonical["recv"]} if "recv" in arrays else set()
        self.access: Access = analyse(schedule, layouts, itemsize, canonical, set(self.raw), outputs, segment)
        self.copy_stream = device.new_stream()
        self._done: Any = None               # the event after the last run's final copy
        self._caller: Any = None
        self._pending = False                # a begin() whose outputs finish() has not staged back yet
        self._bound: list | None = None
        self._pipeline: Pipelined | None = None     # the blocking run under way
        self._rounds = [self._bind_round(r) for r in self.access.rounds]

    @property
    def nbytes(self) -> int:
        """Host memory this transport holds (pinned mirrors and scratch)."""
        return sum(m.nbytes for m in self.mirror.values()) + sum(
            a.nbytes for n, a in self.host.items() if n not in self.raw and n in self.scratch)

    # -- binding ---------------------------------------------------------------------------------------

    def _bytes(self, buf: str, span: tuple[int, int]) -> np.ndarray:
        host = self.host[buf]
        return host.view(np.uint8)[span[0]:span[1]]

    def _bind_round(self, rnd: Any) -> tuple:
        """A round as :func:`mpicoll.engine.rounds.run` runs it with :class:`Pipelined`: a send is ``(bytes,
        peer, segment it needs)``, a receive ``(bytes, peer, copies back once it is done)``, a step a call
        that waits for its segment, runs, and queues its copies back."""
        sends = [(self._bytes(op.buf, op.span), op.peer, op.need) for op in rnd.sends]
        recvs = [(self._bytes(op.buf, op.span), op.peer, self._outs(op)) for op in rnd.recvs]
        steps = [partial(self._run_step, self._step(op), op.need, self._outs(op)) for op in rnd.steps]
        return sends, recvs, steps

    def _run_step(self, step: Callable[[], None] | None, need: int, outs: list[tuple[Any, np.ndarray]]) -> None:
        assert self._pipeline is not None      # (a step runs only inside execute)
        self._pipeline.need(need)
        if step is not None:
            step()
        self._stage_out(outs)

    def _outs(self, op: Op) -> list[tuple[Any, np.ndarray]]:
        """(device bytes, host bytes) pairs to copy back once ``op`` ran."""
        return [(self.raw[buf][lo:hi], self.mirror[buf][lo:hi]) for buf, (lo, hi) in op.final]

    def _step(self, op: Op) -> Callable[[], None] | None:
        st = op.step

        def typed(block: Any) -> np.ndarray:
            start, stop = self.layouts[block.buf].span(block.lo, block.hi)
            return self.host[block.buf][start:stop]

        if isinstance(st, Reduce):
            return partial(self.kernel, typed(st.out), typed(st.left), typed(st.right))
        out, src = typed(st.out), typed(st.src)
        if out.size and out.__array_interface__["data"][0] == src.__array_interface__["data"][0]:
            return None       # an in-place call's own block: already there
        return partial(np.copyto, out, src)

    # -- the blocking, pipelined run -------------------------------------------------------------------

    def _stage_in(self) -> list[Any]:
        """Queue every stage-in segment after the caller's queued work; one event per segment."""
        if self._done is not None:
            self._done.synchronize()          # the last run's copies back have left the mirrors
        self._caller = self.device.current_stream()
        self.copy_stream.wait(self._caller.record())
        events = []
        for buf, (lo, hi) in self.access.stage_in:
            self.device.to_host(self.mirror[buf][lo:hi], self.raw[buf][lo:hi], self.copy_stream)
            events.append(self.copy_stream.record())
        return events

    def _stage_out(self, outs: list[tuple[Any, np.ndarray]]) -> None:
        for dev, host in outs:
            self.device.to_device(dev, host, self.copy_stream)

    def _hand_back(self) -> None:
        """The caller's stream waits for the last copy back; nothing blocks the host."""
        self._done = self.copy_stream.record()
        self._caller.wait(self._done)

    def execute(self, comm: MPI.Comm, tag: int = 0) -> None:
        """Run the collective once (blocking), pipelined as the module docstring describes: the engine's
        round loop (:func:`mpicoll.engine.rounds.run`) with the :class:`Pipelined` policy."""
        self._pipeline = Pipelined(self, self._stage_in())
        try:
            run(self._rounds, comm, tag, self._pipeline)
        finally:
            self._pipeline = None
        self._hand_back()     # every staged segment was waited for by the op that reads it

    # -- the request engine's run (nonblocking and persistent) -----------------------------------------

    def bound(self) -> list:
        """The rounds on the host mirrors, bound once (what the request engine posts)."""
        if self._bound is None:
            self._bound = bind(self.schedule, self.host, self.layouts, self.kernel, np)
        return self._bound

    def begin(self) -> None:
        """Stage every input in now (a request starts; MPI will read the mirrors)."""
        events = self._stage_in()
        if events:
            events[-1].synchronize()
        self._pending = True

    def finish(self) -> None:
        """Stage every written output byte back (a request completed); a no-op after a blocking run."""
        if not self._pending:
            return
        self._pending = False
        for buf, spans in self.access.written.items():
            self._stage_out([(self.raw[buf][lo:hi], self.mirror[buf][lo:hi]) for lo, hi in spans])
        self._hand_back()


class Pipelined(Exchange):
    """The staged transport's policy of :func:`mpicoll.engine.rounds.run` for one blocking run: a round's
    receives posted first (each queues its copies back when it completes), each send posted once the
    segment it reads is on the host (MPI kept moving while the copy runs), then all completed."""

    def __init__(self, transport: StagedTransport, events: list[Any]) -> None:
        self.transport, self.events = transport, events
        self.ready = -1                    # the last stage-in segment known to be on the host
        self.flight = _InFlight()

    def need(self, index: int) -> None:
        """Wait until stage-in segment ``index`` (and every one before it) is on the host."""
        if index > self.ready:
            event = self.events[index]
            while not _query(event):
                self.flight.poll(block=False)      # keep MPI moving while the copy runs
            event.synchronize()
            self.ready = index

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        flight, stage_out = self.flight, self.transport._stage_out
        for buf, peer, outs in recvs:
            flight.add(post(comm, tag, [], [(buf, peer)])[0], partial(stage_out, outs) if outs else None)
        for buf, peer, index in sends:
            self.need(index)
            flight.add(post(comm, tag, [(buf, peer)], [])[0], None)
        flight.drain()


def _query(event: Any) -> bool:
    done = getattr(event, "done", None)        # cupy.cuda.Event.done; the host stand-in's events are always done
    return True if done is None else bool(done)


class _InFlight:
    """The MPI requests of one round, with an action to run when each completes."""

    def __init__(self) -> None:
        self.requests: list[MPI.Request] = []
        self.actions: list[Callable[[], None] | None] = []

    def add(self, request: MPI.Request, action: Callable[[], None] | None) -> None:
        self.requests.append(request)
        self.actions.append(action)

    def poll(self, block: bool) -> bool:
        """Complete what has arrived (waiting for at least one when ``block``); False once nothing is left."""
        if not self.requests:
            return False
        done = (MPI.Request.Waitsome if block else MPI.Request.Testsome)(self.requests)
        if done is None:
            self.requests, self.actions = [], []
            return False
        for i in done:
            action = self.actions[i]
            if action is not None:
                self.actions[i] = None
                action()
        return True

    def drain(self) -> None:
        while self.poll(block=True):
            pass
