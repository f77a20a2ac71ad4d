"""Who completes a Work's future when no one waits on the Work: one watching thread per process.

DDP's reducer asks each bucket's all-reduce for its future and waits on the
future (in C++) at the end of the backward pass, never on the Work; comm hooks
chain callbacks on it.  Someone must therefore notice that the call's requests
have completed and set the future.  mpicoll's progress thread advances the
requests; it offers no completion callback through ``mpicoll.Comm``'s public
API, so this module keeps a list of the Works whose futures were asked for
before they completed, and one daemon thread (``mpicoll-torch-futures``,
started by the first such future) tests them (``Work.is_completed``: it never
blocks, so it never holds mpicoll's engine away from the caller, which may be
starting the next bucket's call) and sleeps between rounds: from
:data:`POLL_MIN` doubling to :data:`POLL_MAX` while nothing completes.  A
future whose Work completes through ``wait()`` or ``is_completed()`` in the
caller is completed there, without this thread.  While nothing is watched the
thread sleeps on a condition and costs nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["complete_later", "POLL_MIN", "POLL_MAX"]

POLL_MIN = 20e-6   # seconds between tests right after a Work completed
POLL_MAX = 1e-3    # ... at most, while nothing completes


class _Watcher:
    """The thread and the Works it watches."""

    def __init__(self) -> None:
        self.works: list[Any] = []
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self.run, name="mpicoll-torch-futures", daemon=True)
        self.thread.start()

    def add(self, work: Any) -> None:
        with self.changed:
            self.works.append(work)
            self.changed.notify()

    def run(self) -> None:
        delay = POLL_MIN
        while True:
            with self.changed:
                while not self.works:
                    self.changed.wait()
                works = list(self.works)
            done = [w for w in works if w.is_completed()]   # completes their futures, in this thread
            if done:
                with self.changed:
                    self.works = [w for w in self.works if not any(w is d for d in done)]
                delay = POLL_MIN
            else:
                time.sleep(delay)
                delay = min(2 * delay, POLL_MAX)


_WATCHER: list[_Watcher] = []
_START = threading.Lock()


def complete_later(work: Any) -> None:
    """Complete ``work``'s future once its call completes (``work.is_completed()`` sets the future)."""
    if not _WATCHER:
        with _START:
            if not _WATCHER:
                _WATCHER.append(_Watcher())
    _WATCHER[0].add(work)
