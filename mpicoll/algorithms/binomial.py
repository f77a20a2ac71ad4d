"""Binomial trees: the classic lg p-step trees for rooted collectives.

Ranks are renumbered relative to the root, v = (rank - root) mod p.  In a
binomial tree the children of v are v + 2^k for every 2^k below v's lowest set
bit (all 2^k < p - v for the root), and the subtree of v + 2^k is the range
[v + 2^k, v + 2^(k+1)).  So a reduction that takes children in increasing k adds
contiguous ranges in order, which keeps rank order when the root is 0.
"""

from __future__ import annotations

from ..registry import register
from ..schedule import Block, Timeline


def height(size: int) -> int:
    """ceil(lg p): rounds of a binomial tree over ``size`` ranks."""
    return (size - 1).bit_length()


def reduce_steps(tl: Timeline, t0: int, rank: int, size: int, root: int, blocks: tuple[int, int], *,
                 src: str = "send", acc: str = "recv", tmp: str = "tmp") -> str:
    """Binomial reduce to ``root`` in rounds ``t0 .. t0 + ceil(lg p) - 1``.

    In step k, a rank whose relative rank v has bit k set sends its partial
    result to v - 2^k and is done; the others receive from v + 2^k (if it
    exists) and append it on the right.  Returns the buffer holding the root's
    result (``acc``, or ``src`` when p = 1).
    """
    v = (rank - root) % size
    cur = src
    for k in range(height(size)):
        bit = 1 << k
        if v & bit:
            tl.send(t0 + k, (rank - bit) % size, Block(cur, *blocks))
            break
        if v + bit < size:
            tl.recv(t0 + k, (rank + bit) % size, Block(tmp, *blocks))
            tl.reduce(t0 + k, Block(acc, *blocks), Block(cur, *blocks), Block(tmp, *blocks))
            cur = acc
    return cur


def bcast_steps(tl: Timeline, t0: int, rank: int, size: int, root: int, blocks: tuple[int, int], *,
                src: str = "recv", dst: str = "recv") -> None:
    """Binomial broadcast from ``root`` in rounds ``t0 .. t0 + ceil(lg p) - 1``.

    Step j uses distance 2^(h-1-j): a rank v that already has the data
    (v a multiple of 2 * distance) sends to v + distance.  The root sends from
    ``src``, everyone else receives into and forwards from ``dst``.
    """
    v = (rank - root) % size
    h = height(size)
    for j in range(h):
        dist = 1 << (h - 1 - j)
        if v % (2 * dist) == 0 and v + dist < size:
            tl.send(t0 + j, (rank + dist) % size, Block(src if v == 0 else dst, *blocks))
        elif v % (2 * dist) == dist:
            tl.recv(t0 + j, (rank - dist) % size, Block(dst, *blocks))


@register("allreduce", "binomial")
def allreduce(rank: int, size: int):
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast: 2 ceil(lg p) steps."""
    tl = Timeline()
    whole = (0, 1)
    result = reduce_steps(tl, 0, rank, size, 0, whole)
    if result == "send":  # p = 1
        tl.copy(0, Block("recv", *whole), Block("send", *whole))
    bcast_steps(tl, height(size), rank, size, 0, whole)
    return 1, tl.rounds()
