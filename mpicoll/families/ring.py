"""Ring algorithms: every rank talks only to its two ring neighbours.

The data is cut into p blocks.  In every step each rank sends one block to
rank + 1 and receives one from rank - 1, so all links are busy and each rank
moves (p-1)/p of the data per phase: the bandwidth-optimal pattern.  The step
functions take their blocks from :data:`~mpicoll.ir.schedule.BLOCKS` (one object
per block, shared by all ranks): at p = 1024 they run two million times.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import BLOCKS, Block, Reduce, Scratch, Timeline


def reduce_scatter_steps(tl: Timeline, t0: int, rank: int, size: int, *, src: str = "send",
                         acc: str = "recv", incoming: str = "incoming", out: str | None = None) -> int:
    """Ring reduce-scatter into rounds ``t0 ..``; afterwards ``out`` block ``rank`` is reduced.

    Block b starts at rank b + 1 and travels once around the ring, each rank adding
    its own part, so that it ends fully reduced at rank b.  Hence in step
    s = 0 .. p-2 rank r sends block (r - s - 1) mod p (its own part when s = 0, else
    the partial sum it made in step s - 1) and receives block (r - s - 2) mod p
    into ``incoming``, to which it adds its own part.  The last receive (s = p - 2) is block r.  Partial
    sums live in ``acc``; the finished block r goes to ``out`` (default ``acc``), so
    a reduce-scatter keeps its partial sums in scratch and writes only its own
    block to ``recv``.  Returns the number of rounds used (p - 1).
    """
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1):
        send_b, recv_b = (rank - s - 1) % size, (rank - s - 2) % size
        dest = (out or acc) if s == size - 2 else acc
        got = BLOCKS[incoming, recv_b, recv_b + 1]
        tl.exchange(t0 + s, nxt, BLOCKS[src if s == 0 else acc, send_b, send_b + 1], prv, got,
                    Reduce(BLOCKS[dest, recv_b, recv_b + 1], got, BLOCKS[src, recv_b, recv_b + 1]))
    return size - 1


def allgather_steps(tl: Timeline, t0: int, rank: int, size: int, *, buf: str = "recv", src: str | None = None) -> int:
    """Ring all-gather in rounds ``t0 ..``, starting with block ``rank`` in ``src`` (default ``buf``).

    In step s = 0 .. p-2 rank r forwards block (r - s) mod p (its own when s = 0,
    read from ``src``; else the one it received in step s - 1) and receives block
    (r - s - 1) mod p.  After p - 1 steps every block has reached every rank.
    Returns p - 1.
    """
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    for s in range(size - 1):
        send_b, recv_b = (rank - s) % size, (rank - s - 1) % size
        tl.exchange(t0 + s, nxt, BLOCKS[(src or buf) if s == 0 else buf, send_b, send_b + 1],
                    prv, BLOCKS[buf, recv_b, recv_b + 1])
    return size - 1


@register("allreduce", "ring", keeps_order=False, rotates=True,
          scratch={"incoming": Scratch("the left neighbour's partial sum of one block")})
def allreduce(rank: int, size: int):
    """Ring reduce-scatter, then ring all-gather: 2(p-1) steps of n/p each.

    Cost: 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.

    When it wins: Large messages: its bandwidth term is the lower bound, with neighbour-only traffic.

    Limitations: Latency grows linearly with p (see the tree_vs_ring example); block b is summed starting at
    rank b + 1, so rank order is lost for p > 1.
    """
    tl = Timeline()
    t = reduce_scatter_steps(tl, 0, rank, size)
    allgather_steps(tl, t, rank, size)
    return size, tl.rounds()


@register("allgather", "ring", rotates=True)
@register("allgatherv", "ring", rotates=True)
def allgather(rank: int, size: int):
    """Ring all-gather: p - 1 steps, each passing one block to the right neighbour.

    The own block is sent straight from ``send`` in step 0 and copied to ``recv``
    after that step's messages (a no-op in place, where ``send`` is ``recv``).

    Cost: (p-1) alpha + (p-1)/p n beta.

    When it wins: Large messages: the bandwidth term is the lower bound and every link carries one block per
    step.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    allgather_steps(tl, 0, rank, size, src="send")
    tl.copy(0, Block("recv", rank, rank + 1), Block("send", rank, rank + 1))
    return size, tl.rounds()


_RS_SCRATCH = {"incoming": Scratch("the left neighbour's partial sum of one block", like="send"),
               "acc": Scratch("this rank's partial sums, passed on (recv holds only its own block)", like="send")}


@register("reduce_scatter_block", "ring", keeps_order=False, rotates=True, scratch=_RS_SCRATCH)
@register("reduce_scatter", "ring", keeps_order=False, rotates=True, scratch=_RS_SCRATCH)
def reduce_scatter(rank: int, size: int):
    """Ring reduce-scatter: the first phase of the ring all-reduce, p - 1 steps.

    ``recv`` holds one block (the rank's own), so partial sums travel through
    scratch (``acc``) and only the last step writes ``recv``.  Block b wraps
    around the ring from rank b + 1 to b, so rank order is lost for p > 1.

    Cost: (p-1) alpha + (p-1)/p n (beta + gamma).

    When it wins: Large messages: the bandwidth and reduction terms are the lower bound.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    reduce_scatter_steps(tl, 0, rank, size, acc="acc", out="recv")
    return size, tl.rounds()
