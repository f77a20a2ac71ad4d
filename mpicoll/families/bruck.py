"""Bruck's algorithms: ceil(lg p) steps for any p, at distances 1, 2, 4, ...

In step k every rank sends to rank - 2^k (all-gather) or rank + 2^k (all-to-all)
and receives from the opposite side, so p need not be a power of two.  The
all-gather moves (p-1)/p of the data in all; the all-to-all trades bandwidth
(about half the data per step) for latency: good for small blocks.
"""

from __future__ import annotations

from mpicoll.families.catalog import register
from mpicoll.ir.schedule import Block, Scratch, Timeline


def wrapped(start: int, n: int, size: int) -> list[tuple[int, int]]:
    """Blocks start, start + 1, ..., start + n - 1 (mod ``size``) as at most two contiguous ranges."""
    start %= size
    if start + n <= size:
        return [(start, start + n)] if n else []
    return [(start, size), (0, start + n - size)]


@register("allgather", "bruck")
def allgather(rank: int, size: int):
    """Bruck all-gather, working in ``recv`` directly (no final rotation).

    Before step k rank r holds the n_k = 2^k blocks r, r+1, ..., r+n_k-1 (mod p).
    In step k it sends the first min(2^k, p - 2^k) of them to r - 2^k and gets
    as many from r + 2^k: blocks r + 2^k, ... (mod p), which extend its run.  The
    same absolute blocks are named on both sides, so a run that wraps past
    block p-1 is sent as two messages.  ceil(lg p) steps; step 0 sends the own
    block straight from ``send``.

    Cost: ceil(lg p) alpha + (p-1)/p n beta.

    When it wins: Small and medium messages on any p: logarithmic rounds like recursive doubling, but without
    its extra steps when p is not a power of two.

    Limitations: The last step sends only the p - 2^(h-1) blocks still missing, so its messages are uneven.
    """
    tl = Timeline()
    tl.copy(0, Block("recv", rank, rank + 1), Block("send", rank, rank + 1))
    k = 0
    while (1 << k) < size:
        dist = 1 << k
        n = min(dist, size - dist)
        for lo, hi in wrapped(rank, n, size):
            tl.send(k, (rank - dist) % size, Block("send" if k == 0 else "recv", lo, hi))
        for lo, hi in wrapped(rank + dist, n, size):
            tl.recv(k, (rank + dist) % size, Block("recv", lo, hi))
        k += 1
    return size, tl.rounds()


def bit_runs(bit: int, size: int) -> list[tuple[int, int]]:
    """Positions i < ``size`` with ``i & bit`` set, as contiguous runs [lo, hi)."""
    return [(lo, min(lo + bit, size)) for lo in range(bit, size, 2 * bit)]


@register("alltoall", "bruck", scratch={
    "rotated": Scratch("position i: the block that still has to travel i ranks to the right"),
    "outbox": Scratch("this step's blocks packed to be sent (positions with bit k set)"),
    "inbox": Scratch("this step's packed blocks, received")})
def alltoall(rank: int, size: int):
    """Bruck all-to-all: rotate, ceil(lg p) exchanges of packed blocks, rotate back.

    ``rotated`` position i holds the block that still has to travel i ranks to the
    right: first the one for rank r + i (send block (r + i) mod p).  In step k
    every block whose remaining distance has bit k set moves 2^k to the right:
    positions with bit k set (runs of 2^k positions) are packed into ``outbox``,
    sent to r + 2^k, received from r - 2^k into ``inbox`` and unpacked to the
    same positions.  Afterwards position i holds the block rank r - i sent to r,
    which belongs in ``recv`` block (r - i) mod p.

    Cost: ceil(lg p) alpha + about ceil(lg p) n/2 beta (each step sends the blocks whose distance has that bit
    set) plus two local rotations.

    When it wins: Small messages on many ranks: lg p messages instead of p - 1.

    Limitations: Each byte travels about lg p / 2 times, so it loses to pairwise exchange for large messages.
    """
    tl = Timeline()
    tl.copy(0, Block("rotated", 0, size - rank), Block("send", rank, size))
    if rank:
        tl.copy(0, Block("rotated", size - rank, size), Block("send", 0, rank))
    steps = (size - 1).bit_length()
    for k in range(steps):
        runs, dist = bit_runs(1 << k, size), 1 << k
        packed = [(lo, hi, m) for (lo, hi), m in zip(runs, _offsets(runs))]
        n = sum(hi - lo for lo, hi in runs)
        for lo, hi, m in packed:  # pack, after the previous round's messages
            tl.copy(k, Block("outbox", m, m + hi - lo), Block("rotated", lo, hi))
        tl.send(k + 1, (rank + dist) % size, Block("outbox", 0, n))
        tl.recv(k + 1, (rank - dist) % size, Block("inbox", 0, n))
        for lo, hi, m in packed:  # unpack
            tl.copy(k + 1, Block("rotated", lo, hi), Block("inbox", m, m + hi - lo))
    for i in range(size):
        j = (rank - i) % size
        tl.copy(steps, Block("recv", j, j + 1), Block("rotated", i, i + 1))
    return size, tl.rounds()


def _offsets(runs: list[tuple[int, int]]) -> list[int]:
    """Where each run starts once the runs are packed one after the other."""
    out, m = [], 0
    for lo, hi in runs:
        out.append(m)
        m += hi - lo
    return out
