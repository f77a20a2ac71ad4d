"""Linear algorithms: one rank talks to all others, one at a time.

The parameter-server pattern: rank 0 receives every contribution in rank order,
reduces, and sends the result back to everyone.  p - 1 rounds in, one round out;
simple, order-keeping, and a useful baseline.
"""

from __future__ import annotations

from ..registry import register
from ..schedule import Block, Timeline


@register("allreduce", "linear")
def allreduce(rank: int, size: int):
    """Rank 0 receives from 1, 2, ..., p-1 in turn, reduces, and sends the result to all."""
    tl = Timeline()
    whole = (0, 1)
    if rank == 0:
        cur = "send"
        for src in range(1, size):  # round src - 1: receive rank src's part
            tl.recv(src - 1, src, Block("tmp", *whole))
            tl.reduce(src - 1, Block("recv", *whole), Block(cur, *whole), Block("tmp", *whole))
            cur = "recv"
        if size == 1:
            tl.copy(0, Block("recv", *whole), Block("send", *whole))
        for dst in range(1, size):
            tl.send(size - 1, dst, Block("recv", *whole))
    else:
        tl.send(rank - 1, 0, Block("send", *whole))
        tl.recv(size - 1, 0, Block("recv", *whole))
    return 1, tl.rounds()
