"""Helpers shared by the rooted collectives (Bcast, Reduce, Gather(v), Scatter(v)).

Their buffers are not alike on every rank: the root's gather buffer has p
blocks, a non-root's send buffer is one block.  All buffers of a schedule share
one block index space, so a rank's own buffer is *block r of an otherwise empty
buffer* (:meth:`mpicoll.ir.layout.Layout.only`); their contracts follow the same
rule (:mod:`mpicoll.ir.contracts`).
"""

from __future__ import annotations

from mpicoll.families.binomial import subtree
from mpicoll.ir.layout import Layout

__all__ = ["subtree_layout"]


def subtree_layout(rank: int, size: int, root: int, per: int) -> Layout:
    """Scratch for a binomial gather/scatter: only this rank's subtree, own block first.

    The subtree of relative rank v is the blocks of ranks v .. v + n - 1
    (mod p, absolute); block b sits at position (b - rank) mod p.  Every
    message of the binomial schedules is an absolute range that does not wrap,
    so it is contiguous here too.  The buffer spans n x ``per`` elements.
    """
    n = subtree((rank - root) % size, size)
    pos = [(b - rank) % size for b in range(size)]
    starts = [u * per if u < n else 0 for u in pos]
    ends = [(u + 1) * per if u < n else 0 for u in pos]
    return Layout(starts, ends)

