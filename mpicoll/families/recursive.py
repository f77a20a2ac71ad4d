"""Recursive doubling and halving (butterflies), and Rabenseifner's all-reduce.

These need a power of two, p' = the largest power of two <= p.  The first
2(p - p') ranks pair up (2i, 2i+1): rank 2i hands its data to 2i+1 and sits out,
so that p' ranks remain, renumbered 0 .. p'-1 in rank order (new rank i is old
rank 2i+1 for i < p - p', else i + (p - p')).  The renumbering keeps rank order,
so non-commutative ops stay correct.  At the end 2i+1 hands the result back.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Scratch, Timeline

# every algorithm here receives its partner's part into ``incoming`` and adds it at once
INCOMING = Scratch("the partner's part, received and added at once")


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

    def fold_in(self, tl: Timeline, t: int, blocks: tuple[int, int], *, acc: str = "recv") -> str:
        """Round ``t``: extra ranks hand over their data; returns where this rank's data is.

        The receiving rank gets the handed-over part in ``incoming`` and adds it
        (lower rank, so on the left) to its own into ``acc``.
        """
        if not self.extra or self.rank >= 2 * self.extra:
            return "send"
        lo, hi = blocks
        if self.new_rank is None:
            tl.send(t, self.rank + 1, Block("send", lo, hi))
            return "send"
        tl.recv(t, self.rank - 1, Block("incoming", lo, hi))
        tl.reduce(t, Block(acc, lo, hi), Block("incoming", lo, hi), Block("send", lo, hi))
        return acc

    def fold_out(self, tl: Timeline, t: int, blocks: tuple[int, int], *, src: str = "recv",
                 dst: str = "recv") -> None:
        """Round ``t``: the result (``src`` ``blocks``) goes back to the ranks that sat out (into ``dst``)."""
        if self.rank < 2 * self.extra and blocks[1] > blocks[0]:
            lo, hi = blocks
            if self.new_rank is None:
                tl.recv(t, self.rank + 1, Block(dst, lo, hi))
            else:
                tl.send(t, self.rank - 1, Block(src, lo, hi))

    def edge(self, new_rank: int) -> int:
        """First of the ``size`` blocks that new rank ``new_rank`` stands for (``edge(p') = size``).

        New rank i < extra stands for old ranks 2i and 2i+1, so for blocks 2i and
        2i+1; the others for one block each.  A range of new ranks [a, b) thus
        stands for the contiguous blocks [edge(a), edge(b)).
        """
        return 2 * new_rank if new_rank < self.extra else new_rank + self.extra


@register("allreduce", "recursive_doubling", scratch={"incoming": INCOMING})
def allreduce_recursive_doubling(rank: int, size: int):
    """Butterfly on the whole vector: lg p' steps, each exchanging everything.

    Cost: lg p alpha + lg p n (beta + gamma) for p a power of two; otherwise 2 more steps of alpha + n beta.

    When it wins: Small messages: the fewest rounds of any all-reduce.

    Limitations: Every step moves the whole vector, so it loses to Rabenseifner and the ring as n grows.
    """
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
            tl.recv(t + k, partner, Block("incoming", 0, 1))
            left, right = ("incoming", cur) if partner < rank else (cur, "incoming")
            tl.reduce(t + k, Block("recv", 0, 1), Block(left, 0, 1), Block(right, 0, 1))
            cur = "recv"
    if fold.extra:
        fold.fold_out(tl, t + fold.steps, whole)
    return 1, tl.rounds()


def halving_windows(new_rank: int, pof2: int, *, descending: bool = False) -> list[tuple[int, int, int]]:
    """The windows (lo, hi, bit) of new ranks that ``new_rank`` halves, step by step.

    Each step pairs new ranks that differ in ``bit`` and halves the window that
    contains ``new_rank``: the rank with ``bit`` clear keeps the lower half.  With
    ascending bits (1, 2, 4, ...) partial sums cover contiguous rank ranges (rank
    order kept) and new rank i ends with window bitreverse(i); with descending
    bits (p'/2, ..., 1) it ends with window [i, i + 1).
    """
    bits = [1 << k for k in range(pof2.bit_length() - 1)]
    lo, hi = 0, pof2
    out = []
    for bit in (reversed(bits) if descending else bits):
        out.append((lo, hi, bit))
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if new_rank & bit else (lo, mid)
    return out


def halving_steps(tl: Timeline, t0: int, fold: Fold, cur: str, *, descending: bool = False,
                  edge=lambda i: i, acc: str = "recv", own: tuple[int, str] | None = None
                  ) -> list[tuple[int, int, int]]:
    """Recursive-halving reduce-scatter in rounds ``t0 ..`` (windows from :func:`halving_windows`).

    In each step partners split their current window in two; each sends the half
    it gives up and adds the partner's copy of the half it keeps (received in
    ``incoming``) into ``acc``
    (lower rank on the left).  Windows are in new ranks; ``edge`` maps a window
    edge to a block index (identity: p' blocks, one per new rank).  ``own =
    (block, buffer)`` sends that block's final sum to ``buffer`` instead of ``acc``.
    Returns the windows (what the all-gather retraces).
    """
    history = halving_windows(fold.new_rank, fold.pof2, descending=descending)
    for k, (lo, hi, bit) in enumerate(history):
        partner = fold.old(fold.new_rank ^ bit)
        mid = (lo + hi) // 2
        keep, give = ((mid, hi), (lo, mid)) if fold.new_rank & bit else ((lo, mid), (mid, hi))
        keep, give = (edge(keep[0]), edge(keep[1])), (edge(give[0]), edge(give[1]))
        tl.send(t0 + k, partner, Block(cur, *give))
        tl.recv(t0 + k, partner, Block("incoming", *keep))
        left, right = ("incoming", cur) if partner < fold.rank else (cur, "incoming")
        pieces = [(keep, acc)]
        if own is not None and k == len(history) - 1:  # the last step: the own block goes elsewhere
            b, buf = own
            pieces = [((keep[0], b), acc), ((b, b + 1), buf), ((b + 1, keep[1]), acc)]
        for (a, z), out in pieces:
            if z > a:
                tl.reduce(t0 + k, Block(out, a, z), Block(left, a, z), Block(right, a, z))
        cur = acc
    return history


def doubling_allgather_steps(tl: Timeline, t0: int, fold: Fold, history: list[tuple[int, int, int]], *,
                             edge=lambda i: i, buf: str = "recv", src: str | None = None) -> None:
    """Undo the halving windows in reverse: each step swaps halves with the partner.

    The first step sends from ``src`` (default ``buf``): the caller's own window, where it still is.
    """
    for i, (lo, hi, bit) in enumerate(reversed(history)):
        partner = fold.old(fold.new_rank ^ bit)
        mid = (lo + hi) // 2
        mine, theirs = ((mid, hi), (lo, mid)) if fold.new_rank & bit else ((lo, mid), (mid, hi))
        tl.send(t0 + i, partner, Block((src or buf) if i == 0 else buf, edge(mine[0]), edge(mine[1])))
        tl.recv(t0 + i, partner, Block(buf, edge(theirs[0]), edge(theirs[1])))


@register("allreduce", "rabenseifner", scratch={"incoming": INCOMING})
def allreduce_rabenseifner(rank: int, size: int):
    """Recursive-halving reduce-scatter, then recursive-doubling all-gather (p' blocks).

    Cost: 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma for p a power of two; otherwise 2 more steps of
    alpha + n beta.

    When it wins: Medium and large messages: logarithmic latency with the optimal bandwidth term (MPICH and
    Open MPI use it above a few KiB).

    Limitations: One past a power of two the fold steps double its bandwidth term.
    """
    tl, fold = Timeline(), Fold(rank, size)
    whole = (0, fold.pof2)
    t = 1 if fold.extra else 0
    cur = fold.fold_in(tl, 0, whole)
    if fold.new_rank is not None:
        history = halving_steps(tl, t, fold, cur)
        doubling_allgather_steps(tl, t + fold.steps, fold, history)
    if fold.extra:
        fold.fold_out(tl, t + 2 * fold.steps, whole)
    return fold.pof2, tl.rounds()


@register("allgather", "recursive_doubling")
def allgather_recursive_doubling(rank: int, size: int):
    """Recursive doubling: lg p' steps, the gathered range doubling each step (any p, via the fold).

    Round 0 (only when p is not a power of two): the ranks that sit out (even
    ranks below 2(p - p')) hand their block to their odd neighbour.  Then the p'
    remaining ranks retrace descending halving windows: in the step of bit b, new
    rank i swaps its window of b new ranks with new rank i ^ b.  New rank i
    stands for blocks [edge(i), edge(i + 1)), so every window is a contiguous
    range of blocks.  Last round: the sitters get everything but their own block.

    A rank whose first window is its own block alone sends it straight from
    ``send`` and copies it to ``recv`` after that step's messages (as the ring
    does): copying first and sending the fresh copy was twice as slow at p = 2
    and 64 KiB.  The others (the folded pairs) copy it in round 0.

    Cost: lg p alpha + (p-1)/p n beta for p a power of two; otherwise two more steps (fold in, hand out) of up
    to n beta.

    When it wins: Small messages when p is a power of two.

    Limitations: For p not a power of two, p - p' ranks sit out the doubling and are served by a partner,
    which doubles that partner's traffic.
    """
    tl, fold = Timeline(), Fold(rank, size)
    first = 1 if fold.extra else 0      # the first doubling step's round
    own = Block("recv", rank, rank + 1), Block("send", rank, rank + 1)
    pair = rank & ~1  # the even rank of a folded pair
    folded = fold.extra and rank < 2 * fold.extra
    if folded:
        tl.copy(0, *own)
        if fold.new_rank is None:
            tl.send(0, rank + 1, Block("send", rank, rank + 1))
        else:
            tl.recv(0, rank - 1, Block("recv", pair, pair + 1))
    else:
        tl.copy(first, *own)            # after the first step, which sends the own block from send
    if fold.new_rank is not None:
        history = halving_windows(fold.new_rank, fold.pof2, descending=True)
        doubling_allgather_steps(tl, first, fold, history, edge=fold.edge, src=None if folded else "send")
    for blocks in ((0, pair), (pair + 1, size)):  # all but the sitter's own block
        fold.fold_out(tl, first + fold.steps, blocks)
    return size, tl.rounds()


@register("reduce_scatter_block", "recursive_halving", keeps_order=lambda size: size <= 3, scratch={
    "incoming": INCOMING._replace(like="send"),
    "acc": Scratch("the partial sums of the window kept (recv holds only the own block)", like="send")})
def reduce_scatter_block_recursive_halving(rank: int, size: int):
    """Recursive halving: lg p' steps, the window of blocks halving each step (any p, via the fold).

    Round 0: even ranks below 2(p - p') hand their whole vector to their odd
    neighbour and sit out.  The p' others halve windows of new ranks with
    descending bits (p'/2 first), so that new rank i ends with its own window
    [i, i + 1), that is blocks [edge(i), edge(i + 1)): its own block, written to
    ``recv``, and for a folded pair also the sitter's, which the last round hands
    back.  Partial sums live in scratch (``acc``).  The first step pairs ranks
    p'/2 apart, so the blocks are not combined in rank order once p' >= 4.

    Cost: lg p alpha + (p-1)/p n (beta + gamma) for p a power of two; otherwise 2 more steps.

    When it wins: Small and medium messages.

    Limitations: p not a power of two costs two fold steps.
    """
    tl, fold = Timeline(), Fold(rank, size)
    t = 1 if fold.extra else 0
    cur = fold.fold_in(tl, 0, (0, size), acc="acc")
    if fold.new_rank is not None:
        halving_steps(tl, t, fold, cur, descending=True, edge=fold.edge, acc="acc", own=(rank, "recv"))
    pair = rank & ~1
    fold.fold_out(tl, t + fold.steps, (pair, pair + 1), src="acc")
    return size, tl.rounds()


def prefix_steps(tl: Timeline, rank: int, size: int, *, exclusive: bool) -> None:
    """Recursive doubling prefix reduction: ceil(lg p) steps, any p (as MPICH).

    ``partial`` (the scratch buffer of that name, or ``send`` before the first
    exchange) is the sum over the aligned group of 2^(k+1) ranks around r after
    step k.  In step k rank r swaps ``partial`` with r ^ 2^k (skipped when that
    rank does not exist), receiving the partner's into ``incoming``: a
    lower partner's part goes on the left of both ``partial`` and the result
    (``recv``), an upper partner's only on the right of ``partial``.  Both stay
    contiguous rank ranges, so rank order is kept.  ``partial`` is always updated
    before the result, because in place the result overwrites ``send``.
    The exclusive scan starts with no result: its first lower part is copied.
    """
    one = (0, 1)
    if not exclusive:
        tl.copy(0, Block("recv", *one), Block("send", *one))  # inclusive: own part first
    partial, have_result = "send", not exclusive
    for k in range((size - 1).bit_length()):
        peer = rank ^ (1 << k)
        if peer >= size:
            continue
        tl.send(k, peer, Block(partial, *one))
        tl.recv(k, peer, Block("incoming", *one))
        if peer < rank:
            tl.reduce(k, Block("partial", *one), Block("incoming", *one), Block(partial, *one))
            if have_result:
                tl.reduce(k, Block("recv", *one), Block("incoming", *one), Block("recv", *one))
            else:
                tl.copy(k, Block("recv", *one), Block("incoming", *one))
                have_result = True
        else:
            tl.reduce(k, Block("partial", *one), Block(partial, *one), Block("incoming", *one))
        partial = "partial"


PREFIX_SCRATCH = {"incoming": INCOMING, "partial": Scratch("the sum over this step's aligned group of ranks")}


@register("scan", "recursive_doubling", scratch=PREFIX_SCRATCH)
def scan_recursive_doubling(rank: int, size: int):
    """Inclusive prefix by recursive doubling: ceil(lg p) steps of the whole vector.

    Cost: h alpha + h n (beta + gamma), with h = ceil(lg p).

    When it wins: Small and medium messages on more than a few ranks.
    """
    tl = Timeline()
    prefix_steps(tl, rank, size, exclusive=False)
    return 1, tl.rounds()


@register("exscan", "recursive_doubling", scratch=PREFIX_SCRATCH)
def exscan_recursive_doubling(rank: int, size: int):
    """Exclusive prefix by recursive doubling: ceil(lg p) steps; rank 0's ``recv`` is never written.

    Cost: h alpha + h n (beta + gamma), with h = ceil(lg p).

    When it wins: Small and medium messages on more than a few ranks.
    """
    tl = Timeline()
    prefix_steps(tl, rank, size, exclusive=True)
    return 1, tl.rounds()
