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
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mpi4py import MPI

from mpicoll import config

__all__ = ["Choice", "choose", "asked_for", "cuda_aware_mpi", "parse_alloc_kinds", "node_local", "TRANSPORTS"]

TRANSPORTS = config.GPU_TRANSPORTS

#: the transport :func:`asked_for` names for the calls made inside it (None: the configuration's)
_ASKED: ContextVar[str | None] = ContextVar("mpicoll_gpu_transport", default=None)


@contextmanager
def asked_for(name: str) -> Iterator[None]:
    """Ask for transport ``name`` (as ``MPICOLL_GPU_TRANSPORT`` would) for the plans first run inside.

    A plan keeps the transport chosen on its first run, so a benchmark times
    several transports side by side on separate buffers without reading the
    environment again (which would make every communicator's plans anew).
    """
    if name not in TRANSPORTS:
        raise ValueError(f"GPU transport: expected one of {', '.join(TRANSPORTS)}, got {name!r}")
    token = _ASKED.set(name)
    try:
        yield
    finally:
        _ASKED.reset(token)


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
    asked = (config.current() if env is None else config.read(env)).gpu_transport
    if env is None and _ASKED.get() is not None:
        asked = _ASKED.get()
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
    local = node_local(comm)   # the layout agreed when the communicator was made
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
    forced = (config.current() if env is None else config.read(env)).cuda_aware
    if forced is not None:
        return forced, f"MPICOLL_CUDA_AWARE={int(forced)}"
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
    """Whether every rank of ``comm`` is on this node.

    ``comm`` is a communicator's state or preparation (its node layout, agreed
    when it was made, says so without a message) or an ``MPI.Comm`` (asked:
    collective).  The answer is the same on every rank.
    """
    if hasattr(comm, "nodes"):
        return comm.nodes is None
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return bool(comm.allreduce(node.Get_size() == comm.Get_size(), op=MPI.LAND))
    finally:
        node.Free()
