"""Linear algorithms: one rank talks to all others, one at a time.

The parameter-server pattern: rank 0 receives every contribution in rank order,
reduces, and sends the result back to everyone.  p - 1 rounds in, one round out;
simple, order-keeping, and a useful baseline.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Scratch, Timeline

INCOMING = Scratch("the part (or prefix) just received, before it is added")


@register("allreduce", "linear", scratch={"incoming": INCOMING})
def allreduce(rank: int, size: int):
    """Rank 0 receives from 1, 2, ..., p-1 in turn, reduces, and sends the result to all.

    Cost: 2(p-1) alpha + 2(p-1) n beta + (p-1) n gamma.

    When it wins: Never for speed: it is the obvious algorithm, kept as the reference every other one is
    compared with.

    Limitations: Rank 0 handles all the traffic and all the arithmetic.
    """
    tl = Timeline()
    whole = (0, 1)
    if rank == 0:
        cur = "send"
        for src in range(1, size):  # round src - 1: receive rank src's part
            tl.recv(src - 1, src, Block("incoming", *whole))
            tl.reduce(src - 1, Block("recv", *whole), Block(cur, *whole), Block("incoming", *whole))
            cur = "recv"
        for dst in range(1, size):
            tl.send(size - 1, dst, Block("recv", *whole))
    else:
        tl.send(rank - 1, 0, Block("send", *whole))
        tl.recv(size - 1, 0, Block("recv", *whole))
    return 1, tl.rounds()


# -- rooted collectives: the root talks to every other rank directly ------------------


@register("bcast", "linear", params=("root",))
def bcast(rank: int, size: int, root: int = 0):
    """The root sends the whole buffer to each other rank, all in one round.

    Cost: (p-1)(alpha + n beta): the root's sends go out one after another.

    When it wins: Never for speed; the reference.

    Limitations: The root sends p - 1 copies of the buffer.
    """
    tl = Timeline()
    for dst in range(size):
        if dst != root and rank == root:
            tl.send(0, dst, Block("recv", 0, 1))
    if rank != root:
        tl.recv(0, root, Block("recv", 0, 1))
    return 1, tl.rounds()


@register("gatherv", "linear", params=("root",))
@register("gather", "linear", params=("root",))
def gather(rank: int, size: int, root: int = 0):
    """Every rank sends its block r to the root, which receives all p - 1 at once (one round).

    Cost: (p-1) alpha + (p-1)/p n beta.

    When it wins: Few ranks or large blocks: each byte crosses one link.

    Limitations: The root has p - 1 messages in flight at once.
    """
    tl = Timeline()
    own = Block("send", rank, rank + 1)
    if rank != root:
        tl.send(0, root, own)
        return size, tl.rounds()
    tl.copy(0, Block("recv", rank, rank + 1), own)
    for src in range(size):
        if src != root:
            tl.recv(0, src, Block("recv", src, src + 1))
    return size, tl.rounds()


@register("scatterv", "linear", params=("root",))
@register("scatter", "linear", params=("root",))
def scatter(rank: int, size: int, root: int = 0):
    """The root sends block r to rank r for every r, all in one round.

    Cost: (p-1) alpha + (p-1)/p n beta.

    When it wins: Few ranks or large blocks: each byte crosses one link.

    Limitations: The root has p - 1 messages in flight at once.
    """
    tl = Timeline()
    own = Block("recv", rank, rank + 1)
    if rank != root:
        tl.recv(0, root, own)
        return size, tl.rounds()
    tl.copy(0, own, Block("send", rank, rank + 1))
    for dst in range(size):
        if dst != root:
            tl.send(0, dst, Block("send", dst, dst + 1))
    return size, tl.rounds()


@register("reduce", "linear", params=("root",), scratch={
    "incoming": INCOMING, "acc": Scratch("the fold of ranks 0 .. t until the root's own part joins")})
def reduce(rank: int, size: int, root: int = 0):
    """The root receives ranks 0, 1, ..., p-1 (not itself) one per round and folds them in rank order.

    Round t brings rank t (t < root) or t + 1 (t >= root).  Until the root's own
    part joins, the running fold of ranks 0 .. t lives in scratch ``acc`` (in
    place, ``recv`` still holds the root's own part); from then on in ``recv``.

    Cost: (p-1)(alpha + n beta + n gamma).

    When it wins: Never for speed; the reference (in rank order).

    Limitations: The root does all the work.
    """
    tl = Timeline()
    whole = (0, 1)
    if rank != root:
        tl.send(rank if rank < root else rank - 1, root, Block("send", *whole))
        return 1, tl.rounds()
    cur = None  # the buffer holding the fold of the ranks so far
    for src in range(size):
        t = src if src < root else src - 1
        if src == root:
            if cur is not None:  # add our own part in round root - 1, after rank root - 1's
                tl.reduce(t, Block("recv", *whole), Block(cur, *whole), Block("send", *whole))
            cur = "recv" if cur is not None else "send"
        elif cur is None:  # rank 0's part starts the fold
            tl.recv(t, src, Block("acc", *whole))
            cur = "acc"
        else:
            tl.recv(t, src, Block("incoming", *whole))
            out = "recv" if src > root else "acc"
            tl.reduce(t, Block(out, *whole), Block(cur, *whole), Block("incoming", *whole))
            cur = out
    return 1, tl.rounds()

# -- non-rooted collectives: everyone exchanges with everyone, or a chain -------

@register("allgather", "linear")
@register("allgatherv", "linear")
def allgather(rank: int, size: int):
    """One round: send the own block to every rank, receive every other block.

    Cost: (p-1) alpha + (p-1)/p n beta: one round, but a rank's p - 1 messages go out one after another
    (single port).

    When it wins: Few ranks, or networks that really overlap many messages.

    Limitations: Every rank has p - 1 messages in flight at once.
    """
    tl = Timeline()
    for peer in range(size):
        if peer != rank:
            tl.send(0, peer, Block("send", rank, rank + 1))
            tl.recv(0, peer, Block("recv", peer, peer + 1))
    tl.copy(0, Block("recv", rank, rank + 1), Block("send", rank, rank + 1))
    return size, tl.rounds()


@register("alltoall", "linear")
@register("alltoallv", "linear")
@register("alltoallw", "linear")
def alltoall(rank: int, size: int):
    """One round: send block j to every rank j, receive block j from every rank j.

    Cost: (p-1) alpha + (p-1)/p n beta: one round, messages serialized by the single port.

    When it wins: Few ranks.

    Limitations: Every rank has p - 1 messages in flight at once.
    """
    tl = Timeline()
    for peer in range(size):
        if peer != rank:
            tl.send(0, peer, Block("send", peer, peer + 1))
            tl.recv(0, peer, Block("recv", peer, peer + 1))
    tl.copy(0, Block("recv", rank, rank + 1), Block("send", rank, rank + 1))
    return size, tl.rounds()


@register("scan", "linear", scratch={"incoming": INCOMING})
def scan(rank: int, size: int):
    """A chain: rank r gets ranks 0..r-1's prefix from r - 1 in round r - 1, adds its part, passes it on.

    Cost: (p-1)(alpha + n beta + n gamma): a chain.

    When it wins: Few ranks.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    one = (0, 1)
    if rank == 0:
        tl.copy(0, Block("recv", *one), Block("send", *one))
    else:
        tl.recv(rank - 1, rank - 1, Block("incoming", *one))
        tl.reduce(rank - 1, Block("recv", *one), Block("incoming", *one), Block("send", *one))
    if rank + 1 < size:  # rank 0's prefix is its own part: send it straight from ``send``
        tl.send(rank, rank + 1, Block("send" if rank == 0 else "recv", *one))
    return 1, tl.rounds()


@register("exscan", "linear", scratch={"incoming": INCOMING,
                                       "prefix": Scratch("the prefix of ranks 0 .. r, formed to be passed on")})
def exscan(rank: int, size: int):
    """A chain as for scan, but rank r keeps the prefix of 0..r-1 and passes on 0..r.

    The prefix arrives in ``incoming`` (in place, ``recv`` still holds the own
    part), the next one is formed in ``prefix`` before ``recv`` is overwritten.
    Rank 0's ``recv`` is never written (MPI leaves it undefined).

    Cost: (p-1)(alpha + n beta + n gamma): a chain.

    When it wins: Few ranks.

    Limitations: Latency grows linearly with p.
    """
    tl = Timeline()
    one = (0, 1)
    nxt = "send"
    if rank > 0:
        tl.recv(rank - 1, rank - 1, Block("incoming", *one))
        if rank + 1 < size:
            tl.reduce(rank - 1, Block("prefix", *one), Block("incoming", *one), Block("send", *one))
            nxt = "prefix"
        tl.copy(rank - 1, Block("recv", *one), Block("incoming", *one))
    if rank + 1 < size:
        tl.send(rank, rank + 1, Block(nxt, *one))
    return 1, tl.rounds()


@register("barrier", "linear")
def barrier(rank: int, size: int):
    """Everyone signals rank 0 (round 0); rank 0 answers everyone (round 1).  Empty messages.

    Cost: 2(p-1) alpha (rank 0's messages go out one after another).

    When it wins: Never for speed; the reference barrier.

    Limitations: Rank 0 handles every message.
    """
    tl = Timeline()
    if rank == 0:
        for peer in range(1, size):
            tl.recv(0, peer, Block("recv", peer, peer + 1))
            tl.send(1, peer, Block("send", 0, 1))
    else:
        tl.send(0, 0, Block("send", rank, rank + 1))
        tl.recv(1, 0, Block("recv", 0, 1))
    return size, tl.rounds()
