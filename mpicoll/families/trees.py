"""Binary trees for the double binary tree (two-tree) algorithms, as in NCCL.

Tree 0 over ranks 0 .. n-1 is an in-order binary tree: rank r with lowest set
bit b has children r - b/2 and r + b/2 (the latter, or the nearest r + b/2^j that
exists) and the subtree of r is the range [r - b + 1, r + b - 1].  Odd ranks are
leaves; rank 0 is the root with the single child 2^(ceil(lg n) - 1).

Tree 1 is tree 0 mirrored (n even: x -> n-1-x) or shifted (n odd:
x -> x+1 mod n), so that the leaves of one tree are the interior ranks of the
other: summed over both trees every rank has at most two children, and each
tree has height ceil(lg n).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["btree", "Tree", "tree"]


def btree(n: int, r: int) -> tuple[int, list[int]]:
    """(parent, children) of rank ``r`` in tree 0 over ``n`` ranks; parent -1 at the root."""
    if r == 0:
        top = 1 << (n - 1).bit_length()  # smallest power of two >= n
        return -1, ([top >> 1] if n > 1 else [])
    bit = r & -r
    parent = (r ^ bit) | (bit << 1)
    if parent >= n:
        parent = r ^ bit
    low = bit >> 1
    if low == 0:
        return parent, []
    children = [r - low]
    while low and r + low >= n:
        low >>= 1
    if low:
        children.append(r + low)
    return parent, children


@dataclass(frozen=True)
class Tree:
    """A whole tree: parents, children, heights (leaf 0) and depths (root 0) by rank."""

    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    height: tuple[int, ...]
    depth: tuple[int, ...]

    @property
    def root(self) -> int:
        return self.parent.index(-1)


@lru_cache(maxsize=64)
def tree(n: int, which: int) -> Tree:
    """Tree ``which`` (0 or 1) of the double binary tree over ``n`` ranks."""
    if which == 0 or n == 1:
        mapping = list(range(n))
    elif n % 2 == 0:
        mapping = [n - 1 - x for x in range(n)]      # mirror
    else:
        mapping = [(x + 1) % n for x in range(n)]    # shift
    parent = [-1] * n
    children: list[tuple[int, ...]] = [()] * n
    for x in range(n):
        p, kids = btree(n, x)
        parent[mapping[x]] = -1 if p < 0 else mapping[p]
        children[mapping[x]] = tuple(mapping[c] for c in kids)
    root = parent.index(-1)
    depth = [0] * n
    order = [root]
    for v in order:  # breadth first from the root
        for c in children[v]:
            depth[c] = depth[v] + 1
            order.append(c)
    height = [0] * n
    for v in reversed(order):
        height[v] = max((height[c] + 1 for c in children[v]), default=0)
    return Tree(tuple(parent), tuple(children), tuple(height), tuple(depth))
