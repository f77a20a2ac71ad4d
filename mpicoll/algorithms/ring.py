"""Ring algorithms: every rank talks only to its two ring neighbours.

The data is cut into p blocks.  In every step each rank sends one block to
rank + 1 and receives one from rank - 1, so all links are busy and each rank
moves (p-1)/p of the data per phase: the bandwidth-optimal pattern.
"""

from __future__ import annotations

from ..registry import register
from ..schedule import Block, Timeline


def reduce_scatter_steps(tl: Timeline, t0: int, rank: int, size: int, *, src: str = "send",
                         acc: str = "recv", tmp: str = "tmp") -> int:
    """Ring reduce-scatter into rounds ``t0 ..``; afterwards ``acc`` block ``rank`` is reduced.

    Block b starts at rank b + 1 and travels once around the ring, each rank adding
    its own part, so that it ends fully reduced at rank b.  Hence in step
    s = 0 .. p-2 rank r sends block (r - s - 1) mod p (its own part when s = 0, else
    the partial sum it made in step s - 1) and receives block (r - s - 2) mod p, to
    which it adds its own part.  The last receive (s = p - 2) is block r.
    Returns the number of rounds used (p - 1).
    """
    for s in range(size - 1):
        send_b, recv_b = (rank - s - 1) % size, (rank - s - 2) % size
        tl.send(t0 + s, (rank + 1) % size, Block(src if s == 0 else acc, send_b, send_b + 1))
        tl.recv(t0 + s, (rank - 1) % size, Block(tmp, recv_b, recv_b + 1))
        tl.reduce(t0 + s, Block(acc, recv_b, recv_b + 1), Block(tmp, recv_b, recv_b + 1),
                  Block(src, recv_b, recv_b + 1))
    return size - 1


def allgather_steps(tl: Timeline, t0: int, rank: int, size: int, *, buf: str = "recv") -> int:
    """Ring all-gather in rounds ``t0 ..``, starting with block ``rank`` in ``buf``.

    In step s = 0 .. p-2 rank r forwards block (r - s) mod p (its own when s = 0,
    else the one it received in step s - 1) and receives block (r - s - 1) mod p.
    After p - 1 steps every block has reached every rank.  Returns p - 1.
    """
    for s in range(size - 1):
        send_b, recv_b = (rank - s) % size, (rank - s - 1) % size
        tl.send(t0 + s, (rank + 1) % size, Block(buf, send_b, send_b + 1))
        tl.recv(t0 + s, (rank - 1) % size, Block(buf, recv_b, recv_b + 1))
    return size - 1


@register("allreduce", "ring", keeps_order=lambda size: size == 1)
def allreduce(rank: int, size: int):
    """Ring reduce-scatter, then ring all-gather: 2(p-1) steps of n/p each."""
    tl = Timeline()
    t = reduce_scatter_steps(tl, 0, rank, size)
    allgather_steps(tl, t, rank, size)
    if size == 1:
        tl.copy(0, Block("recv", 0, 1), Block("send", 0, 1))
    return size, tl.rounds()
