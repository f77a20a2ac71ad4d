"""CUDA IPC inside a node: every rank reads its peers' device memory directly.

Each communicator has, on each rank, one *window*: device memory of its own
(``cudaMalloc``, so that its IPC handle maps exactly it), which only grows.
A plan lays out the call's buffers (the user's, then scratch) in the window.
The first run of a plan exchanges ``(serial, handle, size)`` of every rank's
window with one ``allgather`` -- the only handle exchange a plan ever does --
and leases the windows of peers whose window is new to this rank, letting go of
the ones they replaced.  A peer's window is mapped once per process, whatever
the number of communicators that use it, and a window no communicator uses is
kept idle rather than freed (see :mod:`mpicoll.gpu.handles`).  A window grows
only in that exchange, so every rank knows the same *epoch*
(the tuple of serials) and a plan whose epoch is stale rebinds its views
locally, with no message.

A run copies the user's inputs into the window (device-to-device), then runs
the schedule's rounds as *pulls*: for each message the sender, once its
stream has finished writing the block, sends the receiver a 16-byte token
``(offset, nbytes)``; the receiver copies the block out of the sender's window
on its stream and, once the copy is done, sends an empty acknowledgement, so
the sender never overwrites a block still being read.  Local steps
(reductions with CuPy's ufuncs, copies) run on the caller's current stream,
which therefore orders the whole collective after the work queued before it
and before the work queued after it.  Finally the written outputs are copied
from the window to the user's arrays.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.data.device import Device, PeerWindow, Window
from mpicoll.engine.rounds import Exchange, post, run, waitall
from mpicoll.gpu.access import Access, analyse
from mpicoll.gpu.handles import IDLE, MAPPINGS
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Reduce, Schedule

__all__ = ["IpcWindows", "IpcTransport", "windows_of"]

ALIGN = 256                  # bytes: every buffer in a window starts on a boundary that suits CUDA kernels
_SERIALS = itertools.count(1)


class IpcWindows:
    """One communicator's window on this rank, the peers' windows it maps, and the current epoch.

    The peers' windows are leases on the process-wide mappings of :data:`~mpicoll.gpu.handles.MAPPINGS`
    (one per peer: ``held[peer] = (serial, handle, mapping)``); this rank's window comes from, and goes back
    to, the process's idle windows (:data:`~mpicoll.gpu.handles.IDLE`).
    """

    def __init__(self, device: Device, comm: MPI.Comm) -> None:
        self.device = device
        self.comm = comm
        self.window: Window | None = None
        self.serial = 0
        self.epoch: tuple[int, ...] = ()
        self.peers: dict[int, PeerWindow] = {}
        self.held: dict[int, tuple[int, bytes, PeerWindow]] = {}
        self.exchanges = 0
        self.leases = 0                    # how many peer windows this communicator ever leased (tests, debug)
        # [this rank's window, the replaced windows not yet let go]: what the finalizer hands back
        self._mine: list = [None, []]
        self._finalizer = weakref.finalize(self, _release, device, self.held, self._mine)

    def agree(self, nbytes: int | None) -> None:
        """Swap handles (:meth:`exchange`) when any rank needs to, one small Allreduce (collective).

        ``nbytes`` is the window size this rank's plan needs, or None when its
        plan ran here before.  Plan caches hit and miss per rank (a rank that
        reuses its buffers hits, a peer with new ones misses), so whether to
        exchange is decided by all ranks together, never by one rank's cache.
        """
        need = np.array([-1 if nbytes is None else nbytes], np.int64)
        self.comm.Allreduce(MPI.IN_PLACE, need, op=MPI.MAX)
        if need[0] >= 0:
            self.exchange(nbytes or 0)

    def exchange(self, nbytes: int) -> None:
        """Grow this rank's window to ``nbytes`` if needed and swap handles with every rank (collective).

        What can fail on one rank (allocating the window, opening a peer's handle) is agreed on before the
        next collective step, so that every rank raises and none waits for a rank that gave up.  A window
        replaced here is let go once every rank has said whether it still maps it through another
        communicator: freed if none does, else kept idle (see :mod:`mpicoll.gpu.handles`)."""
        error = None
        try:
            if self.window is None or self.window.nbytes < nbytes:
                grown = IDLE.take(self.device, nbytes) or self.device.window(
                    max(nbytes, 2 * self.window.nbytes if self.window else nbytes))
                if self.window is not None:
                    self._mine[1].append(self.window)    # let go of once no peer maps it through this window
                self.window, self.serial = grown, next(_SERIALS)
                self._mine[0] = grown
        except Exception as exc:   # (e.g. out of device memory)
            error = exc
        entries = self.comm.allgather(None if error else (self.serial, self.window.handle, self.window.nbytes))
        _raise_if_any_failed(entries, error, "allocate its IPC window")
        epoch = tuple(serial for serial, _, _ in entries)
        if epoch != self.epoch:
            peers: dict[int, PeerWindow] = {}
            still: list[bytes] = []
            try:
                peers, still = self._lease(entries)
            except Exception as exc:   # (a peer's handle that CUDA refuses to open)
                error = exc
            # (every rank has let go of the replaced windows it leased before it sends here)
            answers = self.comm.allgather(None if error else still)
            _raise_if_any_failed(answers, error, "open its peers' IPC windows")
            self.peers = peers
            self.epoch = epoch
            mapped_elsewhere = {handle for answer in answers for handle in answer}
        else:
            mapped_elsewhere = set()
        while self._mine[1]:
            old = self._mine[1].pop()
            if old.handle in mapped_elsewhere:
                IDLE.give(self.device, old)        # a peer still maps it (another communicator): not freed yet
            else:
                old.free()
        self.exchanges += 1

    def _lease(self, entries: list) -> tuple[dict[int, PeerWindow], list[bytes]]:
        """Lease every peer's current window, letting go of the ones they replaced; the replaced handles this
        process still maps (through another communicator)."""
        me = self.comm.Get_rank()
        peers: dict[int, PeerWindow] = {}
        replaced: list[bytes] = []
        for peer, (serial, handle, size) in enumerate(entries):
            if peer == me:
                continue
            held = self.held.get(peer)
            if held is not None and held[0] == serial:
                peers[peer] = held[2]
                continue
            mapping = MAPPINGS.acquire(self.device, handle, size)   # before letting go: a shared handle stays open
            self.leases += 1
            self.held[peer] = (serial, handle, mapping)
            if held is not None:
                MAPPINGS.release(self.device, held[1])
                replaced.append(held[1])
            peers[peer] = mapping
        return peers, [handle for handle in replaced if MAPPINGS.users(self.device, handle)]

    def close(self) -> None:
        """Let go of every peer mapping and of this rank's window (the communicator's plans must not run
        again): the window is kept idle for the next communicator (a peer may still map it)."""
        self._finalizer()
        self.window, self.peers, self.epoch = None, {}, ()


def _release(device: Device, held: dict, mine: list) -> None:
    """Let go of the leased peer windows (``held``) and of this rank's windows (``mine``): kept idle."""
    while held:
        _, (_, handle, _) = held.popitem()
        MAPPINGS.release(device, handle)
    if mine[0] is not None:
        IDLE.give(device, mine[0])
        mine[0] = None
    while mine[1]:
        IDLE.give(device, mine[1].pop())


def _raise_if_any_failed(entries: list, error: BaseException | None, what: str) -> None:
    """After an allgather in which a rank that failed sent None: raise on every rank (this rank's own error
    where it failed)."""
    failed = [rank for rank, entry in enumerate(entries) if entry is None]
    if error is not None:
        raise RuntimeError(f"IPC transport: this rank could not {what}: {error}") from error
    if failed:
        raise RuntimeError(f"IPC transport: rank(s) {failed} of the node could not {what} (their error says why)")


def windows_of(comm: Any, device: Device) -> IpcWindows:
    """The :class:`IpcWindows` of ``comm`` (a communicator's state or preparation), made on first use and kept
    with the communicator's state (released with it)."""
    kept = comm.devices.get("ipc")
    if kept is None:
        kept = comm.devices["ipc"] = IpcWindows(device, comm.private)
    return kept


class IpcTransport:
    """A plan's buffers laid out in the communicator's window, and the pull executor over them."""

    def __init__(self, device: Device, windows: IpcWindows, schedule: Schedule, arrays: dict[str, Any],
                 layouts: dict[str, Layout], scratch: dict[str, int], dtype: np.dtype,
                 kernel: Callable | None) -> None:
        self.device, self.windows, self.schedule, self.layouts, self.kernel = device, windows, schedule, layouts, kernel
        self.dtypes: dict[str, np.dtype] = {}
        self.user: dict[str, Any] = {}          # canonical name -> the user's device bytes
        canonical: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for name, arr in arrays.items():
            same = next((n for n, a in arrays.items() if a is arr), name)
            canonical[name] = same
            self.dtypes[name] = arr.dtype
            if same == name:
                self.user[name] = device.raw(arr)
                sizes[name] = self.user[name].nbytes
        for name, count in scratch.items():
            canonical[name] = name
            self.dtypes[name] = np.dtype(dtype)
            sizes[name] = count * np.dtype(dtype).itemsize
        self.canonical = canonical
        self.offset: dict[str, int] = {}
        end = 0
        for name, size in sizes.items():
            self.offset[name] = end
            end += -(-size // ALIGN) * ALIGN      # round each buffer up to the alignment
        self.nbytes = end
        itemsize = {name: self.dtypes[name].itemsize for name in canonical}
        outputs = {canonical["recv"]} if "recv" in arrays else set()
        # no segmenting: a device-to-device pull moves a whole block at once
        self.access: Access = analyse(schedule, layouts, itemsize, canonical, set(self.user), outputs, 1 << 62)
        self.epoch: tuple[int, ...] | None = None
        self._rounds: list = []

    # -- binding to the window -------------------------------------------------------------------------

    def _mine(self, buf: str, lo: int, hi: int) -> Any:
        base = self.offset[buf]
        return self.windows.window.view(base + lo, hi - lo)

    def _bind(self) -> None:
        """Views of this epoch's window for every message and step."""
        rounds = []
        for rnd in self.access.rounds:
            sends = [(np.array([self.offset[op.buf] + op.span[0], op.span[1] - op.span[0]], np.int64), op.peer)
                     for op in rnd.sends]
            recvs = [(self._mine(op.buf, *op.span), op.peer) for op in rnd.recvs]
            steps = [self._step(op.step) for op in rnd.steps]
            rounds.append((sends, recvs, [s for s in steps if s is not None]))
        self._rounds = rounds
        self.epoch = self.windows.epoch

    def _typed(self, block: Any) -> Any:
        start, stop = self.layouts[block.buf].span(block.lo, block.hi)
        buf = self.canonical.get(block.buf, block.buf)
        k = self.dtypes[block.buf].itemsize
        return self.device.typed(self._mine(buf, start * k, stop * k), self.dtypes[block.buf])

    def _step(self, st: Any) -> Callable[[], None] | None:
        if isinstance(st, Reduce):
            return partial(self.kernel, self._typed(st.out), self._typed(st.left), self._typed(st.right))
        out, src = self._typed(st.out), self._typed(st.src)
        if out.nbytes and _address(out) == _address(src):
            return None        # an in-place call's own block: already there
        return partial(self.device.xp.copyto, out, src)

    # -- the run ---------------------------------------------------------------------------------------

    def execute(self, comm: MPI.Comm, tag: int = 0) -> None:
        """Run the collective once (blocking) on ``comm``."""
        # the plan's first run here needs its window; a handle exchange happens when any rank's does
        self.windows.agree(self.nbytes if self.epoch is None else None)
        if self.epoch != self.windows.epoch:
            self._bind()
        stream = self.device.current_stream()
        for buf, (lo, hi) in self.access.stage_in:
            self.device.copy(self._mine(buf, lo, hi), self.user[buf][lo:hi], stream)
        run(self._rounds, comm, tag, Pull(self, stream))
        for buf, spans in self.access.written.items():
            for lo, hi in spans:
                self.device.copy(self.user[buf][lo:hi], self._mine(buf, lo, hi), stream)


class Pull(Exchange):
    """The IPC transport's policy of :func:`mpicoll.engine.rounds.run`: a round's messages as pulls from the
    peers' windows, with ready tokens out, copies in and acknowledgements both ways (on ``stream``)."""

    def __init__(self, transport: IpcTransport, stream: Any) -> None:
        self.transport, self.stream = transport, stream

    def __call__(self, comm: MPI.Comm, tag: int, t: int, sends: list, recvs: list) -> None:
        stream, device, peers = self.stream, self.transport.device, self.transport.windows.peers
        tokens = [np.empty(2, np.int64) for _ in recvs]
        ready = post(comm, tag, [], [(token, peer) for token, (_, peer) in zip(tokens, recvs)])
        acks = post(comm, tag, [], [(_EMPTY, peer) for _, peer in sends])
        if sends:
            stream.synchronize()          # the blocks this rank sends are written
            acks += post(comm, tag, sends, [])
        pending = len(ready)
        while pending:
            for i in MPI.Request.Waitsome(ready) or []:
                pending -= 1
                dst, peer = recvs[i]
                offset, nbytes = int(tokens[i][0]), int(tokens[i][1])
                if nbytes != dst.nbytes:
                    raise RuntimeError(f"IPC transport: rank {peer} sends {nbytes} bytes where this rank expects "
                                       f"{dst.nbytes}: the ranks disagree on the call's counts")
                device.copy(dst, peers[peer].view(offset, nbytes), stream)
        if recvs:
            stream.synchronize()          # the pulls are done: the senders may reuse their blocks
            acks += post(comm, tag, [(_EMPTY, peer) for _, peer in recvs], [])
        waitall(acks)


_EMPTY = np.empty(0, np.uint8)


def _address(view: Any) -> int:
    if isinstance(view, np.ndarray):
        return view.__array_interface__["data"][0]
    return view.data.ptr
