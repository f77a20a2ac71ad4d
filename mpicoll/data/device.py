"""The small device interface the GPU transports are written against, and its two implementations.

A transport (staged, IPC) never calls CuPy itself: it asks a :class:`Device`
for pinned host memory, streams, events, asynchronous copies and shared device
windows.  :class:`CupyDevice` implements that with CuPy's runtime API;
:class:`HostDevice` implements it with NumPy arrays, synchronous fake streams
and events that record what was asked of them, and POSIX shared memory for
the windows, so that the transports' pipelining and bookkeeping run (and are
tested) on a machine without a GPU.

The host stand-in is reached by passing :class:`StandInArray` buffers (a NumPy
subclass) to a collective: every code path of the GPU transports then runs,
with "device" memory that happens to be host memory.
"""

from __future__ import annotations

import atexit
import itertools
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import numpy as np

__all__ = ["Device", "Stream", "Event", "Window", "PeerWindow", "CupyDevice", "HostDevice", "StandInArray",
           "AlreadyMapped", "device_of", "on_device", "addressable", "bytes_at"]


class Event(Protocol):
    def synchronize(self) -> None: ...


class Stream(Protocol):
    def record(self) -> Event: ...
    def wait(self, event: Event) -> None: ...
    def synchronize(self) -> None: ...


class Window(Protocol):
    """Device memory this process allocated and exports to the other processes of its node."""

    handle: bytes       # what a peer passes to :meth:`Device.open_peer`
    nbytes: int

    def view(self, offset: int, nbytes: int) -> Any: ...
    def free(self) -> None: ...


class PeerWindow(Protocol):
    """Another process's :class:`Window`, mapped into this one."""

    def view(self, offset: int, nbytes: int) -> Any: ...
    def close(self) -> None: ...


class Device(Protocol):
    """What the transports need of a GPU (all copies are asynchronous on the given stream)."""

    name: str

    def current_stream(self) -> Stream: ...
    def new_stream(self) -> Stream: ...
    def pinned(self, nbytes: int) -> np.ndarray: ...
    def raw(self, array: Any) -> Any: ...
    def to_host(self, host: np.ndarray, dev: Any, stream: Stream) -> None: ...
    def to_device(self, dev: Any, host: np.ndarray, stream: Stream) -> None: ...
    def copy(self, dst: Any, src: Any, stream: Stream) -> None: ...
    def typed(self, raw: Any, dtype: np.dtype) -> Any: ...
    def window(self, nbytes: int) -> Window: ...
    def open_peer(self, handle: bytes, nbytes: int) -> PeerWindow:
        """Map a peer's window (once per process: CUDA refuses a second mapping, ``cudaErrorAlreadyMapped``)."""
    def reduce_here(self, op_name: str, dtype: np.dtype) -> bool: ...
    @property
    def xp(self) -> Any: ...


# -- the host stand-in -------------------------------------------------------------------------------


class StandInArray(np.ndarray):
    """A NumPy array that mpicoll treats as device memory of the :class:`HostDevice` (tests only)."""


class _HostEvent:
    """An event of a synchronous fake stream: complete when created; it remembers its place in the log."""

    def __init__(self, device: HostDevice, stream: _HostStream) -> None:
        self.device, self.stream, self.index = device, stream, len(device.log)

    def synchronize(self) -> None:
        self.device.log.append(("sync", self.stream.name, self.index))


class _HostStream:
    def __init__(self, device: HostDevice, name: str) -> None:
        self.device, self.name = device, name

    def record(self) -> _HostEvent:
        self.device.log.append(("record", self.name))
        return _HostEvent(self.device, self)

    def wait(self, event: _HostEvent) -> None:
        self.device.log.append(("wait", self.name, event.stream.name))

    def synchronize(self) -> None:
        self.device.log.append(("sync", self.name, len(self.device.log)))


class AlreadyMapped(RuntimeError):
    """The host stand-in's ``cudaErrorAlreadyMapped``: a process opened memory of a peer it already maps."""


class _SharedWindow:
    """A window of POSIX shared memory: the stand-in for cudaMalloc + cudaIpcGetMemHandle.

    Like ``cudaMalloc``, it reuses memory freed before (:data:`_FREED`), under a handle of its own: the
    segment's name is the memory, the handle ``name#n`` this allocation of it."""

    def __init__(self, nbytes: int) -> None:
        from multiprocessing import shared_memory  # noqa: PLC0415

        reused = next((shm for shm in _FREED if shm.size >= max(nbytes, 1)), None)
        if reused is not None:
            _FREED.remove(reused)
            self._shm = reused
        else:
            self._shm = shared_memory.SharedMemory(create=True, size=max(nbytes, 1))
            _OWNED.add(self._shm.name)
        self.handle = f"{self._shm.name}#{next(_ALLOCATIONS)}".encode()
        self.nbytes = nbytes
        self._base = np.ndarray(nbytes, np.uint8, buffer=self._shm.buf)

    def view(self, offset: int, nbytes: int) -> np.ndarray:
        return self._base[offset:offset + nbytes]

    def free(self) -> None:
        """Give the memory back: kept for the next window (at most ``FREED_KEPT``), as a GPU's allocator
        does, so that freeing memory a peer still maps has the consequence it has on a GPU."""
        self._base = None
        _FREED.append(self._shm)
        while len(_FREED) > (FREED_KEPT if not _EXITING else 0):
            _unlink(_FREED.pop(0))


class _SharedPeer:
    """Another process's window mapped here: at most one mapping of a segment per process, as CUDA allows."""

    def __init__(self, handle: bytes, nbytes: int) -> None:
        from multiprocessing import shared_memory  # noqa: PLC0415

        name = handle.decode().split("#")[0]
        if name in _MAPPED:
            raise AlreadyMapped(f"resource already mapped: this process maps the memory of handle {handle!r} "
                                "already (the host stand-in of cudaErrorAlreadyMapped)")
        self._shm = shared_memory.SharedMemory(name=name)
        _untrack(self._shm)
        _MAPPED.add(name)
        self._base = np.ndarray(nbytes, np.uint8, buffer=self._shm.buf)

    def view(self, offset: int, nbytes: int) -> np.ndarray:
        return self._base[offset:offset + nbytes]

    def close(self) -> None:
        self._base = None
        _MAPPED.discard(self._shm.name)
        self._shm.close()


_OWNED: set[str] = set()     # names of the shared-memory windows this process created
_MAPPED: set[str] = set()    # names of the peers' segments this process maps now
_FREED: list = []            # this process's freed segments, reused by its next windows (oldest first)
FREED_KEPT = 8
_ALLOCATIONS = itertools.count(1)
_EXITING: list[bool] = []


def _unlink(shm: Any) -> None:
    shm.close()
    shm.unlink()
    _OWNED.discard(shm.name)


@atexit.register
def _unlink_freed() -> None:
    _EXITING.append(True)
    while _FREED:
        _unlink(_FREED.pop())


def _untrack(shm: Any) -> None:
    # Python's resource tracker would unlink a peer's segment when this process exits; the owner unlinks it
    if shm.name in _OWNED:
        return
    try:
        from multiprocessing import resource_tracker  # noqa: PLC0415

        resource_tracker.unregister(shm._name, "shared_memory")
    except Exception:
        pass


class HostDevice:
    """The device interface on host memory: synchronous copies, fake streams and events, shared-memory windows.

    ``log`` records the latest stream operations and copies in order (at most
    ``LOG_ENTRIES``), so that tests can check what a transport overlapped with
    what; ``opened`` and ``windows`` count the live peer mappings and windows.
    Two rules of CUDA IPC hold here too: a process maps a peer's memory at most
    once (a second :meth:`open_peer` raises :class:`AlreadyMapped`), and freed
    window memory is reused by the next window, under a new handle.
    """

    LOG_ENTRIES = 10_000

    name = "host stand-in"
    xp = np

    def __init__(self) -> None:
        self.log: deque[tuple] = deque(maxlen=self.LOG_ENTRIES)
        self.opened = 0
        self.windows = 0
        self.pinned_bytes = 0

    def current_stream(self) -> _HostStream:
        return _HostStream(self, "current")

    def new_stream(self) -> _HostStream:
        return _HostStream(self, "copy")

    def pinned(self, nbytes: int) -> np.ndarray:
        self.pinned_bytes += nbytes
        return np.empty(nbytes, np.uint8)

    def raw(self, array: Any) -> np.ndarray:
        return np.asarray(array).view(np.uint8)

    def to_host(self, host: np.ndarray, dev: Any, stream: _HostStream) -> None:
        self.log.append(("d2h", stream.name, dev.nbytes))
        host[...] = dev

    def to_device(self, dev: Any, host: np.ndarray, stream: _HostStream) -> None:
        self.log.append(("h2d", stream.name, dev.nbytes))
        dev[...] = host

    def copy(self, dst: Any, src: Any, stream: _HostStream) -> None:
        self.log.append(("d2d", stream.name, dst.nbytes))
        dst[...] = src

    def typed(self, raw: Any, dtype: np.dtype) -> np.ndarray:
        return raw.view(dtype)

    def window(self, nbytes: int) -> _SharedWindow:
        self.windows += 1
        return _CountedWindow(self, nbytes)

    def open_peer(self, handle: bytes, nbytes: int) -> _SharedPeer:
        """Map a peer's window; :class:`AlreadyMapped` where this process maps its memory already."""
        mapping = _CountedPeer(self, handle, nbytes)
        self.opened += 1
        return mapping

    def reduce_here(self, op_name: str, dtype: np.dtype) -> bool:
        return op_name != "user"


class _CountedWindow(_SharedWindow):
    def __init__(self, device: HostDevice, nbytes: int) -> None:
        super().__init__(nbytes)
        self._device = device

    def free(self) -> None:
        super().free()
        self._device.windows -= 1


class _CountedPeer(_SharedPeer):
    def __init__(self, device: HostDevice, handle: bytes, nbytes: int) -> None:
        super().__init__(handle, nbytes)
        self._device = device

    def close(self) -> None:
        super().close()
        self._device.opened -= 1


# -- CuPy --------------------------------------------------------------------------------------------


class _CupyStream:
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def record(self) -> Any:
        return self.stream.record()          # a cupy.cuda.Event, recorded on this stream

    def wait(self, event: Any) -> None:
        self.stream.wait_event(event)        # device-side wait, the host does not block

    def synchronize(self) -> None:
        self.stream.synchronize()


class _CupyWindow:
    """``cudaMalloc`` memory of its own (an allocation base, so that its IPC handle maps exactly this memory)."""

    def __init__(self, nbytes: int) -> None:
        import cupy  # noqa: PLC0415

        self._rt = cupy.cuda.runtime
        self._cupy = cupy
        self.nbytes = nbytes
        self.ptr = self._rt.malloc(max(nbytes, 1))
        self.handle = bytes(self._rt.ipcGetMemHandle(self.ptr))

    def view(self, offset: int, nbytes: int) -> Any:
        return _cupy_view(self._cupy, self.ptr + offset, nbytes, self)

    def free(self) -> None:
        if self.ptr:
            self._rt.free(self.ptr)
            self.ptr = 0


class _CupyPeer:
    def __init__(self, handle: bytes, nbytes: int) -> None:
        import cupy  # noqa: PLC0415

        self._rt = cupy.cuda.runtime
        self._cupy = cupy
        # lazy peer access: works for ranks on one GPU and for ranks on peer-capable GPUs of the node
        self.ptr = self._rt.ipcOpenMemHandle(handle, self._rt.cudaIpcMemLazyEnablePeerAccess)
        self.nbytes = nbytes

    def view(self, offset: int, nbytes: int) -> Any:
        return _cupy_view(self._cupy, self.ptr + offset, nbytes, self)

    def close(self) -> None:
        if self.ptr:
            self._rt.ipcCloseMemHandle(self.ptr)
            self.ptr = 0


def _cupy_view(cupy: Any, ptr: int, nbytes: int, owner: Any) -> Any:
    mem = cupy.cuda.UnownedMemory(ptr, nbytes, owner)
    return cupy.ndarray((nbytes,), cupy.uint8, cupy.cuda.MemoryPointer(mem, 0))


class CupyDevice:
    """The device interface on CuPy's runtime API (``cudaMemcpyAsync``, events, streams, CUDA IPC)."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy  # noqa: PLC0415

        self._cupy = cupy
        self._rt = cupy.cuda.runtime

    @property
    def xp(self) -> Any:
        return self._cupy

    def current_stream(self) -> _CupyStream:
        return _CupyStream(self._cupy.cuda.get_current_stream())

    def new_stream(self) -> _CupyStream:
        return _CupyStream(self._cupy.cuda.Stream(non_blocking=True))

    def pinned(self, nbytes: int) -> np.ndarray:
        mem = self._cupy.cuda.alloc_pinned_memory(max(nbytes, 1))
        return np.frombuffer(mem, np.uint8, nbytes)   # the array keeps ``mem`` (and so the pinned pages) alive

    def raw(self, array: Any) -> Any:
        return array.view(self._cupy.uint8)

    def to_host(self, host: np.ndarray, dev: Any, stream: _CupyStream) -> None:
        if dev.nbytes:
            self._rt.memcpyAsync(host.ctypes.data, dev.data.ptr, dev.nbytes, self._rt.memcpyDeviceToHost,
                                 stream.stream.ptr)

    def to_device(self, dev: Any, host: np.ndarray, stream: _CupyStream) -> None:
        if dev.nbytes:
            self._rt.memcpyAsync(dev.data.ptr, host.ctypes.data, dev.nbytes, self._rt.memcpyHostToDevice,
                                 stream.stream.ptr)

    def copy(self, dst: Any, src: Any, stream: _CupyStream) -> None:
        if dst.nbytes:   # memcpyDefault: unified addressing finds a peer GPU's mapped memory too
            self._rt.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, self._rt.memcpyDefault, stream.stream.ptr)

    def typed(self, raw: Any, dtype: np.dtype) -> Any:
        return raw.view(dtype)

    def window(self, nbytes: int) -> _CupyWindow:
        return _CupyWindow(nbytes)

    def open_peer(self, handle: bytes, nbytes: int) -> _CupyPeer:
        return _CupyPeer(handle, nbytes)

    def reduce_here(self, op_name: str, dtype: np.dtype) -> bool:
        # CuPy's ufuncs cover every predefined op on its numeric dtypes; user ops (which expect host
        # memory) and MINLOC/MAXLOC (structured dtypes, which CuPy lacks) reduce on the host
        if op_name in ("user", "MINLOC", "MAXLOC"):
            return False
        try:
            self._cupy.dtype(dtype)
        except Exception:
            return False
        return dtype.kind in "biufc"


_CUPY_DEVICE: list[CupyDevice] = []
_HOST_DEVICE: list[HostDevice] = []


def on_device(array: Any) -> bool:
    """True for a CuPy array (or the host stand-in :class:`StandInArray`)."""
    return isinstance(array, StandInArray) or type(array).__module__.split(".")[0] == "cupy"


def device_of(array: Any) -> Device | None:
    """The device an array lives on, or None for host memory."""
    if isinstance(array, StandInArray):
        if not _HOST_DEVICE:
            _HOST_DEVICE.append(HostDevice())
        return _HOST_DEVICE[0]
    if type(array).__module__.split(".")[0] == "cupy":
        if not _CUPY_DEVICE:
            _CUPY_DEVICE.append(CupyDevice())
        return _CUPY_DEVICE[0]
    return None


# -- device memory at an absolute address (MPI.BOTTOM with datatypes built on MPI.Get_address) -------

_ADDRESSABLE: list[np.ndarray] = []   # stand-in arrays whose absolute addresses count as device memory


@contextmanager
def addressable(*arrays: StandInArray) -> Iterator[None]:
    """Inside the block, absolute addresses within ``arrays`` (contiguous :class:`StandInArray` buffers) are
    device memory of the host stand-in, as a GPU's driver knows its own pointers (tests only)."""
    _ADDRESSABLE.extend(arrays)
    try:
        yield
    finally:
        for array in arrays:
            _ADDRESSABLE.remove(array)


def bytes_at(address: int, nbytes: int) -> Any:
    """The ``nbytes`` bytes of device memory from absolute ``address`` (as ``MPI.Get_address`` gives it for
    a device array), as a uint8 array of its device; None where ``address`` is host memory."""
    for array in _ADDRESSABLE:
        raw = np.asarray(array).reshape(-1).view(np.uint8)
        lo = raw.__array_interface__["data"][0]
        if lo <= address < lo + raw.nbytes:
            if address + nbytes > lo + raw.nbytes:
                raise ValueError(f"{nbytes} bytes from address {address:#x} run past the end of a device array")
            return raw[address - lo:address - lo + nbytes].view(StandInArray)
    from mpicoll.data.memory import is_device_pointer  # noqa: PLC0415 - only here

    if not is_device_pointer(address):
        return None
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        raise RuntimeError(f"address {address:#x} is GPU memory, and mpicoll reads GPU memory at an address "
                           "through CuPy, which is not installed") from None
    return _cupy_view(cupy, address, nbytes, None)
