"""Play a rejected call's part on scratch memory, so that no peer waits forever.

Some argument checks can only fail on one rank: the root's receive buffer of a
``Gather`` is too small, one rank's ``Bcast`` buffer is read-only.  The other
ranks passed their checks and started the schedule; if the rank at fault just
raised, they would wait for it forever (or leave a message behind).  So before
raising, the rank at fault runs the same schedule with the faulty buffer
replaced by scratch memory of the size the call implies: a writable copy of a
read-only buffer, or a receive (send) buffer sized from the send (receive)
buffer as the collective relates them (Gather's root receives p blocks of the
send count, Scatter's root sends p blocks of the receive count, ...).  The user's
buffers are never written.  Then the original error is raised.

Only the argument the error names (``"recvbuf: ..."``) is replaced, and only
NumPy arrays (alone or first in an mpi4py buffer specification).  Where no
stand-in can be derived (a v-collective's too-small buffer, a root that differs
between ranks) the rank raises at once; ``MPICOLL_DEBUG=1`` catches those cases
before any message, and ``MPICOLL_TIMEOUT`` ends any wait that remains.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["stand_in_args", "play", "TIMEOUT"]

# seconds a stand-in may wait without progress when the communicator has no timeout of its own:
# a stand-in that does not match what the peers do (their arguments are wrong too) gives up
TIMEOUT = 10.0

# recvbuf's element count over sendbuf's, for the collectives where they differ (p: the size)
_RECV_OVER_SEND: dict[str, Callable[[int], float]] = {
    "Gather": lambda p: p, "Allgather": lambda p: p,
    "Scatter": lambda p: 1 / p, "Reduce_scatter_block": lambda p: 1 / p,
}
_BUFFERS = ("buf", "sendbuf", "recvbuf")


def _array(spec: Any) -> np.ndarray | None:
    """The NumPy array of a buffer argument (alone or first in a list/tuple spec), or None."""
    if isinstance(spec, np.ndarray):
        return spec
    if isinstance(spec, (list, tuple)) and spec and isinstance(spec[0], np.ndarray):
        return spec[0]
    return None


def _with_array(spec: Any, array: np.ndarray) -> Any:
    """``spec`` with its array replaced by ``array``."""
    if isinstance(spec, np.ndarray):
        return array
    return type(spec)([array, *spec[1:]])


def stand_in_args(method: str, args: tuple, error: BaseException, size: int) -> list[tuple]:
    """Argument tuples, most likely first, with the buffer ``error`` names replaced by scratch."""
    name = str(error).split(":", 1)[0].strip()
    if name not in _BUFFERS:
        return []
    index = 0 if name in ("buf", "sendbuf") else 1
    if index >= len(args):
        return []
    spec, bad = args[index], _array(args[index])
    candidates: list[Any] = []
    if bad is not None:   # read-only, not contiguous, ...: a writable copy of the same elements
        candidates.append(_with_array(spec, np.array(bad.reshape(-1), order="C")))
    other = _array(args[1 - index]) if method != "Bcast" and len(args) > 1 else None
    if other is not None and isinstance(args[1 - index], np.ndarray):
        ratio = _RECV_OVER_SEND.get(method, lambda p: 1)(size)
        count = other.size * ratio if index == 1 else other.size / ratio
        if count == int(count):
            candidates.append(np.zeros(int(count), other.dtype))
    return [args[:index] + (c,) + args[index + 1:] for c in candidates]


def play(comm: Any, method: str, args: tuple, algorithm: str, error: BaseException,
         prepare: Callable[..., Any], run: Callable[[Any], None]) -> bool:
    """Run this rank's part of the call on scratch (when one can be derived); True if it ran.

    ``prepare(method, *args, algorithm=...)`` builds a plan without
    communicating; ``run(plan)`` runs it as the failed call would have.
    Anything going wrong here is swallowed: the caller raises ``error`` next.
    """
    if comm.size == 1:
        return False
    for candidate in stand_in_args(method, tuple(args), error, comm.size):
        try:
            plan = prepare(method, *candidate, algorithm=algorithm)
        except Exception:
            continue
        try:
            run(plan)
        except Exception:
            pass
        return True
    return False
