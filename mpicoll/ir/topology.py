"""Virtual topologies as data: who a rank's neighbours are, in MPI's order (no MPI needed).

A neighbourhood collective's schedule is a function of the rank's neighbour
lists, which these classes give for any rank: :class:`Cart` (``Create_cart``:
dimensions and periods), :class:`Graph` (``Create_graph``: index and edges) and
:class:`DistGraph` (``Create_dist_graph`` / ``_adjacent``: each rank's sources
and destinations, as far as they are known: at run time a rank knows only its
own).  ``neighbors(rank)`` returns ``(sources, destinations)`` exactly as MPI
orders them for ``MPI_Neighbor_*``; a missing neighbour (the edge of a
non-periodic Cartesian dimension) is ``None``, where MPI says ``MPI_PROC_NULL``.

- Cartesian: for each dimension d, the rank at coordinate ``c[d] - 1``, then
  the one at ``c[d] + 1`` (``MPI_Cart_shift(d, 1)``'s source and destination),
  for both lists; ranks are numbered row-major (C order), as ``Create_cart``
  without reordering numbers them.  The message a rank sends in the +d
  direction (block 2d + 1) is what its +d neighbour receives from its -d side
  (block 2d): :attr:`Cart.paired` says so, and it decides which message is which
  where both neighbours are the same rank (a periodic dimension of 1 or 2).
- Graph: a rank's neighbours ``edges[index[r-1]:index[r]]`` are both its sources
  and its destinations.
- Distributed graph: the lists as given, duplicates kept; the k-th message
  from rank a to rank b (in a's destination order) is the k-th that b receives
  from a (in b's source order).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

__all__ = ["Cart", "Graph", "DistGraph", "Topology", "matching_send"]

Lists = tuple[tuple, tuple]


@dataclass(frozen=True)
class Cart:
    """A Cartesian topology: ``dims`` ranks along each dimension, ``periods`` which wrap around."""

    dims: tuple[int, ...]
    periods: tuple[bool, ...]
    paired = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        object.__setattr__(self, "periods", tuple(bool(p) for p in self.periods))
        if len(self.dims) != len(self.periods):
            raise ValueError(f"Cart: {len(self.dims)} dims but {len(self.periods)} periods")

    @property
    def size(self) -> int:
        return prod(self.dims)

    def coords(self, rank: int) -> list[int]:
        out = []
        for d in reversed(self.dims):
            rank, c = divmod(rank, d)
            out.append(c)
        return out[::-1]

    def rank_of(self, coords: list[int]) -> int:
        rank = 0
        for c, d in zip(coords, self.dims):
            rank = rank * d + c
        return rank

    def shift(self, rank: int, dim: int, disp: int) -> int | None:
        """The rank ``disp`` steps along ``dim`` (None past a non-periodic edge)."""
        coords = self.coords(rank)
        c = coords[dim] + disp
        if not 0 <= c < self.dims[dim]:
            if not self.periods[dim]:
                return None
            c %= self.dims[dim]
        coords[dim] = c
        return self.rank_of(coords)

    def neighbors(self, rank: int) -> Lists:
        lists = tuple(n for d in range(len(self.dims)) for n in (self.shift(rank, d, -1), self.shift(rank, d, 1)))
        return lists, lists

    def degree(self) -> int:
        return 2 * len(self.dims)


@dataclass(frozen=True)
class Graph:
    """A graph topology as ``Create_graph`` takes it: ``index[r]`` edges end at rank r's (cumulative)."""

    index: tuple[int, ...]
    edges: tuple[int, ...]
    paired = False

    def neighbors(self, rank: int) -> Lists:
        lo = self.index[rank - 1] if rank > 0 else 0
        lists = tuple(self.edges[lo:self.index[rank]])
        return lists, lists

    def degree(self) -> int:
        return max((b - a for a, b in zip((0, *self.index), self.index)), default=0)


@dataclass(frozen=True)
class DistGraph:
    """A distributed graph: ``lists[r] = (sources, destinations)`` of rank r, or None where unknown."""

    lists: tuple
    paired = False

    @classmethod
    def local(cls, rank: int, size: int, sources: tuple, destinations: tuple) -> DistGraph:
        """What one rank knows at run time: its own lists only."""
        lists: list = [None] * size
        lists[rank] = (tuple(sources), tuple(destinations))
        return cls(tuple(lists))

    def neighbors(self, rank: int) -> Lists:
        known = self.lists[rank]
        if known is None:
            raise ValueError(f"DistGraph: rank {rank}'s neighbours are not known here")
        return known

    def degree(self) -> int:
        return max((max(len(s), len(d)) for s, d in (x for x in self.lists if x is not None)), default=0)


Topology = Cart | Graph | DistGraph


def matching_send(topology: Topology, rank: int, k: int) -> int | None:
    """Which of its send blocks rank ``sources[k]`` sends to ``rank``'s receive block ``k`` (MPI's rule, said
    independently of how a schedule lists its messages: for the checker)."""
    sources, _ = topology.neighbors(rank)
    src = sources[k]
    if src is None:
        return None
    if topology.paired:   # block 2d comes from the -d neighbour, which sent it +d (its block 2d + 1)
        return k ^ 1
    nth = sources[:k].count(src)
    _, their_dests = topology.neighbors(src)
    hits = [j for j, d in enumerate(their_dests) if d == rank]
    return hits[nth]
