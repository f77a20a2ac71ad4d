"""Validate arguments, choose an algorithm, bind its schedule and run it.

Every check happens before the first message, on every rank, so a bad
argument raises the same exception everywhere instead of hanging.  Setting
``MPICOLL_DEBUG=1`` also compares a signature of each call (collective, count,
dtype, op, algorithm, root) across ranks first, and raises on every rank with
the ranks that disagree.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from . import backends, registry, selection
from .buffers import Buffer, is_in_place, parse
from .exec.blocking import bind, execute
from .layout import Layout
from .ops import check_op, is_commutative, op_name, reducer

if TYPE_CHECKING:
    from .comm import Comm

__all__ = ["allreduce", "MismatchError"]


class MismatchError(ValueError):
    """Ranks called the same collective with arguments that do not agree."""


def _debug_check(comm: Comm, signature: tuple) -> None:
    if os.environ.get("MPICOLL_DEBUG", "0") in ("", "0"):
        return
    everyone = comm.private.allgather(signature)
    if any(sig != everyone[0] for sig in everyone):
        groups: dict[tuple, list[int]] = {}
        for rank, sig in enumerate(everyone):
            groups.setdefault(sig, []).append(rank)
        text = "; ".join(f"ranks {ranks}: {sig}" for sig, ranks in groups.items())
        raise MismatchError(f"{signature[0]}: the ranks disagree on (collective, count, dtype, op, "
                            f"algorithm, root): {text}")


def _run(comm: Comm, collective: str, name: str, params: dict[str, Any], arrays: dict[str, Any],
         layout_of: Any, op: Any, dtype: np.dtype, xp: Any) -> None:
    """Build (cached), bind and execute this rank's schedule."""
    sched = registry.schedule(collective, name, comm.rank, comm.size, **params)
    layouts = layout_of(sched.nblocks)
    count = arrays["recv"].shape[0]
    for scratch in sched.scratch():
        arrays[scratch] = xp.empty(count, dtype)
    kernel = reducer(op, dtype, xp).reduce if op is not None else None
    execute(bind(sched, arrays, layouts, kernel, xp), comm.private)


def allreduce(comm: Comm, sendbuf: Any, recvbuf: Any, op: Any, algorithm: str | None) -> None:
    """``MPI_Allreduce``: every rank gets the reduction of every rank's send buffer."""
    recv = parse(recvbuf, "recvbuf", writable=True)
    send: Buffer | None = None
    if not is_in_place(sendbuf):
        send = parse(sendbuf, "sendbuf")
        if send.count != recv.count:
            raise ValueError(f"recvbuf: Allreduce needs as many elements as sendbuf ({send.count}), "
                             f"got {recv.count}")
        if send.dtype != recv.dtype:
            raise TypeError(f"recvbuf: dtype {recv.dtype} differs from sendbuf's {send.dtype}")
        if send.xp is not recv.xp:
            raise TypeError("sendbuf and recvbuf must both be host arrays or both device arrays")
    check_op(op, recv.dtype)
    commutative = is_commutative(op)
    name, params = selection.choose("allreduce", algorithm, size=comm.size, nbytes=recv.nbytes,
                                    count=recv.count, commutative=commutative)
    _debug_check(comm, ("Allreduce", recv.count, str(recv.dtype), op_name(op), name, None))
    if recv.count == 0:
        return
    if recv.on_gpu:
        host_recv = backends.to_host(recv.array)
        host_send = backends.to_host(send.array) if send is not None else host_recv
        _run(comm, "allreduce", name, params, {"send": host_send, "recv": host_recv},
             lambda nb: {"recv": Layout.even(recv.count, nb)}, op, recv.dtype, np)
        backends.to_device(host_recv, recv.array)
        return
    arrays = {"send": send.array if send is not None else recv.array, "recv": recv.array}
    _run(comm, "allreduce", name, params, arrays, lambda nb: {"recv": Layout.even(recv.count, nb)},
         op, recv.dtype, recv.xp)
