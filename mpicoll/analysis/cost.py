"""The cost model: the alpha-beta-gamma time of a schedule, round by round.

Port model (full-duplex, single port).  In round t, rank r's messages go out
one after another and come in one after another, but a send and a receive
overlap::

    send_r(t) = sum over r's sends    of (alpha_m + bytes_m * beta_m)
    recv_r(t) = sum over r's receives of (alpha_m + bytes_m * beta_m)
    time_r(t) = max(send_r(t), recv_r(t)) + gamma * (bytes r reduces in round t)

A machine that is not ``duplex`` (shared memory whose cores are busy, where one
core copies a rank's outgoing and incoming bytes in turn) adds the bytes of the
two directions; their latencies still overlap::

    time_r(t) = max(sum alpha_m over sends, sum alpha_m over receives)
                + beta * (bytes r sends + bytes r receives) + gamma * (bytes reduced)

A round lasts as long as its slowest rank (rounds are global time steps), and a
schedule's time is the sum of its rounds.  A machine may also carry the cost of
the executor itself (:class:`Machine`'s ``round_overhead``, ``message_overhead``,
``step_overhead`` and ``copy``, all 0 unless measured): rank r's round t then
costs ``o_round + o_message x (messages) + o_step x (local steps) + copy x
(bytes copied)`` more, which makes small messages prefer fewer rounds.  ``alpha_m`` and ``beta_m`` are the
intra-node constants when both ends of message m share a node (``r // K ==
peer // K`` with K ranks per node) and the inter-node ones otherwise.  Bytes
come from the blocks: ``n`` bytes split evenly into the schedule's ``nblocks``
blocks (:meth:`mpicoll.ir.layout.Layout.even`).

Every rank's cost is computed from its own schedule alone (a receive names
its peer and its block), so ranks can be costed one at a time.  Up to
``EXACT_LIMIT`` ranks every rank is costed.  Above it (a ring at p = 24,576 has
p x 2(p-1) = 1.2 billion rank-rounds) the model costs a fixed *sample* of ranks
chosen to contain a slowest rank of every round for the algorithms we have:
the ends, the middle, the neighbourhoods of powers of two and of their mirror
images, the fold boundary of the non-power-of-two algorithms and node
boundaries, counted from 0 and from the root (see :func:`sample_ranks`).  If in
some round no sampled rank does anything (a chain or a linear scan, where round
t belongs to rank t), the sample provably misses that round, and every rank is
costed after all.  An algorithm registered with ``rotates=True`` (rank r's
schedule is rank 0's shifted by r, as in the ring) is costed exactly instead,
over all ranks, from rank 0's schedule alone (:func:`_rotated_rounds`).  The maximum over a
sample can only be lower than the true maximum; the unit tests check that for every registered algorithm at p <= 256
(forcing the sampling policy) the latency terms are equal, and the whole time
when n splits evenly into blocks (otherwise the sample may miss, in a round,
the rank that moves a block one byte larger).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from math import ceil, log2

import numpy as np

from mpicoll.analysis import tables
from mpicoll.analysis.walk import Worst, joined, moved, rank_terms
from mpicoll.families import registry
from mpicoll.ir.layout import Layout
from mpicoll.ir.nodes import Nodes, block_size, groups, node_of
from mpicoll.ir.schedule import EMPTY_ROUND, Block, Copy, Recv, Reduce, Round, Send

__all__ = ["Machine", "Cost", "cost", "lower_bound", "sample_ranks", "EXACT_LIMIT"]

EXACT_LIMIT = 256
CHUNK_ROUNDS = 1 << 16   # rounds of the ranks costed together, with NumPy
ROTATED_ROWS = 1024      # rounds of one shape a rotating schedule's costing takes at a time


@dataclass(frozen=True)
class Machine:
    """Cost constants (seconds, seconds per byte).

    ``alpha``/``beta`` are the inter-node (or only) constants; ``alpha_intra``
    and ``beta_intra`` apply between ranks of one node when ``ranks_per_node``
    is set.  ``alpha_by_algorithm`` overrides the inter-node alpha for named
    algorithms, as NCCL's own tuning tables carry a per-hop latency per
    algorithm (used by the ``nccl-summit`` preset; see
    :mod:`mpicoll.analysis.presets`).

    ``duplex`` false: the bytes a rank sends and receives in one round take
    turns (their beta terms add; the alphas still overlap): on shared memory
    when the cores are busy with other work, as ``calibrate`` can find.

    The last four fields price the executor's own work, per rank and round:
    ``round_overhead`` for a round the rank takes part in, ``message_overhead``
    per message it posts (send or receive), ``step_overhead`` per local step
    (a reduction or a copy, one NumPy call each) and ``copy`` per byte a
    local copy moves.  ``python -m mpicoll calibrate`` measures them for the
    Python executor; they are 0 for the modelled machines of other libraries.
    """

    alpha: float
    beta: float
    gamma: float
    alpha_intra: float | None = None
    beta_intra: float | None = None
    ranks_per_node: int | None = None
    alpha_by_algorithm: dict[str, float] = field(default_factory=dict)
    name: str = "custom"
    link_per_node: bool = False
    duplex: bool = True
    round_overhead: float = 0.0
    message_overhead: float = 0.0
    step_overhead: float = 0.0
    copy: float = 0.0

    def with_nodes(self, ranks_per_node: int | None) -> Machine:
        return replace(self, ranks_per_node=ranks_per_node)

    def constants(self, algorithm: str) -> tuple[float, float, float, float]:
        """(alpha_inter, beta_inter, alpha_intra, beta_intra) for ``algorithm``."""
        a = self.alpha_by_algorithm.get(algorithm, self.alpha)
        a_in = self.alpha_intra if self.alpha_intra is not None else a
        b_in = self.beta_intra if self.beta_intra is not None else self.beta
        return a, self.beta, a_in, b_in


@dataclass(frozen=True)
class Cost:
    """Predicted time of one algorithm, split into its alpha, beta, gamma and executor terms.

    The terms are those of the slowest rank of each round, summed over rounds
    (``overhead``: the machine's per round, message, step and copied-byte costs).
    """

    collective: str
    algorithm: str
    size: int
    nbytes: int
    latency: float
    bandwidth: float
    reduction: float
    rounds: int
    sampled: bool
    overhead: float = 0.0

    @property
    def time(self) -> float:
        return self.latency + self.bandwidth + self.reduction + self.overhead


def sample_ranks(size: int, ranks_per_node: int | None = None, root: int = 0) -> list[int]:
    """The ranks that stand for all ranks above :data:`EXACT_LIMIT` (see the module docstring).

    Counted both from 0 and from ``root`` (rooted algorithms number ranks
    from the root, some of their phases from 0): the ends and the middle and
    their neighbours; the neighbourhoods of 2^k and of their mirror images
    p - 2^k, and p' - 2^k and 2(p - p') +- 2^k (in the trees, the ranks whose subtrees
    are largest; in bruck and the dissemination and doubling algorithms, the ranks whose
    peer at distance 2^k wraps around); both sides of the fold boundary
    2(p - p') of the non-power-of-two algorithms; and, with ``ranks_per_node``
    set, the last rank of the node that holds each of these and of the node
    before (their messages cross a node boundary where the others' do not).
    """
    picks = {0, 1, 2, 3, size - 3, size - 2, size - 1, size // 2 - 1, size // 2, size // 2 + 1}
    pof2 = 1 << (size.bit_length() - 1)
    extra = size - pof2
    picks.update((2 * extra - 1, 2 * extra, 2 * extra + 1))
    k = 1
    while k < size:
        picks.update((k - 1, k, k + 1, size - k - 1, size - k, size - k + 1, pof2 - k, 2 * extra - k,
                      2 * extra + k))
        k *= 2
    picks = {x for r in picks if 0 <= r < size for x in (r, (r + root) % size)}
    if ranks_per_node:
        for r in list(picks):
            first = r - r % ranks_per_node
            picks.update((first - 1, first + ranks_per_node - 1))  # the last ranks of its node and the one before
    return sorted(r for r in picks if 0 <= r < size)


def cost(collective: str, algorithm: str, size: int, nbytes: int, machine: Machine, *,
         ranks: Iterable[int] | None = None, sample: bool | None = None, nodes: Nodes = None,
         **params: int) -> Cost:
    """The predicted time of ``algorithm`` for ``nbytes`` bytes on ``size`` ranks.

    ``ranks`` restricts the maximum to those ranks.  Otherwise every rank is
    costed up to :data:`EXACT_LIMIT` ranks, and above it (or with ``sample``
    true) the ranks of :func:`sample_ranks`, counted from ``params["root"]``;
    if in some round none of them does anything, the sample is known not to
    stand for that round (a chain, where round t is rank t's alone) and every
    rank is costed after all.  ``sample=False`` costs every rank at any size.

    ``nodes`` is the node layout (:mod:`mpicoll.ir.nodes`); by default blocks of
    ``machine.ranks_per_node``.  Algorithms that take a layout (the
    hierarchical ones) are built for it.  With ``machine.link_per_node`` a
    node's ranks share one link: a round lasts at least ``alpha + beta`` times
    the inter-node bytes the busiest node sends (or receives) in it, summed
    over the costed ranks (all of them up to :data:`EXACT_LIMIT`).
    """
    alg = registry.get(collective, algorithm)
    consts = machine.constants(algorithm)
    per_node = machine.ranks_per_node
    if nodes is None:
        nodes = per_node
    elif per_node is None:
        per_node = block_size(size, nodes) or max(len(g) for g in groups(size, nodes))
    if "nodes" in alg.params:
        params = {**params, "nodes": nodes}
    where = node_of(size, nodes) if nodes is not None else None
    nnodes = max(where) + 1 if where else 1
    crossings: list[tuple[np.ndarray, np.ndarray]] = []  # with link_per_node: (round * nnodes + node, [out, in])
    blocks = nodes is None or (isinstance(nodes, int) and nodes == per_node)  # what the rotation assumes
    fast = blocks and not machine.link_per_node and ranks is None and (
        sample or (sample is None and size > EXACT_LIMIT))
    zero = alg.rounds(0, size, **params) if fast and not alg.rotates and nodes is None and "nodes" in alg.params \
        else None
    if fast and (alg.rotates or (zero is not None and _rotates_on_probes(alg, zero, size, params))):
        worst_r = _rotated_rounds(zero or alg.rounds(0, size, **params), size, nbytes, consts, machine, per_node)
        return Cost(collective, algorithm, size, nbytes, latency=sum(w[1] for w in worst_r),
                    bandwidth=sum(w[2] for w in worst_r), reduction=sum(w[3] for w in worst_r),
                    rounds=sum(1 for w in worst_r if w[0] > 0), sampled=False,
                    overhead=sum(w[4] for w in worst_r))
    if ranks is not None:
        chosen, fallback = list(ranks), False
    elif sample or (sample is None and size > EXACT_LIMIT):
        chosen, fallback = sample_ranks(size, per_node, int(params.get("root", 0) or 0)), True
    else:
        chosen, fallback = list(range(size)), False
    worst = Worst.empty()
    layout: list[Layout] = []
    nodes_of = np.asarray(where) if where else None

    def build(r: int) -> tuple[int, tuple[Round, ...]]:
        if size <= EXACT_LIMIT:
            sched = registry.schedule(collective, algorithm, r, size, **params)
            return sched.nblocks, sched.rounds
        return alg.rounds(r, size, **params)  # built directly, so that huge schedules do not crowd the cache

    def add(chunk: list[int], read: tuple[tables.Table, ...], nrounds: int) -> None:
        """Cost the ranks of ``chunk``, in order: a rank replaces a round's slowest only if strictly slower."""
        worst.grow(nrounds)
        terms = rank_terms(chunk, read, nrounds, layout[0], consts, nodes_of, machine)
        time = np.where(terms["active"], terms["time"], -np.inf)
        first = time.argmax(axis=0)                    # the first of the slowest ranks of each round
        slower = np.flatnonzero(time[first, np.arange(nrounds)] > worst.time[:nrounds])
        for name in ("time", "latency", "bandwidth", "reduction", "overhead"):
            getattr(worst, name)[slower] = terms[name][first[slower], slower]
        worst.active[:nrounds] |= terms["active"].any(axis=0)
        if machine.link_per_node and where:   # the bytes each rank sends and receives across its node's boundary
            i, t = np.nonzero(terms["out"] | terms["into"])
            crossings.append((t * nnodes + nodes_of[np.asarray(chunk)[i]],
                              np.stack([terms["out"][i, t], terms["into"][i, t]], axis=1)))

    def add_all(ranks: list[int]) -> None:
        """Build, read and :func:`add` the ranks' schedules, about CHUNK_ROUNDS rounds at a time."""
        chunk, built, held = [], [], 0
        for i, r in enumerate(ranks):
            chunk.append(r)
            built.append(build(r))
            held += len(built[-1][1]) + 1
            if held >= CHUNK_ROUNDS or i == len(ranks) - 1:
                if not layout:
                    layout.append(Layout.even(nbytes, built[0][0]))
                rounds = [rounds for _, rounds in built]
                add(chunk, tables.read(range(len(chunk)), rounds), max(map(len, rounds)))
                chunk, built, held = [], [], 0

    def add_relabelled(ranks: list[int]) -> None:
        """:func:`add_all` for an algorithm that relabels: only the base ranks' schedules are built and read."""
        bases: dict[int, tuple[tuple[tables.Table, ...], int]] = {}
        chunk, parts, held, most = [], [], 0, 0
        for i, r in enumerate(ranks):
            base, move = alg.relabel(r, size, **params)
            if base not in bases:
                nblocks, rounds = build(base)
                if not layout:
                    layout.append(Layout.even(nbytes, nblocks))
                bases[base] = tables.read([0], [rounds]), len(rounds)
            read, nrounds = bases[base]
            chunk.append(r)
            parts.append(tuple(moved(table, move, len(chunk) - 1) for table in read))
            held, most = held + nrounds + 1, max(most, nrounds)
            if held >= CHUNK_ROUNDS or i == len(ranks) - 1:
                add(chunk, tuple(joined([part[k] for part in parts]) for k in range(3)), most)
                chunk, parts, held, most = [], [], 0, 0

    relabels = (alg.relabel is not None and size > EXACT_LIMIT
                and all(alg.relabel(r, size, **params) is not None for r in chosen))
    with registry.gc_paused():
        (add_relabelled if relabels else add_all)(chosen)
        if fallback and not worst.active.all():
            add_all(sorted(set(range(size)) - set(chosen)))
            chosen = list(range(size))
        if crossings:   # a node's link carries its ranks' inter-node bytes one after another
            t, busiest = _busiest_links(crossings, nnodes)
            busiest = busiest * consts[1]
            slower = consts[0] + busiest > worst.latency[t] + worst.bandwidth[t]
            t, busiest = t[slower], busiest[slower]
            worst.time[t] = consts[0] + busiest + worst.reduction[t] + worst.overhead[t]
            worst.latency[t], worst.bandwidth[t] = consts[0], busiest
    # sums in round order, one at a time, as Python's sum: the figures do not depend on NumPy's summation
    return Cost(collective, algorithm, size, nbytes,
                latency=sum(worst.latency.tolist()), bandwidth=sum(worst.bandwidth.tolist()),
                reduction=sum(worst.reduction.tolist()), rounds=int((worst.time > 0).sum()),
                sampled=len(chosen) < size, overhead=sum(worst.overhead.tolist()))


def _busiest_links(crossings: list[tuple[np.ndarray, np.ndarray]], nnodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The rounds in which bytes cross a node's boundary, and in each the most bytes one node sends or receives.

    ``crossings`` holds, per costed chunk of ranks, each rank's (round * nnodes + node) key and its
    [bytes out, bytes in] in that round; a node's bytes are the sum over its ranks (integers, exact).
    """
    keys = np.concatenate([key for key, _ in crossings])
    nbytes = np.concatenate([both for _, both in crossings])
    cells, at = np.unique(keys, return_inverse=True)       # sorted: round-major
    rounds = cells // nnodes
    if len(rounds) == 0:
        return rounds, rounds
    per_node = np.zeros((len(cells), 2), dtype=np.int64)
    np.add.at(per_node, at.reshape(-1), nbytes)
    first = np.flatnonzero(np.r_[True, rounds[1:] != rounds[:-1]])
    return rounds[first], np.maximum.reduceat(per_node.max(axis=1), first)


def _shifted(rnd: Round, r: int, p: int) -> Round:
    """Rank 0's round as rank r's of a rotating schedule: every peer and block index shifted by r (mod p)."""
    def b(x: Block) -> Block:
        lo = (x.lo + r) % p
        return Block(x.buf, lo, lo + x.hi - x.lo)

    return Round(tuple(Send((m.peer + r) % p, b(m.block)) for m in rnd.sends),
                 tuple(Recv((m.peer + r) % p, b(m.block)) for m in rnd.recvs),
                 tuple(Reduce(b(st.out), b(st.left), b(st.right)) if type(st) is Reduce else Copy(b(st.out), b(st.src))
                       for st in rnd.steps))


def _rotates_on_probes(alg: registry.Algorithm, zero: tuple[int, tuple[Round, ...]], size: int,
                       params: dict) -> bool:
    """Whether a node-aware algorithm on one node (``nodes`` None) rotates, judged on ranks 1, p/2 and p-1.

    A node-aware algorithm on a single node is its flat intra-node algorithm (the hierarchical all-reduce
    is then a ring): where rank 0's schedule shifted by r is rank r's at these probes, it is costed
    exactly from rank 0's as a rotating one (:func:`_rotated_rounds`) instead of over a sample of ranks
    whose schedules take p rounds each to build.  ``tests/unit/test_learner_tools.py`` checks, for every
    node-aware algorithm at small p, that the probes never accept a schedule that does not rotate at
    every rank.
    """
    nblocks, rounds = zero
    if nblocks != size:
        return False
    for r in sorted({1 % size, size // 2, size - 1} - {0}):
        nb, other = alg.rounds(r, size, **params)
        if nb != nblocks or len(other) != len(rounds):
            return False
        if any(o != (_shifted(z, r, size) if z else z) for z, o in zip(rounds, other)):
            return False
    return True


def _rotated_rounds(built: tuple[int, tuple[Round, ...]], size: int, nbytes: int,
                    consts: tuple[float, float, float, float], machine: Machine,
                    per_node: int | None) -> list[tuple[float, float, float, float, float]]:
    """Per round, the (time, latency, bandwidth, reduction, overhead) of the slowest rank, from rank 0's schedule.

    For a rotating algorithm rank r's round t is rank 0's with every peer and
    block index shifted by r (mod p = nblocks).  Its time is a function f(r) of:

    * the bytes of each shifted block range.  With the even layout,
      ``nbytes = q p + e``, blocks 0 .. e-1 hold q + 1 bytes and the others q, so
      a range's bytes change only where one of its ends crosses block 0 or e:
      at most 4 shifts per range;
    * whether each message's peer (r + d) mod p wraps past p, which changes only
      at r = p - d;
    * whether each peer is on r's node (K ranks per node): without a wrap iff
      r mod K + d < K, with one iff r mod K >= p - d, so r mod K alone.

    Between consecutive breakpoints of the first two kinds f depends on r mod K
    only, so evaluating f at the K shifts that follow each breakpoint (one
    without nodes) evaluates every value f takes: the maximum over those
    candidates is the exact maximum over all p ranks.  Rounds of the same shape
    (peers, range lengths) are evaluated together with NumPy.  Local copies are
    ranges too (their bytes price ``machine.copy``); the per round, message and
    step overheads are the same for every rank of a round of one shape.
    """
    nblocks, rounds = built
    if nblocks != size:
        raise ValueError(f"a rotating schedule must have p = {size} blocks, got {nblocks}")
    q, e = divmod(nbytes, nblocks)
    a_out, b_out, a_in, b_in = consts
    gamma = machine.gamma
    width = per_node or 1
    groups: dict[tuple, list[tuple[int, list[int]]]] = {}
    for t, rnd in enumerate(rounds):
        if rnd is EMPTY_ROUND or not rnd:
            continue
        reduces = [st.out for st in rnd.steps if type(st) is Reduce]
        copies = [st.out for st in rnd.steps if type(st) is not Reduce]
        key = (tuple((m.peer, m.block.hi - m.block.lo) for m in rnd.sends),
               tuple((m.peer, m.block.hi - m.block.lo) for m in rnd.recvs),
               tuple(b.hi - b.lo for b in reduces), tuple(b.hi - b.lo for b in copies))
        los = [m.block.lo for m in (*rnd.sends, *rnd.recvs)] + [b.lo for b in (*reduces, *copies)]
        groups.setdefault(key, []).append((t, los))
    worst = [(0.0, 0.0, 0.0, 0.0, 0.0)] * len(rounds)

    def cum(k: np.ndarray) -> np.ndarray:  # bytes of blocks 0 .. k-1
        return k * q + np.minimum(k, e)

    for (sends, recvs, reds, cops), members in groups.items():
        lo = np.array([m[1] for m in members], dtype=np.int64)                   # (R, M)
        length = np.array([n for _, n in sends] + [n for _, n in recvs] + list(reds) + list(cops),
                          dtype=np.int64)                                        # (M,)
        peers = np.array([d for d, _ in sends] + [d for d, _ in recvs], dtype=np.int64)
        hi = lo + length
        distinct = [j for j in range(lo.shape[1])  # a recv and its reduce share a range: one set of breakpoints
                    if not any(length[i] == length[j] and (lo[:, i] == lo[:, j]).all() for i in range(j))]
        for first in range(0, len(members), ROTATED_ROWS):   # a few thousand rounds at a time: in cache
            rows = slice(first, first + ROTATED_ROWS)
            part = members[rows]
            # the shifts where a range's end crosses block 0 or e, or a peer wraps past p
            edges = [(x - y[rows][:, distinct]) % size for x in sorted({0, e}) for y in (lo, hi)]
            wraps = np.broadcast_to(np.r_[0, (size - peers) % size], (len(part), 1 + len(peers)))
            cand = np.concatenate([*edges, wraps], axis=1)
            cand = ((cand[:, :, None] + np.arange(width)) % size).reshape(len(part), -1)  # (R, C)
            a = (lo[rows][:, None, :] + cand[:, :, None]) % size                              # (R, C, M)
            end = a + length
            nbytes_m = np.where(end <= size, cum(end) - cum(a), nbytes - cum(a) + cum(end - size))
            if per_node:
                peer_r = (cand[:, :, None] + peers) % size
                intra = (peer_r // per_node) == (cand[:, :, None] // per_node)            # (R, C, S+V)
            else:
                intra = np.zeros(cand.shape + (len(peers),), dtype=bool)
            lat_m = np.where(intra, a_in, a_out)
            bw_m = nbytes_m[:, :, :len(peers)] * np.where(intra, b_in, b_out)
            ns = len(sends)
            s_lat, s_bw = lat_m[:, :, :ns].sum(-1), bw_m[:, :, :ns].sum(-1)
            r_lat, r_bw = lat_m[:, :, ns:].sum(-1), bw_m[:, :, ns:].sum(-1)
            if machine.duplex:
                use_send = s_lat + s_bw >= r_lat + r_bw
                lat = np.where(use_send, s_lat, r_lat)
                bw = np.where(use_send, s_bw, r_bw)
            else:
                lat, bw = np.maximum(s_lat, r_lat), s_bw + r_bw
            first_copy = len(peers) + len(reds)
            red = gamma * nbytes_m[:, :, len(peers):first_copy].sum(-1)
            over = (machine.round_overhead + machine.message_overhead * len(peers)
                    + machine.step_overhead * (len(reds) + len(cops))
                    + machine.copy * nbytes_m[:, :, first_copy:].sum(-1))
            total = lat + bw + red + over
            best = total.argmax(axis=1)
            for i, (t, _) in enumerate(part):
                j = best[i]
                worst[t] = (float(total[i, j]), float(lat[i, j]), float(bw[i, j]), float(red[i, j]), float(over[i, j]))
    return worst


# Lower bounds: h alpha plus (bytes moved) beta plus (bytes reduced) gamma, as functions
# of (p, n); collectives not listed get the latency bound alone.  n is the whole vector for the collectives
# that split it into one part per rank (as nccl-tests count it for allgather, reduce-scatter and alltoall;
# the calls' specs and selection use the same convention for gather and scatter).  The model splits n
# evenly (Layout.even), so a rank's own part is at most ceil(n / p) bytes: the root of a gather must
# receive, and the root of a scatter send, at least n - ceil(n / p) bytes, which is (p-1)/p n when p
# divides n.  Allgather, reduce-scatter and alltoall keep (p-1)/p n: all ranks together must receive
# (p-1) n bytes, so the busiest receives at least the average.
_BOUNDS: dict[str, tuple[Callable[[int, int], float], Callable[[int, int], float]]] = {
    "allreduce": (lambda p, n: 2 * (p - 1) / p * n, lambda p, n: (p - 1) / p * n),
    "bcast": (lambda p, n: n, lambda p, n: 0.0),
    "reduce": (lambda p, n: n, lambda p, n: (p - 1) / p * n),
    "scatter": (lambda p, n: n - -(-n // p), lambda p, n: 0.0),
    "gather": (lambda p, n: n - -(-n // p), lambda p, n: 0.0),
    "allgather": (lambda p, n: (p - 1) / p * n, lambda p, n: 0.0),
    "alltoall": (lambda p, n: (p - 1) / p * n, lambda p, n: 0.0),
    "reduce_scatter": (lambda p, n: (p - 1) / p * n, lambda p, n: (p - 1) / p * n),
    "reduce_scatter_block": (lambda p, n: (p - 1) / p * n, lambda p, n: (p - 1) / p * n),
}
_BOUNDS.update({v: _BOUNDS[v[:-1]] for v in ("scatterv", "gatherv", "allgatherv", "alltoallv")})
_BOUNDS["alltoallw"] = _BOUNDS["alltoall"]


def lower_bound(collective: str, size: int, nbytes: int, machine: Machine) -> float:
    """The lower bound of any algorithm, with the smallest of the machine's constants.

    A single rank needs no message, so its bound is 0.  For p > 1 the latency
    bound is ceil(lg p) alpha; ``nbytes`` is the bytes per rank, the whole
    vector for gather, scatter, allgather, reduce-scatter and alltoall (see
    ``_BOUNDS`` for the bandwidth terms).
    """
    if size <= 1:
        return 0.0
    alphas = [machine.alpha, *machine.alpha_by_algorithm.values()]
    if machine.ranks_per_node and machine.alpha_intra is not None:
        alphas.append(machine.alpha_intra)
    beta = min(machine.beta, machine.beta_intra if machine.ranks_per_node and machine.beta_intra else machine.beta)
    bw, red = _BOUNDS.get(collective.lower(), (lambda p, n: 0.0, lambda p, n: 0.0))
    return ceil(log2(size)) * min(alphas) + bw(size, nbytes) * beta + red(size, nbytes) * machine.gamma
