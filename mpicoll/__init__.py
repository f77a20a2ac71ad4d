"""mpicoll: MPI collective operations written by hand on mpi4py point-to-point calls.

Every algorithm is a *schedule* (data): print it, draw it, verify it, cost it,
and run it on real processes.  ``mpicoll.Comm(comm)`` is a drop-in replacement
for an mpi4py communicator whose collectives are mpicoll's.
"""

from __future__ import annotations

from . import families as _families  # noqa: F401  (importing the families registers every algorithm)
from .comm import Comm
from .debug import ArgumentError, MismatchError
from .exec.nonblocking import Prequest, Request
from .exec.watchdog import CollectiveTimeout, MessageSizeError
from .ops import Op
from .registry import algorithms, collectives, schedule, schedules
from .schedule import Block, Copy, Recv, Reduce, Round, Schedule, ScheduleError, ScheduleSet, Send

__version__ = "0.1.0"

__all__ = [
    "Comm", "Request", "Prequest", "Op", "MismatchError", "ArgumentError", "CollectiveTimeout", "MessageSizeError",
    "algorithms", "collectives", "schedule", "schedules",
    "Block", "Send", "Recv", "Reduce", "Copy", "Round", "Schedule", "ScheduleSet", "ScheduleError",
    "__version__",
]
