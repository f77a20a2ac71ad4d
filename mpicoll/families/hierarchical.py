"""Node-aware (hierarchical) algorithms: fast links inside a node, few bytes between nodes.

Every builder takes the node layout ``nodes`` (see :mod:`mpicoll.ir.nodes`: None for
one node, an int k for blocks of k consecutive ranks, or a node id per rank).
Nodes may differ in size (3 + 2 ranks).  Let L be the number of nodes and m the
largest node's size.  Phases run one after another in global rounds; a node
with fewer ranks than m idles through the rounds its larger peers need.

A node's *leader* is its lowest rank, except that the root's node is led by
the root.  Sub-schedules over a group of ranks (a node, or the leaders) are
built by the flat helpers on local indices 0 .. g-1 and mapped onto the
group's ranks by :func:`_on`.
"""

from __future__ import annotations

from mpicoll.families import binomial
from mpicoll.families.binomial import INCOMING, height
from mpicoll.families.catalog import register
from mpicoll.ir.nodes import Nodes, groups, node_of
from mpicoll.ir.schedule import BLOCKS, Block, Recv, Reduce, Round, Scratch, Send, Timeline


def _on(rounds: tuple[Round, ...], members: tuple[int, ...]) -> tuple[Round, ...]:
    """Rounds built on local indices, with every peer i replaced by ``members[i]``."""
    return tuple(Round(tuple(Send(members[s.peer], s.block) for s in r.sends),
                       tuple(Recv(members[x.peer], x.block) for x in r.recvs), r.steps) for r in rounds)


def _layout(rank: int, size: int, nodes: Nodes, root: int = 0):
    """(node members, leaders of all nodes, this rank's node index, local index)."""
    g = groups(size, nodes)
    where = node_of(size, nodes)
    leaders = tuple(root if where[root] == n else members[0] for n, members in enumerate(g))
    n = where[rank]
    return g[n], leaders, n, g[n].index(rank)


def _runs(ranks: tuple[int, ...]) -> list[tuple[int, int]]:
    """Sorted ranks as maximal ranges [lo, hi) of consecutive ranks (their blocks, one message each)."""
    out: list[tuple[int, int]] = []
    for r in ranks:
        if out and out[-1][1] == r:
            out[-1] = (out[-1][0], r + 1)
        else:
            out.append((r, r + 1))
    return out


# -- allreduce ---------------------------------------------------------------------------------------


def _shards(i: int, s: int, m: int) -> tuple[int, int]:
    """Shards [lo, hi) that local rank i of a node of s ranks owns, of m = largest node size.

    floor(i m / s) .. floor((i + 1) m / s): contiguous, and at least one each as s <= m.
    """
    return i * m // s, (i + 1) * m // s


def _owner(j: int, s: int, m: int) -> int:
    """The local rank of a node of s ranks that owns shard j (the i with floor(i m/s) <= j)."""
    return ((j + 1) * s - 1) // m


def _allreduce_relabel(rank: int, size: int, nodes: Nodes = None):
    """On nodes of k ranks each (k dividing p), rank n k + i's all-reduce is rank i's moved n nodes on.

    Every peer moves n k ranks on (mod p), and every single-block range, a part of a shard
    in phase 2, moves n parts on within its shard; the ranges of whole shards (phases 1
    and 3) stay.  ``(i, move)``, or None for any other layout (see :func:`register`).
    """
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1 or size % nodes:
        return None
    nnodes = size // nodes
    n, i = divmod(rank, nodes)

    def move(peers, los, his):
        single = (his - los) == 1
        part = los + single * ((los % nnodes + n) % nnodes - los % nnodes)
        return (peers + n * nodes) % size, part, part + (his - los)

    return i, move


@register("allreduce", "hierarchical", keeps_order=False, params=("nodes",), relabel=_allreduce_relabel,
          scratch={"incoming": Scratch("a neighbour's partial sum of a shard, received and added at once")})
def allreduce(rank: int, size: int, nodes: Nodes = None):
    """Intra-node reduce-scatter, inter-node ring all-reduce per shard, intra-node all-gather.

    The data is m shards of L blocks each (m L blocks; block j L + q is part q
    of shard j).  Local rank i of a node of s ranks owns shards floor(i m / s)
    up to floor((i + 1) m / s), m being the largest node's size (at least one each).

    1. Rounds 0 .. m-2: a ring reduce-scatter over the node's s ranks (as
       :func:`mpicoll.families.ring.reduce_scatter_steps`, s - 1 steps, each
       "block" being one rank's shard range): rank i ends with its shards
       reduced over its node, in ``recv``.
    2. Next 2(L-1) rounds: for each shard j, the L owners of j (one per node,
       in node order) run a ring all-reduce on the shard's L parts: L - 1
       reduce-scatter steps, then L - 1 all-gather steps.  Every rank sends
       2 (L-1)/L of its shards over the network, so a node sends 2 (L-1)/L n in
       all, spread over all its ranks.
    3. Last m - 1 rounds: a ring all-gather of the shard ranges inside the node.

    Cost: 2(m-1) alpha_intra + 2(m-1)/m n beta_intra + 2(L-1) alpha + 2 (L-1)/(L m) n beta per rank, or
    2 (L-1)/L n beta per node link where the node's ranks share one, + ((m-1)/m + (L-1)/(L m)) n gamma.

    When it wins: Large messages on several nodes with more than one rank each: a node sends 2 (L-1)/L n
    bytes (a flat ring's boundary rank alone sends 2 (p-1)/p n), and every rank shares the network work.

    Limitations: Shards are summed around rings, so the sum is not combined in rank order; on uneven nodes a
    rank of a small node owns several shards and so carries more of the network traffic.
    """
    members, _, n, i = _layout(rank, size, nodes)
    g = groups(size, nodes)
    nnodes, s = len(g), len(members)
    m = max(len(x) for x in g)
    tl = Timeline()

    def span(k: int) -> tuple[int, int]:  # blocks of local rank k's shard range
        lo, hi = _shards(k, s, m)
        return lo * nnodes, hi * nnodes

    nxt, prv = members[(i + 1) % s], members[(i - 1) % s]
    # phase 1: step t sends range (i - t - 1) mod s, receives (i - t - 2) mod s and adds its own part
    for t in range(s - 1):
        out, got = span((i - t - 1) % s), span((i - t - 2) % s)
        tl.send(t, nxt, Block("send" if t == 0 else "recv", *out))
        tl.recv(t, prv, Block("incoming", *got))
        tl.reduce(t, Block("recv", *got), Block("incoming", *got), Block("send", *got))
    if s == 1:
        tl.copy(0, Block("recv", 0, m * nnodes), Block("send", 0, m * nnodes))
    # phase 2: per owned shard j (ascending on every rank, so two messages between one pair match in order)
    t0 = max(m - 1, 1)  # with one rank per node, after the round-0 copy
    for j in range(*_shards(i, s, m)):
        after = g[(n + 1) % nnodes]
        before = g[(n - 1) % nnodes]
        to, frm = after[_owner(j, len(after), m)], before[_owner(j, len(before), m)]
        # The part received (and summed) in one step is the part sent in the next; the parts' blocks are
        # listed once, and each step is one exchange (at p = 24,576 the cost model builds these rounds
        # for 167 sampled ranks).
        parts = [BLOCKS["recv", b, b + 1] for b in range(j * nnodes, (j + 1) * nnodes)]
        incoming = [BLOCKS["incoming", b, b + 1] for b in range(j * nnodes, (j + 1) * nnodes)]
        sent = parts[(n - 1) % nnodes]
        for t in range(nnodes - 1):  # ring reduce-scatter of the shard's L parts
            got = (n - t - 2) % nnodes
            tl.exchange(t0 + t, to, sent, frm, incoming[got], Reduce(parts[got], incoming[got], parts[got]))
            sent = parts[got]
        sent = parts[n]
        for t in range(nnodes - 1):  # ring all-gather of the parts
            got = (n - t - 1) % nnodes
            tl.exchange(t0 + nnodes - 1 + t, to, sent, frm, parts[got])
            sent = parts[got]
    # phase 3: step t forwards range (i - t) mod s and receives (i - t - 1) mod s
    t0 += 2 * (nnodes - 1)
    for t in range(s - 1):
        tl.send(t0 + t, nxt, Block("recv", *span((i - t) % s)))
        tl.recv(t0 + t, prv, Block("recv", *span((i - t - 1) % s)))
    return m * nnodes, tl.rounds()


# -- bcast and reduce ----------------------------------------------------------------------------------


@register("bcast", "hierarchical", params=("root", "nodes"))
def bcast(rank: int, size: int, root: int = 0, nodes: Nodes = None):
    """Binomial tree among the node leaders from the root, then a binomial tree inside every node.

    ceil(lg L) + ceil(lg m) rounds; only the leaders' tree crosses nodes, each
    node receiving the data once.

    Cost: ceil(lg L) (alpha + n beta) + ceil(lg m) (alpha_intra + n beta_intra).

    When it wins: Small and medium messages on several nodes: ceil(lg L) network hops instead of
    up to ceil(lg p), and no node receives the data twice.

    Limitations: Not pipelined: for large messages a scatter-allgather or pipelined tree moves fewer bytes
    per rank.
    """
    members, leaders, n, i = _layout(rank, size, nodes, root)
    tl = Timeline()
    if rank == leaders[n]:
        sub = Timeline()
        binomial.bcast_steps(sub, 0, n, len(leaders), leaders.index(root), (0, 1))
        tl.extend(0, _on(sub.rounds(), leaders))
    sub = Timeline()
    binomial.bcast_steps(sub, 0, i, len(members), members.index(leaders[n]), (0, 1))
    tl.extend(height(len(leaders)), _on(sub.rounds(), members))
    return 1, tl.rounds()


@register("reduce", "hierarchical", keeps_order=lambda size: size <= 2, params=("root", "nodes"), scratch={
    "incoming": INCOMING, "acc": Scratch("a non-root's partial result (it has no receive buffer)")})
def reduce(rank: int, size: int, root: int = 0, nodes: Nodes = None):
    """Binomial reduce inside every node to its lowest rank, then among those to rank 0, then to the root.

    ceil(lg m) + ceil(lg L) rounds, one more when the root is not rank 0.  When
    the nodes are blocks of consecutive ranks every partial sum covers a
    contiguous range of ranks, combined in rank order (as
    :func:`mpicoll.families.binomial.reduce`); other layouts lose the order,
    so the algorithm claims it only for p <= 2 (where every layout keeps it).
    Ranks other than the root accumulate in scratch (``acc``).

    Cost: ceil(lg m) (alpha_intra + n beta_intra + n gamma) + ceil(lg L) (alpha + n beta + n gamma),
    plus alpha + n beta when the root is not rank 0.

    When it wins: Small and medium messages on several nodes: each node sends its partial result over the
    network once.

    Limitations: Not pipelined.
    """
    members, leaders, n, i = _layout(rank, size, nodes)  # leaders: each node's lowest rank
    acc = "recv" if rank == root else "acc"
    tl = Timeline()
    sub = Timeline()
    cur = binomial.reduce_steps(sub, 0, i, len(members), 0, (0, 1), acc=acc)
    tl.extend(0, _on(sub.rounds(), members))
    t = height(max(len(x) for x in groups(size, nodes)))
    if rank == leaders[n]:
        sub = Timeline()
        cur = binomial.reduce_steps(sub, 0, n, len(leaders), 0, (0, 1), src=cur, acc=acc)
        tl.extend(t, _on(sub.rounds(), leaders))
    t += height(len(leaders))
    if root != 0 and rank == 0:
        tl.send(t, root, Block(cur, 0, 1))
    elif root != 0 and rank == root:
        tl.recv(t, 0, Block("recv", 0, 1))
    return 1, tl.rounds()


# -- allgather and barrier -----------------------------------------------------------------------------


@register("allgather", "hierarchical", params=("nodes",))
@register("allgatherv", "hierarchical", params=("nodes",))
def allgather(rank: int, size: int, nodes: Nodes = None):
    """Gather to the node leader, ring all-gather of whole nodes among leaders, broadcast in the node.

    Round 0: every rank sends its block to its leader (the leader copies its
    own).  Rounds 1 .. L-1: leader of node k sends, in step t, the blocks of
    node (k - t) mod L to the next leader and receives those of node
    (k - t - 1) mod L.  Then a binomial broadcast of all p blocks inside each
    node (ceil(lg m) rounds).  Only leaders cross nodes, (L-1)/L of the data each.

    Cost: (alpha_intra + m/p n beta_intra) + (L-1) (alpha + m/p n beta) + ceil(lg m) (alpha_intra +
    n beta_intra), with n the whole gathered vector.

    When it wins: Several nodes with many ranks each and a slow network: each node's data crosses the
    network once per node, in L - 1 messages instead of p - 1.

    Limitations: Only the leaders use the network; the intra-node broadcast sends the whole vector.
    """
    members, leaders, n, i = _layout(rank, size, nodes)
    g = groups(size, nodes)
    nnodes = len(g)
    tl = Timeline()
    tl.copy(0, Block("recv", rank, rank + 1), Block("send", rank, rank + 1))
    if rank != leaders[n]:
        tl.send(0, leaders[n], Block("send", rank, rank + 1))
    else:
        for r in members:
            if r != rank:
                tl.recv(0, r, Block("recv", r, r + 1))
        for t in range(nnodes - 1):
            for lo, hi in _runs(g[(n - t) % nnodes]):
                tl.send(1 + t, leaders[(n + 1) % nnodes], Block("recv", lo, hi))
            for lo, hi in _runs(g[(n - t - 1) % nnodes]):
                tl.recv(1 + t, leaders[(n - 1) % nnodes], Block("recv", lo, hi))
    if len(members) > 1:
        sub = Timeline()
        binomial.bcast_steps(sub, 0, i, len(members), members.index(leaders[n]), (0, size))
        tl.extend(nnodes, _on(sub.rounds(), members))
    return size, tl.rounds()


@register("barrier", "hierarchical", params=("nodes",))
def barrier(rank: int, size: int, nodes: Nodes = None):
    """Arrive at the node leader, dissemination among the leaders, release from the leader.

    1 + ceil(lg L) + 1 rounds of empty messages; no rank leaves before its
    leader has heard (through the dissemination) from every leader, each of
    which has heard from all its node's ranks.

    Cost: 2 alpha_intra (m - 1 messages at the leader each way) + ceil(lg L) alpha.

    When it wins: Many ranks per node and a network latency well above the shared-memory one.

    Limitations: The leader receives and sends m - 1 messages one after another (linear in m).
    """
    members, leaders, n, _ = _layout(rank, size, nodes)
    nnodes = len(leaders)
    tl = Timeline()
    lead = leaders[n]
    last = 1 + height(nnodes)
    one = Block("send", rank, rank + 1)  # block r carries rank r's token (one block per rank: size blocks)
    if len(members) > 1:
        if rank != lead:
            tl.send(0, lead, one)
            tl.recv(last, lead, Block("recv", lead, lead + 1))
        else:
            for r in members:
                if r != rank:
                    tl.recv(0, r, Block("recv", r, r + 1))
                    tl.send(last, r, one)
    if rank == lead:
        for k in range(height(nnodes)):
            src = leaders[(n - (1 << k)) % nnodes]
            tl.send(1 + k, leaders[(n + (1 << k)) % nnodes], one)
            tl.recv(1 + k, src, Block("recv", src, src + 1))
    return size, tl.rounds()
