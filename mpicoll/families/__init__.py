"""One module per family of algorithms; importing this package registers them all.

Every algorithm is a pure function of ``(rank, size, **params)`` that returns
``(nblocks, rounds)``: how many blocks the data is split into and what this rank
does in each round (see :mod:`mpicoll.ir.schedule`).  Nothing here touches MPI or
arrays.  Builders may assume ``size >= 2``: the registry answers p = 1 itself,
from the collective's contract (:func:`mpicoll.families.registry.trivial`).
"""

from mpicoll.families import (  # noqa: F401
    binomial,
    bruck,
    chain,
    composed,
    dbtree,
    dissemination,
    hierarchical,
    linear,
    neighbor,
    pairwise,
    recursive,
    ring,
)
