"""CUDA IPC memory across communicators: peers' windows mapped once per process, and this process's idle windows.

CUDA maps an allocation of another process at most once per process (a second
``cudaIpcOpenMemHandle`` of it fails with ``cudaErrorAlreadyMapped``), and
freeing an allocation that another process still maps is undefined.  mpicoll
keeps one IPC window per communicator and rank (:mod:`mpicoll.gpu.ipc`), so
both rules are about more than one communicator:

- :data:`MAPPINGS` (:class:`PeerMappings`): every peer allocation this process
  has opened, by handle bytes, with the number of its users (a communicator
  that maps it).  A second user of the same handle shares the open mapping;
  the last user to let go (its communicator is released, or the peer replaced
  that window) closes it.
- :data:`IDLE` (:class:`IdleWindows`): this process's windows that no
  communicator uses any more.  A communicator's state is released by garbage
  collection, at a different moment on each rank, so a peer may still map its
  window then: instead of freeing it, the owner keeps it here and hands it to
  the next communicator that needs a window (its handle is unchanged, so a
  peer that still maps it shares that mapping).  At most :data:`IDLE_WINDOWS`
  windows and :data:`IDLE_BYTES` bytes are kept, the oldest freed first (a
  :class:`~mpicoll.bounded.Bounded`, every cache's rule); all are freed when
  the process exits.
"""

from __future__ import annotations

import atexit
import threading

from mpicoll.bounded import Bounded
from mpicoll.data.device import Device, PeerWindow, Window

__all__ = ["PeerMappings", "IdleWindows", "MAPPINGS", "IDLE", "IDLE_WINDOWS", "IDLE_BYTES"]

#: the most idle windows a process keeps for reuse, and their most bytes (beyond: the oldest are freed)
IDLE_WINDOWS = 4
IDLE_BYTES = 1 << 30


class _Mapped:
    __slots__ = ("mapping", "nbytes", "users")

    def __init__(self, mapping: PeerWindow, nbytes: int) -> None:
        self.mapping, self.nbytes, self.users = mapping, nbytes, 0


class PeerMappings:
    """The peer allocations mapped into this process, by ``(device, handle)``: opened once, shared by their
    users, closed when the last one lets go.

    Attributes
    ----------
    opens : int
        How many handles were ever opened (a shared one counts once).
    """

    def __init__(self) -> None:
        self._open: dict[tuple[int, bytes], _Mapped] = {}
        self._lock = threading.Lock()
        self.opens = 0

    def acquire(self, device: Device, handle: bytes, nbytes: int) -> PeerWindow:
        """The mapping of the peer allocation ``handle`` (``nbytes`` long), opened if no user has it open."""
        key = (id(device), bytes(handle))
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                entry = self._open[key] = _Mapped(device.open_peer(handle, nbytes), nbytes)
                self.opens += 1
            elif nbytes > entry.nbytes:
                raise RuntimeError(f"IPC transport: a peer's window is mapped here with {entry.nbytes} bytes, "
                                   f"and the same handle is now sent with {nbytes} bytes")
            entry.users += 1
            return entry.mapping

    def release(self, device: Device, handle: bytes) -> None:
        """One user of ``handle`` lets go; the last one closes the mapping."""
        key = (id(device), bytes(handle))
        with self._lock:
            entry = self._open.get(key)
            if entry is None:
                return
            entry.users -= 1
            if entry.users > 0:
                return
            del self._open[key]
        entry.mapping.close()

    def users(self, device: Device, handle: bytes) -> int:
        """How many users have ``handle`` open (0: not mapped here)."""
        entry = self._open.get((id(device), bytes(handle)))
        return 0 if entry is None else entry.users

    def __len__(self) -> int:
        return len(self._open)


class IdleWindows:
    """This process's windows that no communicator uses now, kept for the next one (bounded, oldest freed)."""

    def __init__(self, entries: int = IDLE_WINDOWS, nbytes: int = IDLE_BYTES) -> None:
        self._let_go: list[tuple[int, Window]] = []   # what the bounds let go, freed outside the lock
        #: id(window): (id(device), window), oldest first
        self._kept = Bounded(entries, nbytes, let_go=self._let_go.append)
        self._lock = threading.Lock()
        self._closed = False

    def take(self, device: Device, nbytes: int) -> Window | None:
        """The smallest idle window of ``device`` with at least ``nbytes`` bytes (no longer idle), or None."""
        with self._lock:
            fits = [(window.nbytes, key) for key, (owner, window) in self._kept.data.items()
                    if owner == id(device) and window.nbytes >= nbytes]
            if not fits:
                return None
            key = min(fits)[1]
            window = self._kept.data[key][1]
            self._kept.discard(key)
            return window

    def give(self, device: Device, window: Window) -> None:
        """Keep ``window`` for reuse; free the oldest windows beyond the bounds (or it, alone too big)."""
        with self._lock:
            if self._closed:
                self._let_go.append((id(device), window))
            else:
                self._kept.keep(id(window), (id(device), window), window.nbytes)
            evicted, self._let_go[:] = list(self._let_go), []
        for _, old in evicted:
            old.free()

    @property
    def held(self) -> int:
        """The bytes of the idle windows."""
        return self._kept.held

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self, *, closing: bool = False) -> None:
        """Free every idle window (``closing``: the process exits, later windows are freed at once)."""
        with self._lock:
            windows = [window for _, window in self._kept.data.values()]
            self._kept.clear()
            self._closed = self._closed or closing
        for window in windows:
            window.free()


MAPPINGS = PeerMappings()
IDLE = IdleWindows()
atexit.register(IDLE.clear, closing=True)
