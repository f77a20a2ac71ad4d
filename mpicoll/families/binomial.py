"""Binomial trees: the classic lg p-step trees for rooted collectives.

Ranks are renumbered relative to the root, v = (rank - root) mod p.  In a
binomial tree the children of v are v + 2^k for every 2^k below v's lowest set
bit (all 2^k < p - v for the root), and the subtree of v + 2^k is the range
[v + 2^k, v + 2^(k+1)).  So a reduction that takes children in increasing k adds
contiguous ranges in order, which keeps rank order when the root is 0.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Scratch, Timeline

INCOMING = Scratch("a child's partial result, received and added at once")


def height(size: int) -> int:
    """ceil(lg p): rounds of a binomial tree over ``size`` ranks."""
    return (size - 1).bit_length()


def subtree(v: int, size: int) -> int:
    """Ranks in the subtree of relative rank ``v``: v .. v + lowbit(v) - 1 (all ``size`` for the root)."""
    return size if v == 0 else min(v & -v, size - v)


def absolute(lo: int, hi: int, root: int, size: int) -> list[tuple[int, int]]:
    """Relative blocks [lo, hi) as absolute block ranges: one, or two where they wrap past p - 1."""
    a, b = lo + root, hi + root
    if b <= size:
        return [(a, b)]
    if a >= size:
        return [(a - size, b - size)]
    return [(a, size), (0, b - size)]


def reduce_steps(tl: Timeline, t0: int, rank: int, size: int, root: int, blocks: tuple[int, int], *,
                 src: str = "send", acc: str = "recv", incoming: str = "incoming") -> str:
    """Binomial reduce to ``root`` in rounds ``t0 .. t0 + ceil(lg p) - 1``.

    In step k, a rank whose relative rank v has bit k set sends its partial
    result to v - 2^k and is done; the others receive from v + 2^k (if it
    exists) into ``incoming`` and append it on the right.  Returns the buffer
    holding the root's result (``acc``, or ``src`` when p = 1).
    """
    v = (rank - root) % size
    cur = src
    for k in range(height(size)):
        bit = 1 << k
        if v & bit:
            tl.send(t0 + k, (rank - bit) % size, Block(cur, *blocks))
            break
        if v + bit < size:
            tl.recv(t0 + k, (rank + bit) % size, Block(incoming, *blocks))
            tl.reduce(t0 + k, Block(acc, *blocks), Block(cur, *blocks), Block(incoming, *blocks))
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


def scatter_steps(tl: Timeline, t0: int, rank: int, size: int, root: int, *, src: str, dst: str) -> None:
    """Binomial scatter of p blocks (block b for rank b) in rounds ``t0 .. t0 + ceil(lg p) - 1``.

    The tree of :func:`bcast_steps`: in step j (distance d = 2^(h-1-j)) a rank v
    that holds its subtree [v, v + 2d) hands the subtree of v + d, relative
    blocks [v + d, min(v + 2d, p)), to v + d.  So the receiver gets exactly the
    blocks it and its own children need.  A range that wraps past p - 1 in
    absolute terms goes as two messages.  The root sends from ``src``; the
    others receive into (and forward from) ``dst``.
    """
    v = (rank - root) % size
    h = height(size)
    for j in range(h):
        d = 1 << (h - 1 - j)
        if v % (2 * d) == 0 and v + d < size:
            for lo, hi in absolute(v + d, min(v + 2 * d, size), root, size):
                tl.send(t0 + j, (rank + d) % size, Block(src if v == 0 else dst, lo, hi))
        elif v % (2 * d) == d:
            for lo, hi in absolute(v, min(v + d, size), root, size):
                tl.recv(t0 + j, (rank - d) % size, Block(dst, lo, hi))


def gather_steps(tl: Timeline, t0: int, rank: int, size: int, root: int, *, src: str, dst: str) -> None:
    """Binomial gather of block b from rank b, the mirror image of :func:`scatter_steps`.

    In step k (distance 2^k) a rank v whose lowest set bit is k sends its whole
    subtree, relative blocks [v, min(v + 2^k, p)), from ``src`` to v - 2^k and is
    done; a rank below it receives the subtree of v + 2^k into ``dst``.
    """
    v = (rank - root) % size
    for k in range(height(size)):
        bit = 1 << k
        if v & bit:
            for lo, hi in absolute(v, min(v + bit, size), root, size):
                tl.send(t0 + k, (rank - bit) % size, Block(src, lo, hi))
            return
        if v + bit < size:
            for lo, hi in absolute(v + bit, min(v + 2 * bit, size), root, size):
                tl.recv(t0 + k, (rank + bit) % size, Block(dst, lo, hi))


@register("allreduce", "binomial", scratch={"incoming": INCOMING})
def allreduce(rank: int, size: int):
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast: 2 ceil(lg p) steps.

    Cost: 2 h alpha + 2 h n beta + h n gamma, with h = ceil(lg p).

    When it wins: Rarely for speed; it reduces in rank order, so it is right for non-commutative operations.

    Limitations: Every step moves the whole vector, and half the ranks idle in each step.
    """
    tl = Timeline()
    whole = (0, 1)
    reduce_steps(tl, 0, rank, size, 0, whole)
    bcast_steps(tl, height(size), rank, size, 0, whole)
    return 1, tl.rounds()


@register("bcast", "binomial", params=("root",))
def bcast(rank: int, size: int, root: int = 0):
    """Binomial tree from the root: ceil(lg p) steps, the number of holders doubling each step.

    Cost: h alpha + h n beta, with h = ceil(lg p).

    When it wins: Small messages: the fewest rounds.

    Limitations: The root's whole buffer crosses h links one after another, so large messages favour the
    pipelined or scatter-allgather algorithms.
    """
    tl = Timeline()
    bcast_steps(tl, 0, rank, size, root, (0, 1))
    return 1, tl.rounds()


@register("reduce", "binomial", params=("root",), scratch={
    "incoming": INCOMING, "acc": Scratch("a non-root's partial result (it has no receive buffer)")})
def reduce(rank: int, size: int, root: int = 0):
    """Binomial tree to rank 0 (in rank order), then rank 0 hands the result to the root.

    Toward rank 0 every partial sum covers a contiguous range of ranks, so the
    result is in rank order for any op; a tree toward another root would wrap
    around p - 1 (as MPICH does for non-commutative ops, one more step instead).
    Non-root ranks accumulate in scratch (``acc``): they have no receive buffer.

    Cost: h alpha + h n (beta + gamma), plus alpha + n beta when the root is not rank 0.

    When it wins: Small messages; it reduces in rank order (right for non-commutative operations).

    Limitations: Every step moves the whole vector.
    """
    tl = Timeline()
    whole = (0, 1)
    result = reduce_steps(tl, 0, rank, size, 0, whole, acc="recv" if rank == root else "acc")
    if root != 0 and rank in (0, root):  # one more step: rank 0 -> root
        if rank == 0:
            tl.send(height(size), root, Block(result, *whole))
        else:
            tl.recv(height(size), 0, Block("recv", *whole))
    return 1, tl.rounds()


SUBTREE = Scratch("an inner rank's subtree: the blocks of its subtree's ranks, own block first", like="own")


@register("gather", "binomial", params=("root",), scratch={"subtree": SUBTREE})
def gather(rank: int, size: int, root: int = 0):
    """Binomial tree: each rank passes its whole subtree up, ceil(lg p) steps, (p-1)/p n in at the root.

    Non-root ranks with children collect their subtree in scratch (``subtree``),
    starting with their own block, copied there in round 0 (they first send in
    round 1 or later); leaves send their own block straight from ``send``.

    Cost: h alpha + (p-1)/p n beta, with h = ceil(lg p) and n the root's whole receive buffer.

    When it wins: Small and medium blocks.

    Limitations: Inner ranks hold and forward their whole subtree's blocks.
    """
    tl = Timeline()
    v = (rank - root) % size
    dst = "recv" if v == 0 else "subtree"
    own = (rank, rank + 1)
    if v == 0 or subtree(v, size) > 1:
        tl.copy(0, Block(dst, *own), Block("send", *own))
    gather_steps(tl, 0, rank, size, root, src=dst if subtree(v, size) > 1 else "send", dst=dst)
    return size, tl.rounds()


@register("scatter", "binomial", params=("root",), scratch={"subtree": SUBTREE})
def scatter(rank: int, size: int, root: int = 0):
    """Binomial tree: the root hands each child its whole subtree's blocks, ceil(lg p) steps.

    A rank with children receives its subtree in scratch (``subtree``), copies its
    own block to ``recv`` and forwards the rest; a leaf receives straight into
    ``recv``.  Rank v (v > 0) receives in step h - 1 - log2(lowbit(v)).

    Cost: h alpha + (p-1)/p n beta, with h = ceil(lg p) and n the root's whole send buffer.

    When it wins: Small and medium blocks.

    Limitations: Inner ranks receive and forward their whole subtree's blocks.
    """
    tl = Timeline()
    v = (rank - root) % size
    own = (rank, rank + 1)
    if v == 0:
        tl.copy(0, Block("recv", *own), Block("send", *own))
        scatter_steps(tl, 0, rank, size, root, src="send", dst="recv")
    elif subtree(v, size) == 1:
        scatter_steps(tl, 0, rank, size, root, src="send", dst="recv")
    else:
        scatter_steps(tl, 0, rank, size, root, src="send", dst="subtree")
        arrival = height(size) - (v & -v).bit_length()
        tl.copy(arrival, Block("recv", *own), Block("subtree", *own))
    return size, tl.rounds()
