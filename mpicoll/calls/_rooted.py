"""Helpers shared by the rooted collectives (Bcast, Reduce, Gather(v), Scatter(v)).

Their buffers are not alike on every rank: the root's gather buffer has p
blocks, a non-root's send buffer is one block.  All buffers of a schedule share
one block index space, so a rank's own buffer is *block r of an otherwise empty
buffer* (:func:`only`), and the symbolic values below follow the same rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..buffers import as_count
from ..families.binomial import subtree
from ..layout import Layout
from . import Value, own

__all__ = ["check_root", "subtree_layout", "at", "check_same_type", "from_root"]


def check_root(root: Any, size: int, method: str) -> int:
    """``root`` as an int in 0 .. size-1, or a ValueError naming it and the size."""
    try:
        value = as_count(root, "root")
    except (TypeError, ValueError):
        value = -1
    if not isinstance(root, (int, np.integer)) or isinstance(root, bool) or not 0 <= value < size:
        raise ValueError(f"root: {method} needs a root rank in 0 .. {size - 1} (the communicator has "
                         f"{size} rank{'s' if size > 1 else ''}), got {root!r}")
    return value




def subtree_layout(rank: int, size: int, root: int, per: int) -> tuple[Layout, int]:
    """Scratch for a binomial gather/scatter: only this rank's subtree, own block first.

    The subtree of relative rank v is the blocks of ranks v .. v + n - 1
    (mod p, absolute); block b sits at position (b - rank) mod p.  Every
    message of the binomial schedules is an absolute range that does not wrap,
    so it is contiguous here too.  Returns the layout and the scratch size.
    """
    n = subtree((rank - root) % size, size)
    pos = [(b - rank) % size for b in range(size)]
    starts = [u * per if u < n else 0 for u in pos]
    ends = [(u + 1) * per if u < n else 0 for u in pos]
    return Layout(starts, ends), n * per




def check_same_type(a: Any, b: Any, what: str, other: str) -> None:
    """``a`` and ``b`` (Buffer or VBuffer) must hold the same dtype in the same array library."""
    if a.dtype != b.dtype or a.unit != b.unit:
        raise TypeError(f"{what}: dtype {a.dtype} differs from {other}'s {b.dtype}")
    if a.xp is not b.xp:
        raise TypeError(f"{what} and {other} must both be host arrays or both device arrays")


def at(rank: int, size: int, value: Value | None) -> list[Value | None]:
    """A symbolic buffer whose only known block is block ``rank``."""
    out: list[Value | None] = [None] * size
    out[rank] = value
    return out


def from_root(root: int, blocks: range) -> list[Value]:
    """Blocks that all come from the root."""
    return [own(root, b) for b in blocks]
