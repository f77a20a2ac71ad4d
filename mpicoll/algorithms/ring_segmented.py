"""The ring all-reduce with a segmented reduce-scatter, for large messages.

Each of the ring's p blocks is cut into k segments (block b, segment j is block
index b k + j).  In the reduce-scatter every ring step is done segment by
segment: a segment is received into scratch and at once reduced from the send
buffer straight into the receive buffer while it is still in cache, instead of
receiving a whole n/p block (far larger than the cache) and streaming it back
from memory for the reduction.  The all-gather moves no arithmetic, so it
forwards whole blocks as the plain ring does.
"""

from __future__ import annotations

from ..registry import register
from ..schedule import Block, Timeline
from .ring import allgather_steps


def _segment(buf: str, b: int, j: int, k: int) -> Block:
    return Block(buf, b * k + j, b * k + j + 1)


@register("allreduce", "ring_segmented", keeps_order=lambda size: size == 1, params=("segments",))
def allreduce(rank: int, size: int, segments: int = 1):
    """Ring all-reduce whose reduce-scatter moves k segments per step: (p-1)(k+1) rounds.

    As in ``ring.reduce_scatter_steps``, in step s = 0 .. p-2 rank r sends block
    (r - s - 1) mod p and receives block (r - s - 2) mod p; here step s takes the
    k rounds s k + j, j = 0 .. k-1, each moving segment j of those blocks, and
    adds the received segment to the rank's own part of it.  Rank r ends the
    reduce-scatter with block r reduced; the ring all-gather then starts at
    round (p-1) k on blocks of k segments, viewed as whole blocks of size k.
    """
    k = segments
    tl = Timeline()
    for s in range(size - 1):
        send_b, recv_b = (rank - s - 1) % size, (rank - s - 2) % size
        for j in range(k):
            t = s * k + j
            tl.send(t, (rank + 1) % size, _segment("send" if s == 0 else "recv", send_b, j, k))
            tl.recv(t, (rank - 1) % size, _segment("tmp", recv_b, j, k))
            tl.reduce(t, _segment("recv", recv_b, j, k), _segment("tmp", recv_b, j, k), _segment("send", recv_b, j, k))
    gather = Timeline()
    allgather_steps(gather, 0, rank, size)
    for t, rnd in enumerate(gather.rounds()):   # block b of the all-gather is blocks b k .. b k + k - 1
        for x in rnd.sends:
            tl.send((size - 1) * k + t, x.peer, Block(x.block.buf, x.block.lo * k, x.block.hi * k))
        for x in rnd.recvs:
            tl.recv((size - 1) * k + t, x.peer, Block(x.block.buf, x.block.lo * k, x.block.hi * k))
    if size == 1:
        tl.copy(0, Block("recv", 0, k), Block("send", 0, k))
    return size * k, tl.rounds()
