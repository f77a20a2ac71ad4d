"""One module per collective: its argument checks and its binding.

Each module ``mpicoll.calls.<collective>`` defines ``prepare(comm, ...)``: it
validates a call's arguments (before any message), chooses the algorithm and
returns a :class:`~mpicoll.runtime.plan.Plan` (or None when there is nothing to do),
which the blocking, nonblocking and persistent paths run.  ``comm`` is a
:class:`~mpicoll.runtime.state.Preparation`: everything the communicator's ranks
agreed on is in it, so preparing sends no message.  Each module also registers
the collective's "auto" rule.

:data:`TABLE` lists the collectives by mpi4py method name.  What each
collective computes (its contract, for the checker and the simulator) is in
:mod:`mpicoll.ir.contracts`, which needs no MPI; :func:`spec` is re-exported here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mpicoll.errors import MismatchError
from mpicoll.ir.contracts import Spec, Value, own, spec

__all__ = ["Spec", "Value", "spec", "MismatchError", "debug_check", "own", "Collective", "TABLE", "VALUE_ARGS"]


def debug_check(comm: Any, collective: str, **fields: Any) -> None:
    """Record this rank's signature of the call being prepared (labelled fields, see
    :data:`mpicoll.runtime.debug.FIELDS`), for the careful path to compare across ranks.

    Called by each collective's ``prepare`` after its own checks; does nothing
    unless the communicator was made with ``MPICOLL_DEBUG`` set.  Sends nothing.
    """
    if not comm.debug:
        return
    signature = {"collective": collective}
    signature.update((k, _plain(v)) for k, v in fields.items() if v is not None)
    comm.signature = signature


def _plain(value: Any) -> Any:
    """A field's value as something comparable and readable (dtypes and ops by name, lists as tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


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
           "Exscan")


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
