"""Double binary tree all-reduce (two-tree, pipelined), as NCCL does it.

The data is cut in two halves of k segments each (blocks 0 .. k-1 and
k .. 2k-1).  Half t is reduced up tree t and broadcast back down it
(:mod:`mpicoll.algorithms.trees`); both trees run at once.  Since a rank is
interior in at most one tree, each rank sends and receives about n in all,
while the latency grows with lg p instead of p.

Timing, with h(v) the height of v (leaves 0) and d(v) its depth (root 0):
  up:   v sends segment j to its parent in round j + h(v); a child c's
        segment j thus arrives in round j + h(c) <= j + h(v) - 1, so v has
        every child's part by round j + h(v) - 1 and adds them there;
  down: the root has segment j complete in round j + H - 1 (H its height)
        and sends it in round j + H; v receives it in round j + H + d(v) - 1
        and forwards it in the next.  Total: k + 2H - 1 rounds at most.
Each child's segments land in a scratch buffer of their own (tmp for the first
child in rank order, tmp2 for the second), so no two messages share a block.
"""

from __future__ import annotations

from ..registry import register
from ..schedule import Block, Timeline
from .trees import tree


def combine_in_rank_order(tl: Timeline, t: int, rank: int, parts: list[tuple[int, str]],
                          one: tuple[int, int]) -> str:
    """Add the children's parts to this rank's own, in rank order, into ``recv``.

    The own part (``send``) is used by the first step, so that an in-place call,
    where ``send`` is ``recv``, never reads it after it was overwritten.  Returns
    the buffer holding the sum (``send`` when there are no parts).
    """
    operands = sorted([(rank, "send")] + parts)
    i = operands.index((rank, "send"))
    if len(operands) == 1:
        return "send"
    lo, hi = (i - 1, i + 1) if i > 0 else (0, 2)
    tl.reduce(t, Block("recv", *one), Block(operands[lo][1], *one), Block(operands[lo + 1][1], *one))
    for k in range(lo - 1, -1, -1):
        tl.reduce(t, Block("recv", *one), Block(operands[k][1], *one), Block("recv", *one))
    for k in range(hi, len(operands)):
        tl.reduce(t, Block("recv", *one), Block("recv", *one), Block(operands[k][1], *one))
    return "recv"


def tree_allreduce_steps(tl: Timeline, rank: int, size: int, which: int, blocks: range) -> None:
    """Reduce ``blocks`` up tree ``which`` and broadcast them back down, pipelined."""
    tr = tree(size, which)
    kids = sorted(tr.children[rank])
    scratch = dict(zip(kids, ("tmp", "tmp2")))
    h, top, d = tr.height[rank], tr.height[tr.root], tr.depth[rank]
    parent = tr.parent[rank]
    for j, b in enumerate(blocks):
        one = (b, b + 1)
        for c in kids:
            tl.recv(j + tr.height[c], c, Block(scratch[c], *one))
        result = combine_in_rank_order(tl, j + h - 1, rank, [(c, scratch[c]) for c in kids], one)
        if parent >= 0:
            tl.send(j + h, parent, Block(result, *one))
    for j, b in enumerate(blocks):
        one = (b, b + 1)
        if parent >= 0:
            tl.recv(j + top + d - 1, parent, Block("recv", *one))
        for c in tr.children[rank]:
            tl.send(j + top + d, c, Block("recv", *one))


@register("allreduce", "double_binary_tree", params=("segments",),
          keeps_order=lambda size: size % 2 == 0 or size == 1)
def allreduce(rank: int, size: int, segments: int = 1):
    """Two complementary binary trees, each reducing and broadcasting half the data, pipelined."""
    tl = Timeline()
    k = max(1, segments)
    if size == 1:
        tl.copy(0, Block("recv", 0, 2 * k), Block("send", 0, 2 * k))
        return 2 * k, tl.rounds()
    tree_allreduce_steps(tl, rank, size, 0, range(0, k))
    tree_allreduce_steps(tl, rank, size, 1, range(k, 2 * k))
    return 2 * k, tl.rounds()
