"""Recursive doubling and halving (butterflies), and Rabenseifner's all-reduce.

These need a power of two, p' = the largest power of two <= p.  The first
2(p - p') ranks pair up (2i, 2i+1): rank 2i hands its data to 2i+1 and sits out,
so that p' ranks remain, renumbered 0 .. p'-1 in rank order (new rank i is old
rank 2i+1 for i < p - p', else i + (p - p')).  The renumbering keeps rank order,
so non-commutative ops stay correct.  At the end 2i+1 hands the result back.
"""

from __future__ import annotations

from ..registry import register
from ..schedule import Block, Timeline


class Fold:
    """The pairing of the extra ranks when p is not a power of two."""

    def __init__(self, rank: int, size: int):
        self.pof2 = 1 << (size.bit_length() - 1)
        self.extra = size - self.pof2
        self.rank = rank
        if rank < 2 * self.extra:
            self.new_rank = rank // 2 if rank % 2 else None  # even ranks sit out
        else:
            self.new_rank = rank - self.extra
        self.steps = self.pof2.bit_length() - 1  # log2 p'

    def old(self, new_rank: int) -> int:
        """The real rank behind ``new_rank``."""
        return 2 * new_rank + 1 if new_rank < self.extra else new_rank + self.extra

    def fold_in(self, tl: Timeline, t: int, blocks: tuple[int, int]) -> str:
        """Round ``t``: extra ranks hand over their data; returns where this rank's data is."""
        if not self.extra or self.rank >= 2 * self.extra:
            return "send"
        lo, hi = blocks
        if self.new_rank is None:
            tl.send(t, self.rank + 1, Block("send", lo, hi))
            return "send"
        tl.recv(t, self.rank - 1, Block("tmp", lo, hi))
        tl.reduce(t, Block("recv", lo, hi), Block("tmp", lo, hi), Block("send", lo, hi))
        return "recv"

    def fold_out(self, tl: Timeline, t: int, blocks: tuple[int, int]) -> None:
        """Round ``t``: the result goes back to the ranks that sat out."""
        if self.rank < 2 * self.extra:
            lo, hi = blocks
            if self.new_rank is None:
                tl.recv(t, self.rank + 1, Block("recv", lo, hi))
            else:
                tl.send(t, self.rank - 1, Block("recv", lo, hi))


@register("allreduce", "recursive_doubling")
def allreduce_recursive_doubling(rank: int, size: int):
    """Butterfly on the whole vector: lg p' steps, each exchanging everything."""
    tl, fold = Timeline(), Fold(rank, size)
    whole = (0, 1)
    t = 1 if fold.extra else 0
    cur = fold.fold_in(tl, 0, whole)
    # step k pairs new ranks that differ in bit k; both compute lower o upper,
    # so both hold the same bits afterwards
    if fold.new_rank is not None:
        for k in range(fold.steps):
            partner = fold.old(fold.new_rank ^ (1 << k))
            tl.send(t + k, partner, Block(cur, 0, 1))
            tl.recv(t + k, partner, Block("tmp", 0, 1))
            left, right = ("tmp", cur) if partner < rank else (cur, "tmp")
            tl.reduce(t + k, Block("recv", 0, 1), Block(left, 0, 1), Block(right, 0, 1))
            cur = "recv"
    if cur == "send" and fold.new_rank is not None:  # p = 1
        tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
    if fold.extra:
        fold.fold_out(tl, t + fold.steps, whole)
    return 1, tl.rounds()


def halving_steps(tl: Timeline, t0: int, fold: Fold, cur: str) -> list[tuple[int, int, int]]:
    """Recursive-halving reduce-scatter over p' blocks, in rounds ``t0 ..``.

    In step k (k = 0 .. lg p' - 1) new ranks that differ in bit k split their
    current window of blocks in two: the one with bit k clear keeps the lower
    half, its partner the upper; each sends the half it gives up and adds the
    partner's copy of the half it keeps.  Distances grow (1, 2, 4, ...) so each
    partial sum covers a contiguous range of ranks, which keeps rank order.
    After lg p' steps new rank i holds block bitreverse(i) reduced in ``recv``.
    Returns the windows before each step (what the all-gather retraces).
    """
    lo, hi = 0, fold.pof2
    history = []
    for k in range(fold.steps):
        bit = 1 << k
        partner = fold.old(fold.new_rank ^ bit)
        mid = (lo + hi) // 2
        keep, give = ((mid, hi), (lo, mid)) if fold.new_rank & bit else ((lo, mid), (mid, hi))
        tl.send(t0 + k, partner, Block(cur, *give))
        tl.recv(t0 + k, partner, Block("tmp", *keep))
        left, right = ("tmp", cur) if partner < fold.rank else (cur, "tmp")
        tl.reduce(t0 + k, Block("recv", *keep), Block(left, *keep), Block(right, *keep))
        history.append((lo, hi, bit))
        lo, hi = keep
        cur = "recv"
    return history


def doubling_allgather_steps(tl: Timeline, t0: int, fold: Fold, history: list[tuple[int, int, int]]) -> None:
    """Undo the halving windows in reverse: each step swaps halves with the partner."""
    for i, (lo, hi, bit) in enumerate(reversed(history)):
        partner = fold.old(fold.new_rank ^ bit)
        mid = (lo + hi) // 2
        mine, theirs = ((mid, hi), (lo, mid)) if fold.new_rank & bit else ((lo, mid), (mid, hi))
        tl.send(t0 + i, partner, Block("recv", *mine))
        tl.recv(t0 + i, partner, Block("recv", *theirs))


@register("allreduce", "rabenseifner")
def allreduce_rabenseifner(rank: int, size: int):
    """Recursive-halving reduce-scatter, then recursive-doubling all-gather (p' blocks)."""
    tl, fold = Timeline(), Fold(rank, size)
    whole = (0, fold.pof2)
    t = 1 if fold.extra else 0
    cur = fold.fold_in(tl, 0, whole)
    if fold.new_rank is not None:
        history = halving_steps(tl, t, fold, cur)
        doubling_allgather_steps(tl, t + fold.steps, fold, history)
        if size == 1:
            tl.copy(0, Block("recv", *whole), Block("send", *whole))
    if fold.extra:
        fold.fold_out(tl, t + 2 * fold.steps, whole)
    return fold.pof2, tl.rounds()
