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


# -- rooted collectives: the root talks to every other rank directly ------------------


@register("bcast", "linear", params=("root",))
def bcast(rank: int, size: int, root: int = 0):
    """The root sends the whole buffer to each other rank, all in one round."""
    tl = Timeline()
    for dst in range(size):
        if dst != root and rank == root:
            tl.send(0, dst, Block("recv", 0, 1))
    if rank != root:
        tl.recv(0, root, Block("recv", 0, 1))
    return 1, tl.rounds()


@register("gatherv", "linear", params=("root",))
@register("gather", "linear", params=("root",))
def gather(rank: int, size: int, root: int = 0):
    """Every rank sends its block r to the root, which receives all p - 1 at once (one round)."""
    tl = Timeline()
    own = Block("send", rank, rank + 1)
    if rank != root:
        tl.send(0, root, own)
        return size, tl.rounds()
    tl.copy(0, Block("recv", rank, rank + 1), own)
    for src in range(size):
        if src != root:
            tl.recv(0, src, Block("recv", src, src + 1))
    return size, tl.rounds()


@register("scatterv", "linear", params=("root",))
@register("scatter", "linear", params=("root",))
def scatter(rank: int, size: int, root: int = 0):
    """The root sends block r to rank r for every r, all in one round."""
    tl = Timeline()
    own = Block("recv", rank, rank + 1)
    if rank != root:
        tl.recv(0, root, own)
        return size, tl.rounds()
    tl.copy(0, own, Block("send", rank, rank + 1))
    for dst in range(size):
        if dst != root:
            tl.send(0, dst, Block("send", dst, dst + 1))
    return size, tl.rounds()


@register("reduce", "linear", params=("root",))
def reduce(rank: int, size: int, root: int = 0):
    """The root receives ranks 0, 1, ..., p-1 (not itself) one per round and folds them in rank order.

    Round t brings rank t (t < root) or t + 1 (t >= root).  Until the root's own
    part joins, the running fold of ranks 0 .. t lives in scratch ``tmp2`` (in
    place, ``recv`` still holds the root's own part); from then on in ``recv``.
    """
    tl = Timeline()
    whole = (0, 1)
    if rank != root:
        tl.send(rank if rank < root else rank - 1, root, Block("send", *whole))
        return 1, tl.rounds()
    cur = None  # the buffer holding the fold of the ranks so far
    for src in range(size):
        t = src if src < root else src - 1
        if src == root:
            if cur is not None:  # add our own part in round root - 1, after rank root - 1's
                tl.reduce(t, Block("recv", *whole), Block(cur, *whole), Block("send", *whole))
            cur = "recv" if cur is not None else "send"
        elif cur is None:  # rank 0's part starts the fold
            tl.recv(t, src, Block("tmp2", *whole))
            cur = "tmp2"
        else:
            tl.recv(t, src, Block("tmp", *whole))
            out = "recv" if src > root else "tmp2"
            tl.reduce(t, Block(out, *whole), Block(cur, *whole), Block("tmp", *whole))
            cur = out
    if cur == "send":  # p = 1
        tl.copy(0, Block("recv", *whole), Block("send", *whole))
    return 1, tl.rounds()
