"""Pairwise exchange: p - 1 steps; in step s rank r sends to r + s and receives from r - s.

Every rank exchanges exactly once with every other rank, one partner per step,
and each message carries only what that partner needs: n/p of the data, so
(p-1)/p n in all, with p - 1 latencies.  Works for any p.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Scratch, Timeline


@register("alltoall", "pairwise")
@register("alltoallv", "pairwise")
@register("alltoallw", "pairwise")
def alltoall(rank: int, size: int):
    """Step s = 1 .. p-1: send block r + s to rank r + s, receive block r - s from rank r - s.

    Cost: (p-1) alpha + (p-1)/p n beta.

    When it wins: Large messages: one partner per step, so no link or receiver is oversubscribed.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    tl.copy(0, Block("recv", rank, rank + 1), Block("send", rank, rank + 1))
    for s in range(1, size):
        dst, src = (rank + s) % size, (rank - s) % size
        tl.send(s - 1, dst, Block("send", dst, dst + 1))
        tl.recv(s - 1, src, Block("recv", src, src + 1))
    return size, tl.rounds()


_RS_SCRATCH = {"incoming": Scratch("a part of block r, just received", like="send"),
               "lower": Scratch("the sum of ranks r-s .. r (grows to the left)", like="send"),
               "upper": Scratch("the sum of ranks src .. p-1 (grows to the left)", like="send")}


@register("reduce_scatter_block", "pairwise", scratch=_RS_SCRATCH)
@register("reduce_scatter", "pairwise", scratch=_RS_SCRATCH)
def reduce_scatter(rank: int, size: int):
    """Step s = 1 .. p-1: send block r + s to rank r + s, add rank r - s's part of block r.

    The parts of block r arrive from ranks r-1, r-2, ..., 0, then p-1, p-2, ...,
    r+1, each into ``incoming``.  To keep rank order, two sums grow to the left:
    ``lower`` = part(r-s) o lower covers ranks [r-s, r], ``upper`` covers
    [src, p); the last step forms lower o upper in ``recv``.

    Cost: (p-1) alpha + (p-1)/p n (beta + gamma).

    When it wins: Large messages, and reductions in a fixed order independent of the network.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    one = (rank, rank + 1)
    lower, upper = "send", None  # the buffers holding the two sums so far
    for s in range(1, size):
        t, dst, src = s - 1, (rank + s) % size, (rank - s) % size
        tl.send(t, dst, Block("send", dst, dst + 1))
        if upper is None and src < rank:      # lower part: ranks r-1 down to 0
            tl.recv(t, src, Block("incoming", *one))
            out = "recv" if s == size - 1 else "lower"
            tl.reduce(t, Block(out, *one), Block("incoming", *one), Block(lower, *one))
            lower = out
        elif upper is None:                   # the first upper part: rank p-1
            tl.recv(t, src, Block("upper", *one))
            upper = "upper"
        else:                                 # ranks p-2 down to r+1
            tl.recv(t, src, Block("incoming", *one))
            tl.reduce(t, Block("upper", *one), Block("incoming", *one), Block("upper", *one))
        if upper is not None and s == size - 1:
            tl.reduce(t, Block("recv", *one), Block(lower, *one), Block("upper", *one))
    return size, tl.rounds()
