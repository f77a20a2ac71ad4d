"""Barrier: no rank leaves before every rank has entered.

The schedules move empty messages: the spec has one empty block per rank
(``recv`` and ``send`` are zero-length arrays), so every executor runs a barrier
like any other collective.  "auto" always picks ``dissemination`` (ceil(lg p)
rounds, any p); ``linear`` (everyone to rank 0 and back) is the baseline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mpicoll.calls import debug_check
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def _empty(nblocks: int) -> Layout:
    return Layout([0] * nblocks, [0] * nblocks)


def prepare(comm: Preparation, *, algorithm: str | None) -> Plan | None:
    """Choose the barrier's algorithm and bind its (empty) buffers; None on one rank."""
    name, params = selection.choose("barrier", algorithm, size=comm.size, nbytes=0, count=0,
                                    nodes=comm.nodes, agreed=comm.agreed)
    debug_check(comm, "Barrier", algorithm=name)
    if comm.size == 1:
        return None
    arrays = {"send": np.empty(0, np.uint8), "recv": np.empty(0, np.uint8)}
    return make_plan(comm, "barrier", name, params, arrays,
                     lambda nb: {"send": _empty(nb), "recv": _empty(nb)}, dtype=np.dtype(np.uint8))
