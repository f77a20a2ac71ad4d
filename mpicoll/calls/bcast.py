"""Bcast: the root's buffer is copied to every rank.

"auto" picks (a rule table, not yet calibrated by measurement):

============================  ==================
condition                     algorithm
============================  ==================
p <= 2, or fewer than 16 KiB  binomial
fewer than 512 KiB            scatter_allgather
p <= 8                        pipelined_chain
otherwise                     double_binary_tree
============================  ==================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_root
from mpicoll.data.buffers import parse
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan, make_plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, buf: Any, root: Any, *, algorithm: str | None) -> Plan | None:
    """Check a ``Bcast`` call and bind its schedule; None when the count is 0.

    The root's buffer is only read (it may be read-only, as in mpi4py).
    """
    root = check_root(root, comm.size, "Bcast")
    b = parse(buf, "buf", writable=comm.rank != root)
    name, params = selection.choose("bcast", algorithm, size=comm.size, nbytes=b.nbytes, count=b.count,
                                    nodes=comm.nodes, agreed=comm.agreed)
    params["root"] = root
    debug_check(comm, "Bcast", count=b.count, dtype=b.dtype, root=root, algorithm=name)
    if b.count == 0:
        return None
    return make_plan(comm, "bcast", name, params, {"recv": b.array},
                     lambda nb: {"recv": Layout.even(b.count, nb, b.unit)}, dtype=b.dtype)
