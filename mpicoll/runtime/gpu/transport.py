"""Which transport moves a collective's device buffers: CUDA IPC, pipelined staging, or a CUDA-aware MPI.

``MPICOLL_GPU_TRANSPORT`` chooses: ``ipc``, ``staged``, ``cuda-aware`` or
``auto`` (the default).  ``auto`` takes

1. ``cuda-aware`` when the MPI library can read device memory itself (see
   :func:`cuda_aware_mpi`; ``MPICOLL_CUDA_AWARE=1|0`` overrides the query);
2. ``ipc`` when every rank of the communicator is on this node (found with
   ``Split_type(COMM_TYPE_SHARED)``) and the call is blocking;
3. ``staged`` otherwise.

A transport asked for by name that cannot run (IPC across nodes, CUDA-aware
without such an MPI) is an error, not a silent substitution.  Every rank makes
the same choice: it depends only on the environment, the communicator and the
call, which all ranks share.  Nonblocking and persistent calls never use IPC
(its rounds are synchronised in the executor, which the request engine does not
run): they stage.  Reductions with user ops also stage, since a user function
expects host memory.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from mpi4py import MPI

__all__ = ["Choice", "choose", "cuda_aware_mpi", "parse_alloc_kinds", "node_local", "TRANSPORTS"]

TRANSPORTS = ("ipc", "staged", "cuda-aware", "auto")


@dataclass(frozen=True)
class Choice:
    """A transport and why it was chosen (what ``MPICOLL_DEBUG=2`` prints)."""

    name: str
    reason: str


def choose(comm: Any, *, blocking: bool, host_ops: bool, env: Any = None) -> Choice:
    """The transport for one call on ``comm`` (an :class:`mpicoll.Comm` or an ``MPI.Comm``).

    ``blocking`` is False for nonblocking and persistent calls; ``host_ops``
    is True when the reduction must run on the host (a user op).
    """
    env = os.environ if env is None else env
    asked = env.get("MPICOLL_GPU_TRANSPORT", "auto").strip().lower() or "auto"
    if asked not in TRANSPORTS:
        raise ValueError(f"MPICOLL_GPU_TRANSPORT={asked!r}: expected one of {', '.join(TRANSPORTS)}")
    aware, why_aware = cuda_aware_mpi(env)
    if asked == "cuda-aware":
        if not aware:
            raise RuntimeError(f"MPICOLL_GPU_TRANSPORT=cuda-aware, but {why_aware}")
        return Choice("cuda-aware", f"asked for; {why_aware}")
    if asked == "staged":
        return Choice("staged", "asked for")
    if asked == "auto" and aware:
        return Choice("cuda-aware", why_aware)
    why = "ipc asked for, but " if asked == "ipc" else ""
    if not blocking:
        return Choice("staged", why + "nonblocking and persistent calls stage")
    local = node_local(comm)   # collective: blocking calls only, which every rank makes in the same order
    if not local:
        if asked == "ipc":
            raise RuntimeError("MPICOLL_GPU_TRANSPORT=ipc, but the communicator spans more than one node")
        return Choice("staged", "the communicator spans more than one node")
    if host_ops:
        return Choice("staged", why + "the reduction runs on the host (a user op, MINLOC or MAXLOC)")
    return Choice("ipc", ("asked for; " if asked == "ipc" else "") + "every rank on this node")


def cuda_aware_mpi(env: Any = None) -> tuple[bool, str]:
    """Whether the MPI library accepts device buffers, and how that was found.

    ``MPICOLL_CUDA_AWARE=1|0`` decides when set.  Otherwise the library is
    asked: the MPI-4.1 info key ``mpi_memory_alloc_kinds`` of
    ``COMM_WORLD`` (a ``cuda`` kind), then Open MPI's
    ``MPIX_Query_cuda_support()``.  Anything else counts as not CUDA-aware.
    """
    env = os.environ if env is None else env
    forced = env.get("MPICOLL_CUDA_AWARE", "").strip()
    if forced:
        if forced not in ("0", "1"):
            raise ValueError(f"MPICOLL_CUDA_AWARE={forced!r}: expected 1 or 0")
        return forced == "1", f"MPICOLL_CUDA_AWARE={forced}"
    cached = _AWARE.get("query")
    if cached is None:
        cached = _AWARE["query"] = _query_library()
    return cached


_AWARE: dict[str, tuple[bool, str]] = {}


def _query_library() -> tuple[bool, str]:
    kinds = None
    try:
        info = MPI.COMM_WORLD.Get_info()
        try:
            kinds = info.Get("mpi_memory_alloc_kinds")
        finally:
            info.Free()
    except Exception:
        kinds = None
    if kinds and parse_alloc_kinds(kinds):
        return True, f"the MPI library lists memory kinds {kinds!r}"
    try:
        query = ctypes.CDLL(None).MPIX_Query_cuda_support   # Open MPI's extension, when its symbols are global
    except (OSError, AttributeError):
        return False, "the MPI library does not say it is CUDA-aware"
    query.restype = ctypes.c_int
    if query():
        return True, "MPIX_Query_cuda_support() = 1"
    return False, "MPIX_Query_cuda_support() = 0"


def parse_alloc_kinds(kinds: str) -> bool:
    """True when an ``mpi_memory_alloc_kinds`` value lists CUDA device memory.

    The value is a comma-separated list of ``kind[:restrictor...]``, e.g.
    ``"system,mpi,cuda:device,cuda:host"``; plain ``cuda`` means all CUDA memory.
    """
    for item in kinds.split(","):
        kind, *restrictors = item.strip().split(":")
        if kind == "cuda" and (not restrictors or "device" in restrictors or "managed" in restrictors):
            return True
    return False


def node_local(comm: Any) -> bool:
    """Whether every rank of ``comm`` is on this node (collective on first use; then kept on the communicator).

    ``comm`` is an :class:`mpicoll.Comm` (the answer is kept in it, and the
    query runs on its private duplicate) or an ``MPI.Comm`` (asked each time).
    The answer is the same on every rank: the node communicator has the
    communicator's size on all ranks or on none.
    """
    kept = getattr(comm, "__dict__", {}).get("_node_local")
    if kept is not None:
        return kept
    mpi_comm = getattr(comm, "private", comm)
    node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        local = bool(mpi_comm.allreduce(node.Get_size() == mpi_comm.Get_size(), op=MPI.LAND))
    finally:
        node.Free()
    if hasattr(comm, "__dict__"):
        comm.__dict__["_node_local"] = local
    return local
