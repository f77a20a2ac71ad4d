"""Which ranks share a node: the layout the hierarchical algorithms are built for.

A *node layout* is given to a schedule builder as the parameter ``nodes``, in
one of three forms:

- ``None``: all ranks on one node;
- an ``int`` k: consecutive blocks of k ranks are nodes (the last may be short);
- a tuple with one node id per rank (any hashable ids, e.g. from
  ``Split_type(COMM_TYPE_SHARED)``), for layouts where a node's ranks are not
  consecutive.

:func:`groups` turns any of them into the nodes' member lists.  On a live
communicator :func:`of_comm` finds the layout once (``MPICOLL_NODE_SIZE=k``
forces blocks of k; otherwise ranks that share memory are a node) and keeps it
on the communicator: every rank must build its schedule for the same layout,
so it is agreed by an allgather, not guessed locally.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Nodes", "groups", "node_of", "of_comm", "env_node_size", "is_multi_node", "block_size"]

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


def env_node_size() -> int | None:
    """``MPICOLL_NODE_SIZE`` as an int, or None when unset; ValueError when malformed."""
    text = os.environ.get("MPICOLL_NODE_SIZE", "").strip()
    if not text:
        return None
    try:
        k = int(text)
    except ValueError:
        raise ValueError(f"MPICOLL_NODE_SIZE: expected a positive integer, got {text!r}") from None
    if k < 1:
        raise ValueError(f"MPICOLL_NODE_SIZE: expected a positive integer, got {text!r}")
    return k


def of_comm(comm: MPI.Intracomm) -> Nodes:
    """The node layout of ``comm`` (collective on first use; kept on ``comm`` afterwards).

    ``MPICOLL_NODE_SIZE=k`` gives blocks of k ranks without any message.
    Otherwise the ranks of ``Split_type(COMM_TYPE_SHARED)`` form a node; each
    rank names its node by the lowest rank of its shared-memory communicator,
    and the names are allgathered so that every rank holds the same tuple.
    Returns ``None`` (one node) when all ranks share one node.
    """
    k = env_node_size()
    if k is not None:
        return k
    cached = getattr(comm, "__dict__", {}).get("_mpicoll_nodes", "unset")
    if cached != "unset":
        return cached
    from mpi4py import MPI  # noqa: PLC0415

    talk = getattr(comm, "private", comm)  # mpicoll's Comm: its private duplicate carries the messages
    shared = talk.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        lowest = min(shared.group.Translate_ranks(list(range(shared.size)), talk.group))
    finally:
        shared.Free()
    ids = tuple(talk.allgather(lowest))
    layout: Nodes = ids
    if len(set(ids)) == 1:
        layout = None
    elif block_size(len(ids), ids) is not None:  # consecutive blocks of k: say k (the cost model's form)
        layout = block_size(len(ids), ids)
    if hasattr(comm, "__dict__"):
        comm.__dict__["_mpicoll_nodes"] = layout
    return layout
