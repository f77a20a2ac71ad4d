"""The dissemination barrier (Hensgen, Finkel and Manber): ceil(lg p) rounds, any p.

In round k rank r signals r + 2^k and waits for r - 2^k.  By induction, after
round k rank r has heard (directly or through others) from the 2^(k+1) ranks
r - 2^(k+1) + 1 .. r, so after ceil(lg p) rounds from everyone: no rank leaves
before all have arrived.  Messages are empty.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Timeline


@register("barrier", "dissemination")
def barrier(rank: int, size: int):
    """Round k: empty message to rank + 2^k, one from rank - 2^k.

    Cost: ceil(lg p) alpha.

    When it wins: Always, for p > 2: the fewest rounds for any p.
    """
    tl = Timeline()
    for k in range((size - 1).bit_length()):
        tl.send(k, (rank + (1 << k)) % size, Block("send", 0, 1))
        tl.recv(k, (rank - (1 << k)) % size, Block("recv", 0, 1))
    return 1, tl.rounds()
