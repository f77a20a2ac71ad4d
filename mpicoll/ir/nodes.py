"""Which ranks share a node: the layout the hierarchical algorithms are built for.

A *node layout* is given to a schedule builder as the parameter ``nodes``, in
one of three forms:

- ``None``: all ranks on one node;
- an ``int`` k: consecutive blocks of k ranks are nodes (the last may be short);
- a tuple with one node id per rank (any hashable ids, e.g. from
  ``Split_type(COMM_TYPE_SHARED)``), for layouts where a node's ranks are not
  consecutive.

:func:`groups` turns any of them into the nodes' member lists.  A live
communicator's layout is found once, when it is made (:mod:`mpicoll.comm.setup`:
``MPICOLL_NODE_SIZE=k`` forces blocks of k; otherwise ranks on one host are a
node), and every rank holds the same one.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Union

__all__ = ["Nodes", "groups", "node_of", "is_multi_node", "block_size"]

Nodes = Union[None, int, tuple]


@lru_cache(maxsize=64)
def groups(size: int, nodes: Nodes) -> tuple[tuple[int, ...], ...]:
    """The nodes' member ranks (ascending), nodes ordered by their lowest rank.

    Raises ValueError for a layout that does not fit ``size`` ranks.
    """
    if nodes is None:
        return (tuple(range(size)),) if size else ()
    if isinstance(nodes, int) and not isinstance(nodes, bool):
        if nodes < 1:
            raise ValueError(f"nodes: ranks per node must be at least 1, got {nodes}")
        return tuple(tuple(range(lo, min(lo + nodes, size))) for lo in range(0, size, nodes))
    if isinstance(nodes, tuple):
        if len(nodes) != size:
            raise ValueError(f"nodes: expected one node id per rank ({size}), got {len(nodes)}")
        members: dict[Any, list[int]] = {}
        for rank, node in enumerate(nodes):
            members.setdefault(node, []).append(rank)
        return tuple(tuple(m) for m in members.values())  # dicts keep insertion order: by lowest rank
    raise TypeError(f"nodes: expected None, an int or a tuple of node ids, got {type(nodes).__name__}")


@lru_cache(maxsize=64)
def node_of(size: int, nodes: Nodes) -> tuple[int, ...]:
    """Index (into :func:`groups`) of each rank's node."""
    out = [0] * size
    for n, members in enumerate(groups(size, nodes)):
        for r in members:
            out[r] = n
    return tuple(out)


def is_multi_node(size: int, nodes: Nodes) -> bool:
    """More than one node, and some node with more than one rank: where hierarchy can pay."""
    g = groups(size, nodes)
    return len(g) > 1 and any(len(m) > 1 for m in g)


def block_size(size: int, nodes: Nodes) -> int | None:
    """k when the layout is consecutive blocks of k ranks (the cost model's ``ranks_per_node``), else None."""
    g = groups(size, nodes)
    k = len(g[0]) if g else 1
    return k if g == groups(size, k) else None


def normalized(ids: tuple) -> Nodes:
    """A layout given as one node id per rank, in its simplest form: None (one node), k (blocks of k), or ids."""
    if len(set(ids)) <= 1:
        return None
    k = block_size(len(ids), ids)
    return k if k is not None else ids


def restricted(size: int, nodes: Nodes, members: list[int]) -> Nodes:
    """The layout of the ranks ``members`` (in the new order) of a layout of ``size`` ranks."""
    of = node_of(size, nodes)
    return normalized(tuple(of[r] for r in members))
