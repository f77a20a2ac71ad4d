"""mpicoll: MPI collective operations written by hand on mpi4py point-to-point calls.

Every algorithm is a *schedule* (data): print it, draw it, verify it, cost it,
and run it on real processes.  ``mpicoll.Comm(comm)`` is a drop-in replacement
for an mpi4py communicator whose collectives are mpicoll's.

The pure tools (schedules, the simulator, the cost model, ``show``/``verify``/
``model``/``draw``) work without mpi4py: the names that need it (``Comm``,
``Request``, ``Prequest``, ``Op`` and the exceptions) are imported on first use
(PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mpicoll import families as _families  # noqa: F401  (importing the families registers every algorithm
from mpicoll.families.registry import algorithms, collectives, schedule, schedules
from mpicoll.ir.schedule import Block, Copy, Recv, Reduce, Round, Schedule, ScheduleError, ScheduleSet, Send

if TYPE_CHECKING:  # for type checkers and IDEs; at run time these come from __getattr__ below
    from mpicoll.comm.comm import Comm, Intercomm
    from mpicoll.data.accumulator import ReproducibleSum
    from mpicoll.data.ops import Op
    from mpicoll.engine.requests import Prequest, Request
    from mpicoll.engine.watchdog import CollectiveTimeout, MessageSizeError
    from mpicoll.errors import ArgumentError, MismatchError, OutOfStepError, PeerFailure, ProcFailedError

__version__ = "0.1.0"

# the names that need mpi4py, and the module each comes from (imported on first access)
_LAZY = {
    "Comm": ".comm",
    "Intercomm": ".comm",
    "Request": ".engine.requests",
    "Prequest": ".engine.requests",
    "Op": ".data.ops",
    "MismatchError": ".errors",
    "ArgumentError": ".errors",
    "PeerFailure": ".errors",
    "ProcFailedError": ".errors",
    "OutOfStepError": ".errors",
    "CollectiveTimeout": ".engine.watchdog",
    "MessageSizeError": ".engine.watchdog",
    "ReproducibleSum": ".data.accumulator",
}

__all__ = [
    "Comm", "Intercomm", "Request", "Prequest", "Op", "MismatchError", "ArgumentError", "PeerFailure",
    "ProcFailedError", "OutOfStepError", "CollectiveTimeout", "MessageSizeError", "ReproducibleSum",
    "algorithms", "collectives", "schedule", "schedules",
    "Block", "Send", "Recv", "Reduce", "Copy", "Round", "Schedule", "ScheduleSet", "ScheduleError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """Import the names that need mpi4py on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    """The public names (``dir(mpicoll)``): what ``__all__`` exports, not this module's own imports."""
    return sorted(__all__)
