"""The one eviction rule of mpicoll's caches: at most so many entries and so many bytes, least recently used out.

Every cache of bound calls (a communicator's plans, :mod:`mpicoll.program.plancache`; an intercommunicator's
built calls, :mod:`mpicoll.comm.inter`; the reproducible sums' plans, :mod:`mpicoll.comm.reproducible_allreduce`)
keeps its entries in a :class:`Bounded`, and so do the GPU transports' idle windows
(:mod:`mpicoll.gpu.handles`).  Its entries live in a plain ``dict``, :attr:`Bounded.data`, which the
compiled hot path reads directly (``PyDict_GetItem``: a hit costs one lookup and no Python call).

Eviction is "second chance" (the clock algorithm, an approximation of least recently used): a hit only sets
its entry's ``used`` attribute, which costs nothing like the re-hashing of a strict LRU move; when room is
needed, the oldest entry goes unless it was used since the last sweep, in which case it is unmarked and moved
to the young end.  An entry with no ``used`` attribute is never given a second chance (first in, first out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Bounded"]


class Bounded:
    """Entries by key: at most ``entries`` of them, whose sizes total at most ``nbytes`` (None: no bound).

    Attributes
    ----------
    data : dict
        The entries, oldest first (read directly by the compiled hot path).
    held : int
        The total size of the entries.
    """

    __slots__ = ("data", "sizes", "entries", "nbytes", "held", "let_go")

    def __init__(self, entries: int, nbytes: int | None = None,
                 let_go: Callable[[Any], None] | None = None) -> None:
        self.data: dict[Any, Any] = {}
        self.sizes: dict[Any, int] = {}
        self.entries, self.nbytes, self.held = entries, nbytes, 0
        #: called with each entry the bounds let go (evicted, or refused as too large alone); not for
        #: :meth:`discard` and :meth:`clear`, whose caller has the entries
        self.let_go = let_go

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: Any) -> bool:
        return key in self.data

    def __iter__(self) -> Any:
        return iter(self.data)

    def get(self, key: Any) -> Any:
        """The entry under ``key`` (marked used), or None."""
        entry = self.data.get(key)
        if entry is not None and hasattr(entry, "used"):
            entry.used = True
        return entry

    def keep(self, key: Any, entry: Any, size: int = 0) -> bool:
        """Keep ``entry`` of ``size`` bytes under ``key``, evicting to make room; False (nothing kept) where it
        alone exceeds the bound on bytes."""
        if self.nbytes is not None and size > self.nbytes:
            if self.let_go is not None:
                self.let_go(entry)
            return False
        self.discard(key)
        self.data[key] = entry
        self.sizes[key] = size
        self.held += size
        data = self.data
        while len(data) > self.entries or (self.nbytes is not None and self.held > self.nbytes):
            oldest = next(iter(data))
            old = data[oldest]
            if oldest != key and getattr(old, "used", False):   # a second chance: to the young end, unmarked
                old.used = False
                data[oldest] = data.pop(oldest)
                self.sizes[oldest] = self.sizes.pop(oldest)
            else:
                self.discard(oldest)
                if self.let_go is not None:
                    self.let_go(old)
        return key in data

    def discard(self, key: Any) -> None:
        """Forget the entry under ``key``, if any."""
        self.data.pop(key, None)
        self.held -= self.sizes.pop(key, 0)

    def clear(self) -> None:
        """Forget every entry."""
        self.data.clear()
        self.sizes.clear()
        self.held = 0
