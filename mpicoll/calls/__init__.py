"""One module per collective: its argument checks and its binding.

Each module ``mpicoll.calls.<collective>`` defines ``prepare(comm, ...)``: it
validates a call's arguments (before any message), chooses the algorithm and
returns a :class:`~mpicoll.program.plan.Plan` (or None when there is nothing to do),
which the blocking, nonblocking and persistent paths run.  ``comm`` is a
:class:`~mpicoll.program.state.Preparation`: everything the communicator's ranks
agreed on is in it, so preparing sends no message.  What "auto" picks is the
collective's rule in :mod:`mpicoll.selection.rules`, tabulated in each module's docstring.

:data:`mpicoll.calls.table.TABLE` lists the collectives by mpi4py method name.  What each
collective computes (its contract, for the checker and the simulator) is in
:mod:`mpicoll.ir.contracts`, which needs no MPI; :func:`spec` is re-exported here.
"""

from __future__ import annotations

from typing import Any

from mpicoll.errors import MismatchError
from mpicoll.ir.contracts import Spec, Value, own, spec

__all__ = ["Spec", "Value", "spec", "MismatchError", "debug_check", "own"]


def debug_check(comm: Any, collective: str, **fields: Any) -> None:
    """Record this rank's signature of the call being prepared (labelled fields, see
    :data:`mpicoll.engine.debug.FIELDS`): what every rank must agree on.  The call's messages carry it
    (:mod:`mpicoll.engine.mismatch`), and the careful path (``MPICOLL_DEBUG``) compares it across ranks.

    Called by each collective's ``prepare`` after its own checks.  Sends nothing.
    """
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
