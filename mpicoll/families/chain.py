"""Pipelined chains (and the pipelined tree broadcast they are the simplest case of).

The data is cut into k segments that flow down a tree one after the other, so
that every link is busy at once: with depth D the broadcast takes D + k - 1
rounds of n/k each instead of D rounds of n.  A chain (each rank forwards to the
next) has D = p - 1 but each rank sends the data only once: bandwidth-optimal
for long messages, latency-poor for short ones.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.families.dbtree import CHILD_SCRATCH, CHILDREN, combine_in_rank_order, pipelined_bcast_steps
from mpicoll.ir.schedule import Block, Scratch, Timeline


@register("bcast", "pipelined_chain", params=("root", "segments"))
def bcast(rank: int, size: int, root: int = 0, segments: int = 1):
    """Chain root -> root+1 -> ... (mod p), k segments: p + k - 2 rounds of n/k.

    Cost: (p + k - 2)(alpha + n/k beta) with k segments; best k is about sqrt((p - 2) n beta / alpha).

    When it wins: Large messages on few ranks: every link streams.

    Limitations: Latency grows linearly with p.
    """
    k = max(1, segments)
    tl = Timeline()
    pipelined_bcast_steps(tl, rank, size, root, [v - 1 for v in range(size)], range(k))
    return k, tl.rounds()


@register("reduce", "pipelined_chain", params=("root", "segments"), scratch={
    **CHILD_SCRATCH, "acc": Scratch("a non-root's partial result, passed on (it has no receive buffer)")})
def reduce(rank: int, size: int, root: int = 0, segments: int = 1):
    """Two chains into the root, 0 -> 1 -> ... -> root <- ... <- p-1, k segments, in rank order.

    Rank r < root receives the partial result of ranks 0 .. r-1 from r - 1 and
    passes 0 .. r on; rank r > root receives r+1 .. p-1 from r + 1 and passes
    r .. p-1 on; the root joins [0, root), its own part and (root, p).  Every
    partial covers contiguous ranks, so any op is reduced in rank order, and
    the chains are max(root, p-1-root) long instead of p - 1.  A rank at
    distance h from the far end of its chain (its height) sends segment j in
    round j + h; its child's segment j arrived in round j + h - 1.  Non-root
    ranks accumulate in ``acc``; each child's segments land in ``lower_child``
    or ``upper_child``.

    Cost: (ceil(p/2) + k - 1)(alpha + n/k (beta + gamma)) with k segments.

    When it wins: Large messages on few ranks.

    Limitations: Latency grows linearly with p.
    """
    k = max(1, segments)
    tl = Timeline()
    kids = [c for c in (rank - 1, rank + 1) if 0 <= c < size and (c < rank <= root or root <= rank < c)]
    parent = rank + 1 if rank < root else rank - 1 if rank > root else -1

    def height(r: int) -> int:  # length of the chain below r
        return r if r < root else size - 1 - r if r > root else max(root, size - 1 - root)

    scratch = dict(zip(kids, CHILDREN))
    h = height(rank)
    for j in range(k):
        one = (j, j + 1)
        for c in kids:
            tl.recv(j + height(c), c, Block(scratch[c], *one))
        result = combine_in_rank_order(tl, j + h - 1, rank, [(c, scratch[c]) for c in kids], one,
                                       acc="recv" if parent < 0 else "acc")
        if parent >= 0:
            tl.send(j + h, parent, Block(result, *one))
    return k, tl.rounds()
