""""auto" by the cost model: the algorithm with the least predicted time.

For the collectives in :data:`MODELLED` on 2 to :data:`MODEL_LIMIT` ranks,
"auto" (when no tuning file band applies) costs every candidate algorithm's
schedule with :func:`mpicoll.analysis.cost.cost` and the constants every rank
agreed on (:mod:`mpicoll.selection.tuning`), the executor's per round, message and
step overheads included, and runs the cheapest.  The rule table's choice wins
unless the model predicts a clear gain (more than :data:`TIE`): the constants
are measured on large, out-of-cache messages and the executor's costs per round
only on average, so a predicted gain of a few tens of percent is within the
model's error (measured at p = 2: Reduce at 64 KiB - 1 MiB, where the model
predicted Rabenseifner 3-24% faster than binomial, ran 9-26% slower).

Candidates: every registered algorithm of the collective that keeps rank
order when the op is not commutative; the hierarchical one only with several
nodes and constants that tell intra- from inter-node links apart.  Message
sizes are rounded up to a power of two (the decision's "bucket") and the
decision is cached per (collective, p, bucket, op commutativity, node layout,
constants), at most :data:`CACHE_ENTRIES` decisions, so the model runs once
per bucket: about 1-10 ms at p = 16, up to about 80 ms at p = 64 (the first
call of each size bucket pays it).  The v-collectives (uneven counts the model's
even split does not describe) and larger communicators keep their rule tables.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from mpicoll import config
from mpicoll.analysis.cost import Cost, Machine, cost
from mpicoll.families import registry
from mpicoll.ir.nodes import Nodes
from mpicoll.selection.segments import segments_for

__all__ = ["MODELLED", "MODEL_LIMIT", "TIE", "CACHE_ENTRIES", "bucket", "candidates", "build_params", "predicted",
           "best"]

#: collectives "auto" costs with the model (their size is the whole vector, as the cost model takes it)
MODELLED = frozenset({"allreduce", "bcast", "reduce", "allgather", "alltoall", "reduce_scatter_block", "gather",
                      "scatter", "scan", "exscan", "barrier"})
#: above this many ranks "auto" uses the rule tables (costing every rank's schedule gets slow)
MODEL_LIMIT = 64
#: the rule table's choice is kept when its predicted time is within this fraction of the least
TIE = 0.35
CACHE_ENTRIES = 1024
HIERARCHICAL = "hierarchical"

_CACHE: OrderedDict[tuple, str] = OrderedDict()
_LOCK = threading.Lock()   # threads choose for their own communicators at once: the cache is shared


def bucket(nbytes: int) -> int:
    """The size the decision for ``nbytes`` is made at: the next power of two (0 for 0)."""
    return 1 << (nbytes - 1).bit_length() if nbytes > 0 else 0


def candidates(collective: str, size: int, commutative: bool, hierarchical: bool = False) -> list[str]:
    """The algorithms "auto" weighs, in registration order."""
    out = []
    for name in registry.algorithms(collective):
        if name == HIERARCHICAL and not hierarchical:
            continue
        if not commutative and not registry.get(collective, name).keeps_order(size):
            continue
        out.append(name)
    return out


def build_params(collective: str, name: str, nbytes: int) -> dict[str, int]:
    """Build parameters as :func:`mpicoll.selection.choose.choose` gives them (root 0 for the rooted collectives)."""
    wanted = registry.get(collective, name).params
    out = {"root": 0} if "root" in wanted else {}
    if "segments" in wanted:
        out["segments"] = segments_for(nbytes, pieces=2 if name == "double_binary_tree" else 1)
    return out


def predicted(collective: str, size: int, nbytes: int, machine: Machine, names: list[str],
              nodes: Nodes = None) -> dict[str, Cost]:
    """The model's cost of each of ``names`` for ``nbytes`` bytes on ``size`` ranks."""
    return {name: cost(collective, name, size, nbytes, machine, nodes=nodes, **build_params(collective, name, nbytes))
            for name in names}


def best(collective: str, *, size: int, nbytes: int, commutative: bool, machine: Machine, key: Any,
         rule: str, nodes: Nodes = None) -> str:
    """The cheapest candidate at ``nbytes``'s bucket (``rule``, the rule table's choice, wins ties).

    ``key`` identifies ``machine`` in the cache; ``nodes`` is a multi-node
    layout whose intra- and inter-node links ``machine`` tells apart (then the
    hierarchical algorithm competes too), else None.
    """
    at = bucket(nbytes)
    ckey = (collective, size, at, commutative, nodes, rule, key)
    with _LOCK:
        hit = _CACHE.get(ckey)
        if hit is not None:
            _CACHE.move_to_end(ckey)
            return hit
    names = candidates(collective, size, commutative, hierarchical=nodes is not None)
    times = {name: c.time for name, c in predicted(collective, size, at, machine, names, nodes).items()}
    choice = min(names, key=times.__getitem__) if names else rule
    if rule in times and times[rule] <= times[choice] * (1 + TIE):
        choice = rule
    with _LOCK:
        _CACHE[ckey] = choice
        while len(_CACHE) > CACHE_ENTRIES:
            _CACHE.popitem(last=False)
    return choice


def clear() -> None:
    """Forget every cached decision."""
    with _LOCK:
        _CACHE.clear()


config.on_reload(clear)
