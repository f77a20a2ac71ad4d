"""Rooted collectives built from two phases of other algorithms.

- Bcast by scatter + all-gather (van de Geijn): a binomial scatter gives rank r
  block r of p, then a ring all-gather gives everyone every block.  Each rank
  moves about 2 n in all instead of n lg p: the choice for long messages.
- Reduce by reduce-scatter + gather (Rabenseifner): recursive halving leaves
  each of p' ranks one block fully reduced (in rank order), then the blocks are
  gathered to the root by retracing the halving windows.  About 2 n moved and
  n reduced per rank instead of n lg p.
"""

from __future__ import annotations

from mpicoll.families.binomial import height, scatter_steps
from mpicoll.families.catalog import register
from mpicoll.families.recursive import INCOMING, Fold, halving_steps
from mpicoll.families.ring import allgather_steps
from mpicoll.ir.schedule import Block, Round, Timeline


def _skip(rounds: tuple[Round, ...], keep_send=lambda s: True, keep_recv=lambda r: True) -> tuple[Round, ...]:
    """The rounds with the sends and receives the filters reject left out."""
    return tuple(Round(tuple(s for s in rnd.sends if keep_send(s)), tuple(r for r in rnd.recvs if keep_recv(r)),
                       rnd.steps) for rnd in rounds)


@register("bcast", "scatter_allgather", params=("root",))
def bcast(rank: int, size: int, root: int = 0):
    """Binomial scatter of p blocks, then ring all-gather: ceil(lg p) + p - 1 steps, about 2n per rank.

    The ring would hand the root blocks it already has, and the root's buffer
    is input only (it may be read-only), so the root's predecessor skips its
    sends to the root and the root receives nothing.

    Cost: (ceil(lg p) + p - 1) alpha + 2 (p-1)/p n beta (binomial scatter, then ring all-gather).

    When it wins: Large messages (van de Geijn's broadcast): within a factor 2 of the bandwidth bound.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    scatter_steps(tl, 0, rank, size, root, src="recv", dst="recv")
    ring = Timeline()
    allgather_steps(ring, 0, rank, size, buf="recv")
    rounds = ring.rounds()
    if rank == root:
        rounds = _skip(rounds, keep_recv=lambda r: False)
    elif rank == (root - 1) % size:
        rounds = _skip(rounds, keep_send=lambda s: s.peer != root)
    tl.extend(height(size), rounds)
    return size, tl.rounds()


def gather_windows(tl: Timeline, t0: int, fold: Fold, history: list[tuple[int, int, int]], dst: int) -> None:
    """Gather the halving result to new rank ``dst`` by retracing the windows in reverse.

    Step i undoes halving step lg p' - 1 - i (bit b): partners differ in bit b;
    the one whose bit b differs from ``dst``'s sends the window it kept in that
    step (which by then holds everything it gathered) and is done; the other
    receives the partner's window.  Only ranks that agree with ``dst`` on all
    bits above b are still active, so after the last step ``dst`` has all p'.
    """
    for i, (lo, hi, bit) in enumerate(reversed(history)):
        partner = fold.old(fold.new_rank ^ bit)
        mid = (lo + hi) // 2
        mine, theirs = ((mid, hi), (lo, mid)) if fold.new_rank & bit else ((lo, mid), (mid, hi))
        if (fold.new_rank ^ dst) & bit:
            tl.send(t0 + i, partner, Block("recv", *mine))
            return
        tl.recv(t0 + i, partner, Block("recv", *theirs))


@register("reduce", "rabenseifner", params=("root",), scratch={"incoming": INCOMING})
def reduce(rank: int, size: int, root: int = 0):
    """Recursive-halving reduce-scatter (p' blocks), then gather of the blocks to the root.

    When p is not a power of two the extra ranks fold in first (:class:`Fold`);
    if the root is one that sat out, its partner root + 1 collects the result
    and hands it over in one last step.  Unlike
    the other reduce algorithms this one uses ``recv`` as scratch at non-root
    ranks too (the halving helpers accumulate there), so the call binds a
    scratch array as ``recv`` there.

    Cost: 2 lg p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma for p a power of two.

    When it wins: Medium and large messages (MPICH's reduce for long vectors).

    Limitations: Every rank takes part in the arithmetic even though only the root needs the result.
    """
    tl, fold = Timeline(), Fold(rank, size)
    whole = (0, fold.pof2)
    sat_out = root < 2 * fold.extra and root % 2 == 0
    collector = root + 1 if sat_out else root
    t = 1 if fold.extra else 0
    cur = fold.fold_in(tl, 0, whole)
    if fold.new_rank is not None:
        history = halving_steps(tl, t, fold, cur)
        gather_windows(tl, t + fold.steps, fold, history, Fold(collector, size).new_rank)
    last = t + 2 * fold.steps
    if sat_out and rank == collector:
        tl.send(last, root, Block("recv", *whole))
    elif sat_out and rank == root:
        tl.recv(last, collector, Block("recv", *whole))
    return fold.pof2, tl.rounds()
