"""Which of a collective's algorithms can move whole objects, and which one "auto" takes.

A schedule suits objects when each of its blocks is one object: a single block
for ``bcast``, ``reduce``, ``allreduce``, ``scan`` and ``exscan`` (an object
cannot be cut into pieces), one block per rank for ``gather``, ``scatter``,
``allgather`` and ``alltoall``.  So the ring all-reduce (p pieces of one
vector), Rabenseifner's and the scatter-allgather broadcast are out, as are
the pipelined ones (segments of one object).  For an op that is not
commutative (any Python callable; an ``MPI.Op`` says), only algorithms that
reduce in rank order are taken.

"auto" does not run a schedule (:mod:`~mpicoll.calls.objects.buffered`: pickles
through the communicator's buffer collectives), except for a reduction above
:data:`~mpicoll.calls.objects.buffered.FOLD_MAX` ranks, and for the
neighbourhood calls; there it runs the schedule below, and :func:`choose` gives
that schedule to a caller who asks for "auto" (no object's size is known to
every rank before the call, so the rule depends on p alone):

============  ==========================================================
collective    algorithm
============  ==========================================================
bcast         binomial (ceil(lg p) rounds; bytes forwarded, pickled once)
gather        binomial (subtrees travel as one message each)
scatter       binomial
allgather     recursive_doubling where p is a power of two, else bruck
alltoall      pairwise (each object travels once)
reduce        binomial
allreduce     recursive_doubling (ceil(lg p) + 2 rounds, ordered)
scan, exscan  recursive_doubling
neighbor_*    direct (one message per edge of the virtual topology)
============  ==========================================================
"""

from __future__ import annotations

from typing import Any

from mpicoll.families import registry

__all__ = ["suitable", "choose", "AUTO", "ONE_BLOCK"]

ONE_BLOCK = ("bcast", "reduce", "allreduce", "scan", "exscan")   # the others have a block per rank
AUTO = {"bcast": "binomial", "gather": "binomial", "scatter": "binomial", "alltoall": "pairwise",
        "reduce": "binomial", "allreduce": "recursive_doubling", "scan": "recursive_doubling",
        "exscan": "recursive_doubling"}
_PARAMS = {"root", "nodes"}   # parameters an object schedule may take (no segments)


def suitable(collective: str, size: int, ordered: bool = False, **params: Any) -> list[str]:
    """The algorithms of ``collective`` that move whole objects at ``size`` ranks (in rank order if ``ordered``)."""
    out = []
    for name in registry.algorithms(collective):
        alg = registry.get(collective, name)
        if not set(alg.params) <= _PARAMS & set(params) or (ordered and not alg.keeps_order(size)):
            continue
        given = {k: params[k] for k in alg.params}
        blocks = registry.schedule(collective, name, 0, size, **given).nblocks if size > 1 else 1
        if blocks == (1 if collective in ONE_BLOCK else size):
            out.append(name)
    return out


def choose(collective: str, algorithm: str, size: int, ordered: bool = False, **params: Any) -> str:
    """The algorithm a call runs: ``algorithm`` checked (ValueError naming the choices), or "auto"'s."""
    if collective.startswith("neighbor_"):   # one round along the topology's edges: its one algorithm
        if algorithm not in ("auto", "direct"):
            raise ValueError(f"algorithm: {collective} has one algorithm, 'direct' (or 'auto'), got {algorithm!r}")
        return "direct"
    if algorithm == "auto":
        if collective == "allgather":
            return "recursive_doubling" if size & (size - 1) == 0 else "bruck"
        return AUTO[collective]
    names = suitable(collective, size, ordered, **params)
    if algorithm not in names:
        raise ValueError(f"algorithm: {collective} of Python objects at p = {size} has no algorithm {algorithm!r}"
                         f"{' that keeps rank order' if ordered else ''}; choose one of {', '.join(names)} "
                         "or 'auto'")
    return algorithm
