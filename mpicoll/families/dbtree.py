"""Double binary tree all-reduce (two-tree, pipelined), as NCCL does it.

The data is cut in two halves of k segments each (blocks 0 .. k-1 and
k .. 2k-1).  Half t is reduced up tree t and broadcast back down it
(:mod:`mpicoll.families.trees`); both trees run at once.  Since a rank is
interior in at most one tree, each rank sends and receives about n in all,
while the latency grows with lg p instead of p.

Timing, with h(v) the height of v (leaves 0) and d(v) its depth (root 0):
  up:   v sends segment j to its parent in round j + h(v); a child c's
        segment j thus arrives in round j + h(c) <= j + h(v) - 1, so v has
        every child's part by round j + h(v) - 1 and adds them there;
  down: the root has segment j complete in round j + H - 1 (H its height)
        and sends it in round j + H; v receives it in round j + H + d(v) - 1
        and forwards it in the next.  Total: k + 2H - 1 rounds at most.
Each child's segments land in a scratch buffer of their own (``lower_child``
for the first child in rank order, ``upper_child`` for the second), so no two
messages share a block.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from mpicoll.families.catalog import register
from mpicoll.families.trees import tree
from mpicoll.ir.schedule import Block, Scratch, Timeline

CHILDREN = ("lower_child", "upper_child")   # by the children's ranks, in order
CHILD_SCRATCH = {"lower_child": Scratch("the partial sums of the lower-ranked child's subtree"),
                 "upper_child": Scratch("the partial sums of the higher-ranked child's subtree")}


def combine_in_rank_order(tl: Timeline, t: int, rank: int, parts: list[tuple[int, str]],
                          one: tuple[int, int], acc: str = "recv") -> str:
    """Add the children's parts to this rank's own, in rank order, into ``acc`` (``recv``).

    The own part (``send``) is used by the first step, so that an in-place call,
    where ``send`` is ``recv``, never reads it after it was overwritten.  Returns
    the buffer holding the sum (``send`` when there are no parts).  Each
    child's part must cover the ranks between its own rank and this one's.
    """
    operands = sorted([(rank, "send")] + parts)
    i = operands.index((rank, "send"))
    if len(operands) == 1:
        return "send"
    lo, hi = (i - 1, i + 1) if i > 0 else (0, 2)
    tl.reduce(t, Block(acc, *one), Block(operands[lo][1], *one), Block(operands[lo + 1][1], *one))
    for k in range(lo - 1, -1, -1):
        tl.reduce(t, Block(acc, *one), Block(operands[k][1], *one), Block(acc, *one))
    for k in range(hi, len(operands)):
        tl.reduce(t, Block(acc, *one), Block(acc, *one), Block(operands[k][1], *one))
    return acc


def tree_allreduce_steps(tl: Timeline, rank: int, size: int, which: int, blocks: range) -> None:
    """Reduce ``blocks`` up tree ``which`` and broadcast them back down, pipelined."""
    tr = tree(size, which)
    kids = sorted(tr.children[rank])
    scratch = dict(zip(kids, CHILDREN))
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
          keeps_order=lambda size: size % 2 == 0, scratch=CHILD_SCRATCH)
def allreduce(rank: int, size: int, segments: int = 1):
    """Two complementary binary trees, each reducing and broadcasting half the data, pipelined.

    Cost: about 4 h alpha + 2 n beta + n gamma plus the pipeline fill (h = ceil(lg p)), with enough segments.

    When it wins: Small and medium messages on many ranks (NCCL's tree algorithm): logarithmic latency and
    bandwidth within a constant of the ring's.

    Limitations: Needs segments to pipeline, and each segment costs an alpha per tree level.
    """
    tl = Timeline()
    k = max(1, segments)
    tree_allreduce_steps(tl, rank, size, 0, range(0, k))
    tree_allreduce_steps(tl, rank, size, 1, range(k, 2 * k))
    return 2 * k, tl.rounds()


@lru_cache(maxsize=256)
def _children_and_depth(parents: tuple[int, ...]) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Children lists and depths (label 0, the root, has depth 0) of a tree given by its parents."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    for x, p in enumerate(parents):
        if p >= 0:
            children[p].append(x)
    depth = [0] * n
    order = [0]
    for v in order:  # breadth first from the root
        for c in children[v]:
            depth[c] = depth[v] + 1
            order.append(c)
    if len(order) != n:
        raise ValueError("parents do not describe one tree rooted at label 0")
    return tuple(tuple(c) for c in children), tuple(depth)


def pipelined_bcast_steps(tl: Timeline, rank: int, size: int, root: int, parents: Sequence[int],
                          blocks: Sequence[int]) -> None:
    """Broadcast ``blocks`` of ``recv`` down a tree, one segment (block) per round per link.

    The tree is given over labels, relative ranks v = (rank - root) mod p, by
    ``parents[v]`` (-1 for label 0, the root).  A rank at depth d receives
    segment j in round j + d - 1 and forwards it to its children in round j + d:
    each link carries segment j one round after the link above it, so the last
    segment reaches depth D in round k + D - 2.
    """
    children, depth = _children_and_depth(tuple(parents))
    v = (rank - root) % size
    d = depth[v]
    for j, b in enumerate(blocks):
        seg = Block("recv", b, b + 1)
        if v != 0:
            tl.recv(j + d - 1, (parents[v] + root) % size, seg)
        for c in children[v]:
            tl.send(j + d, (c + root) % size, seg)


def rerooted_tree1(size: int) -> tuple[int, ...]:
    """Parents of tree 1 over labels 0 .. p-1, re-hung so that label 0 is its root.

    Tree 1 has its root at label p-1 (p even) or 1 (p odd), not at label 0,
    which is a leaf of it (p even) or interior with one child (p odd).  We cut
    label 0 from its parent and hang tree 1's root under label 0: one more hop
    for the part of tree 1 above label 0, and the two trees keep their
    complementary interiors, so label 0 (the root) sends each half once or
    twice and every other rank forwards at most about n in all.
    """
    tr = tree(size, 1)
    parents = list(tr.parent)
    parents[tr.root] = 0
    parents[0] = -1
    return tuple(parents)


@register("bcast", "double_binary_tree", params=("root", "segments"))
def bcast(rank: int, size: int, root: int = 0, segments: int = 1):
    """Two complementary binary trees from the root, each pipelining half the segments.

    Ranks are relabelled relative to the root (label v = rank - root mod p) so
    that tree 0's root, label 0, is the root; tree 1 is re-hung from label 0
    (:func:`rerooted_tree1`).  Blocks 0 .. k-1 go down tree 0, k .. 2k-1 down
    tree 1, both at once.

    Cost: about 2 h alpha + n beta plus the pipeline fill, with enough segments.

    When it wins: Medium and large messages on many ranks.

    Limitations: Needs segments to pipeline; each costs one alpha per level.
    """
    k = max(1, segments)
    tl = Timeline()
    pipelined_bcast_steps(tl, rank, size, root, tree(size, 0).parent, range(0, k))
    pipelined_bcast_steps(tl, rank, size, root, rerooted_tree1(size), range(k, 2 * k))
    return 2 * k, tl.rounds()
