"""Exscan: exclusive prefix reduction; rank i > 0 gets ranks 0..i-1 reduced, in rank order.

Rank 0's ``recvbuf`` is left untouched (MPI leaves it undefined).

"auto" picks:

=========  ==================
condition  algorithm
=========  ==================
p <= 2     linear (a chain)
otherwise  recursive_doubling
=========  ==================

Both algorithms keep rank order.  ``sendbuf`` ``IN_PLACE`` (or None): the input
is in ``recvbuf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mpicoll.calls import scan as _scan
from mpicoll.program.plan import Plan

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, op: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Exscan`` call and bind its schedule; None when the count is 0."""
    return _scan.prepare_prefix(comm, "exscan", "Exscan", sendbuf, recvbuf, op, algorithm)
