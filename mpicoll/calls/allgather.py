"""Allgather: every rank gets every rank's block, in rank order.

"auto" picks (a rule table; the cost model calibrates it later):

======================================================  ====================
condition (n = bytes received in all)                   algorithm
======================================================  ====================
n < 64 KiB                                              bruck
p a power of two and n < 1 MiB                          recursive_doubling
otherwise                                               ring
======================================================  ====================

``sendbuf`` ``IN_PLACE`` (or None): the rank's block is already in ``recvbuf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import errors, nodes, selection
from ..buffers import is_in_place, parse, parse_blocks
from ..layout import Layout
from ..plan import Plan, make_plan
from ..selection import KiB, MiB
from . import Spec, debug_check, own
from ._checks import check_pair
from ._nonrooted import contiguous

if TYPE_CHECKING:
    from ..comm import Comm


def simulate_setup(inputs: list[np.ndarray], nblocks: int, in_place: bool = False) -> list[tuple[dict, dict, str]]:
    """Rank r sends ``inputs[r]`` (any lengths: also Allgatherv's); blocks lie one after the other."""
    recv = contiguous([len(x) for x in inputs])
    out = []
    for r, x in enumerate(inputs):
        if in_place:
            buf = np.zeros(recv.ends[-1] if inputs else 0, x.dtype)
            buf[recv.starts[r]:recv.ends[r]] = x
            out.append(({"recv": buf}, {"recv": recv, "send": recv}, "recv"))
        else:
            out.append(({"send": x.copy(), "recv": np.empty(recv.ends[-1], x.dtype)},
                        {"recv": recv, "send": Layout.only(r, len(x), nblocks)}, "recv"))
    return out


SPEC = Spec(
    "allgather", reduces=False, in_place=True,
    inputs=lambda r, p, nb, **_: {"send": [own(r, b) if b == r else None for b in range(nb)]},
    outputs=lambda r, p, nb, **_: {"recv": [own(b, b) for b in range(nb)]},
    simulate=simulate_setup,
)


@selection.auto_rule("allgather")
def auto(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    if nbytes < 64 * KiB:
        return "bruck"
    if size & (size - 1) == 0 and nbytes < MiB:
        return "recursive_doubling"
    return "ring"


def prepare(comm: Comm, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Allgather`` call and bind its schedule; None when there is nothing to move."""
    p, r = comm.size, comm.rank
    recv = parse_blocks(recvbuf, "recvbuf", p, writable=True)
    count = recv.count // p
    layout = Layout.v([count] * p, [b * count for b in range(p)])
    if is_in_place(sendbuf):
        send_array, send_layout = recv.array, layout
    else:
        send = parse(sendbuf, "sendbuf")
        check_pair(recv, send)
        if send.count != count:
            raise errors.CountError(f"recvbuf: Allgather needs {send.count} elements per rank (sendbuf's count), "
                             f"got blocks of {count}")
        send_array, send_layout = send.array, Layout.only(r, count, p)
    name, params = selection.choose("allgather", algorithm, size=p, nbytes=recv.nbytes, count=recv.count,
                                    nodes=lambda: nodes.of_comm(comm))
    debug_check(comm, "Allgather", count=count, dtype=recv.dtype, algorithm=name)
    if count == 0:
        return None
    return make_plan(comm, "allgather", name, params, {"send": send_array, "recv": recv.array},
                     lambda nb: {"recv": layout, "send": send_layout}, dtype=recv.dtype)
