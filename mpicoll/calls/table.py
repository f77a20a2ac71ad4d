"""The collectives as ``mpicoll.Comm`` runs them, by mpi4py method name: :data:`TABLE`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Collective", "TABLE", "VALUE_ARGS", "METHODS"]


@dataclass(frozen=True)
class Collective:
    """One collective as ``mpicoll.Comm`` runs it.

    ``prepare(comm, *args, algorithm=)`` checks and binds a call; ``values`` are
    the positions of arguments that are counts given by value, not buffers (part
    of the plan cache's key by value); ``cacheable(*args)``, when given, says
    whether a call may reuse a cached plan; ``exchange(private, *args)``, when
    given, is the collective's own first step, made by every rank before any
    check: it returns the arguments with what the ranks must tell each other
    filled in (``Reduce_scatter``'s ``recvcounts=None``).
    """

    method: str
    prepare: Callable[..., Any]
    values: tuple[int, ...] = ()
    cacheable: Callable[..., bool] | None = None
    exchange: Callable[..., tuple] | None = None


METHODS = ("Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
           "Allgatherv", "Reduce_scatter_block", "Reduce_scatter", "Alltoall", "Alltoallv", "Alltoallw", "Scan",
           "Exscan", "Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv",
           "Neighbor_alltoallw")


def _table() -> dict[str, Collective]:
    table = {}
    for method in METHODS:
        module = importlib.import_module(f"mpicoll.calls.{method.lower()}")
        table[method] = Collective(method, module.prepare, getattr(module, "VALUE_ARGS", ()),
                                   getattr(module, "cacheable", None), getattr(module, "exchange", None))
    return table


#: every collective, by mpi4py method name
TABLE: dict[str, Collective] = _table()
#: the positions of arguments given by value, by method (read by the compiled hot path)
VALUE_ARGS: dict[str, tuple[int, ...]] = {m: c.values for m, c in TABLE.items() if c.values}
