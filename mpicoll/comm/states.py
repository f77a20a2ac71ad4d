"""Which state a wrapped communicator has: the one its other wrappers share, or a new one, registered.

A communicator's states are cached on the communicator itself, as an MPI attribute: ``{(timeout,
configuration generation): weak reference to the state}``, alive while a wrapper lives; wrapping it again
after :func:`mpicoll.config.reload` makes a new state, which follows the new configuration.  An attribute,
not a table keyed by the handle: MPI reuses the handle of a freed communicator for the next one made, on
some ranks and not on others, and a state found by handle would then be another communicator's (ranks that
found it would talk on another private communicator than ranks that made a new one, and hang).

Registering a state also chooses, once, the path its calls take (:attr:`CommState.slow_path`: the fast
path's miss, or the careful path where a timeout or ``MPICOLL_DEBUG`` asks for it).
"""

from __future__ import annotations

import threading
import weakref

from mpi4py import MPI

from mpicoll import config
from mpicoll.comm import careful
from mpicoll.comm.dispatch import fast_miss
from mpicoll.program.state import CommState

__all__ = ["shared", "register", "world"]

_KEYVAL: list[int] = []
_PREDEFINED: dict[tuple, CommState] = {}  # (handle, timeout): the newest state of COMM_WORLD or COMM_SELF, kept
_LOCK = threading.Lock()


def shared(comm: MPI.Comm, timeout: float | None) -> CommState | None:
    """The live state another wrapper of ``comm`` made with this timeout and configuration, if any."""
    with _LOCK:
        ref = _attached(comm).get((timeout, config.generation()))
    state = None if ref is None else ref()
    return state if state is not None and state.private != MPI.COMM_NULL else None


def register(comm: MPI.Comm, state: CommState) -> CommState:
    """Choose the state's path (once) and remember it for the communicator's other wrappers."""
    state.slow_path = careful.run if state.careful else fast_miss
    with _LOCK:
        _attached(comm)[state.timeout, config.generation()] = weakref.ref(state)
        if comm.handle in (MPI.COMM_WORLD.handle, MPI.COMM_SELF.handle):
            _PREDEFINED[comm.handle, state.timeout] = state
    return state


def world() -> CommState | None:
    """The newest state of a wrapper of ``MPI.COMM_WORLD`` (still holding its private communicator), if any."""
    with _LOCK:
        state = next((s for (h, _), s in _PREDEFINED.items() if h == MPI.COMM_WORLD.handle), None)
    return state if state is not None and state.private != MPI.COMM_NULL else None


def _attached(comm: MPI.Comm) -> dict:
    """The states cached on ``comm`` (an MPI attribute, gone when MPI frees the communicator), made empty once."""
    if not _KEYVAL:
        _KEYVAL.append(MPI.Comm.Create_keyval())     # no copy function: a Dup starts with no state of its own
    states = MPI.Comm.Get_attr(comm, _KEYVAL[0])
    if states is None:
        states = {}
        MPI.Comm.Set_attr(comm, _KEYVAL[0], states)
    return states
