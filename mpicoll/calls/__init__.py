"""One module per collective: its argument checks and its binding.

Each module ``mpicoll.calls.<collective>`` defines ``prepare(comm, ...)``: it
validates a call's arguments (before any message), chooses the algorithm and
returns a :class:`~mpicoll.runtime.plan.Plan` (or None when there is nothing to do),
which the blocking, nonblocking and persistent paths run (``mpicoll.runtime.plan``
holds the plan and its cache), and registers the collective's "auto" rule.

What each collective computes (its contract, for the checker and the
simulator) is in :mod:`mpicoll.ir.contracts`, which needs no MPI; :func:`spec`
is re-exported here.
"""

from __future__ import annotations

from mpicoll.ir.contracts import Spec, Value, own, spec
from mpicoll.runtime.debug import MismatchError, debug_check

__all__ = ["Spec", "Value", "spec", "MismatchError", "debug_check", "own"]
