"""What each collective computes: its contract, on symbolic blocks and on arrays (no MPI needed).

A :class:`Spec` gives, for one collective,

- ``inputs(rank, size, nblocks, **params)`` and ``outputs(...)``: per buffer
  name, the symbolic values before and (expected) after the call; ``None``
  entries in outputs are not checked (used by the checker,
  :mod:`mpicoll.analysis.symbolic`, by the drawings and by the one-rank schedule,
  :func:`mpicoll.families.registry.trivial`);
- ``simulate(inputs, nblocks, **params)``: per rank ``(arrays, layouts,
  result_name)`` from one input array per rank (used by the simulator,
  :mod:`mpicoll.analysis.simulate`).

A symbolic value is ``(block, runs)``: the data of block index ``block`` reduced
over the ranks in ``runs``, a tuple of half-open ranges ``(lo, hi)`` in the order
they were combined.  Rank r's own input of block b is ``(b, ((r, r + 1),))``; a
complete all-reduce result is ``(b, ((0, p),))``.  Data-movement collectives use
the same form with a single contributing rank.

Rooted collectives' buffers are not alike on every rank (the root's gather
buffer has p blocks, a non-root's send buffer one); all buffers of a schedule
share one block index space, so a rank's own buffer is *block r of an otherwise
empty buffer* (:meth:`~mpicoll.ir.layout.Layout.only`, :func:`at`).

This module imports neither mpi4py nor the call modules (:mod:`mpicoll.calls`),
so the pure tools work where mpi4py is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mpicoll.ir.layout import Layout, contiguous

__all__ = ["Spec", "Value", "spec", "own", "at", "from_root", "SPECS"]

Value = tuple[int, tuple[tuple[int, int], ...]]
Setup = list[tuple[dict[str, Any], dict[str, Layout], str]]


@dataclass(frozen=True)
class Spec:
    """The contract of one collective (see the module docstring)."""

    name: str
    reduces: bool
    in_place: bool
    inputs: Callable[..., dict[str, list]]
    outputs: Callable[..., dict[str, list]]
    simulate: Callable[..., Setup] | None = None
    params: tuple[str, ...] = field(default=())


def own(rank: int, block: int) -> Value:
    """Rank ``rank``'s own input of block ``block``."""
    return (block, ((rank, rank + 1),))


def at(rank: int, size: int, value: Value | None) -> list[Value | None]:
    """A symbolic buffer whose only known block is block ``rank``."""
    out: list[Value | None] = [None] * size
    out[rank] = value
    return out


def from_root(root: int, blocks: range) -> list[Value]:
    """Blocks that all come from the root."""
    return [own(root, b) for b in blocks]


# -- reductions --------------------------------------------------------------------------------------

def _whole_vector(inputs: list[np.ndarray], nblocks: int, in_place: bool = False, **_: Any) -> Setup:
    """Allreduce and Reduce: every rank's vector in ``nblocks`` nearly equal blocks."""
    layout = {"recv": Layout.even(len(inputs[0]), nblocks)}
    if in_place:
        return [({"recv": x.copy()}, layout, "recv") for x in inputs]
    return [({"send": x.copy(), "recv": np.empty_like(x)}, layout, "recv") for x in inputs]


def _one_block(inputs: list[np.ndarray], nblocks: int, in_place: bool = False) -> Setup:
    """Scan and Exscan: the whole vector is one block."""
    layout = {"recv": Layout.v([len(inputs[0])], [0])}
    if in_place:
        return [({"recv": x.copy()}, layout, "recv") for x in inputs]
    return [({"send": x.copy(), "recv": np.empty_like(x)}, layout, "recv") for x in inputs]


def _reduce_scatter(inputs: list[np.ndarray], nblocks: int, in_place: bool = False) -> Setup:
    """Every rank's input split as evenly as possible (so also uneven and empty blocks, as Reduce_scatter)."""
    size = len(inputs)
    send = Layout.even(len(inputs[0]), nblocks)
    counts = [send.count(b, b + 1) for b in range(nblocks)]
    out = []
    for r, x in enumerate(inputs):
        layouts = {"send": send, "recv": Layout.only(r, counts[r], nblocks)}
        out.append(({"send": x.copy(), "recv": np.empty(counts[r] if r < size else 0, x.dtype)}, layouts, "recv"))
    return out


ALLREDUCE = Spec(
    "allreduce", reduces=True, in_place=True,
    inputs=lambda r, p, nb, **_: {"send": [own(r, b) for b in range(nb)]},
    outputs=lambda r, p, nb, **_: {"recv": [(b, ((0, p),)) for b in range(nb)]},
    simulate=_whole_vector,
)
REDUCE = Spec(
    "reduce", reduces=True, in_place=True, params=("root",),
    inputs=lambda r, p, nb, **_: {"send": [own(r, b) for b in range(nb)]},
    outputs=lambda r, p, nb, root=0, **_: {"recv": [(b, ((0, p),)) for b in range(nb)]} if r == root else {},
    simulate=_whole_vector,
)
SCAN = Spec(
    "scan", reduces=True, in_place=True,
    inputs=lambda r, p, nb, **_: {"send": [own(r, 0)]},
    outputs=lambda r, p, nb, **_: {"recv": [(0, ((0, r + 1),))]},
    simulate=_one_block,
)
EXSCAN = Spec(
    "exscan", reduces=True, in_place=True,
    inputs=lambda r, p, nb, **_: {"send": [own(r, 0)]},
    outputs=lambda r, p, nb, **_: {"recv": [(0, ((0, r),)) if r > 0 else None]},
    simulate=_one_block,
)
REDUCE_SCATTER_BLOCK = Spec(
    "reduce_scatter_block", reduces=True, in_place=False,
    inputs=lambda r, p, nb, **_: {"send": [own(r, b) for b in range(nb)]},
    outputs=lambda r, p, nb, **_: {"recv": [(b, ((0, p),)) if b == r else None for b in range(nb)]},
    simulate=_reduce_scatter,
)


# -- data movement -----------------------------------------------------------------------------------

def _allgather(inputs: list[np.ndarray], nblocks: int, in_place: bool = False) -> Setup:
    """Rank r sends ``inputs[r]`` (any lengths: also Allgatherv's); blocks lie one after the other."""
    recv = contiguous([len(x) for x in inputs])
    out = []
    for r, x in enumerate(inputs):
        if in_place:
            buf = np.zeros(recv.ends[-1] if inputs else 0, x.dtype)
            buf[recv.starts[r]:recv.ends[r]] = x
            out.append(({"recv": buf}, {"recv": recv, "send": recv}, "recv"))
        else:
            out.append(({"send": x.copy(), "recv": np.empty(recv.ends[-1], x.dtype)},
                        {"recv": recv, "send": Layout.only(r, len(x), nblocks)}, "recv"))
    return out


def _alltoall(inputs: list[np.ndarray], nblocks: int, in_place: bool = False) -> Setup:
    """Rank j's input split as evenly as possible into p blocks (uneven and empty blocks too: Alltoallv).

    Rank r's receive block j is rank j's send block r, one after the other.
    """
    size = len(inputs)
    send = [Layout.even(len(x), size) for x in inputs]
    out = []
    for r, x in enumerate(inputs):
        counts = [send[j].count(r, r + 1) for j in range(size)]
        recv = Layout.v(counts, [sum(counts[:j]) for j in range(size)])
        out.append(({"send": x.copy(), "recv": np.empty(sum(counts), x.dtype)}, {"send": send[r], "recv": recv},
                    "recv"))
    return out


def _bcast(inputs: list[np.ndarray], nblocks: int, in_place: bool = False, root: int = 0) -> Setup:
    # every rank starts with its own data, so a block a rank never receives shows
    return [({"recv": x.copy()}, {"recv": Layout.even(len(x), nblocks)}, "recv") for x in inputs]


def _gather(inputs: list[np.ndarray], nblocks: int, in_place: bool = False, root: int = 0) -> Setup:
    """Rank r sends ``inputs[r]``; the root's ``recv`` holds p such blocks (a scratch ``subtree``: p blocks too)."""
    p, c = len(inputs), len(inputs[0])
    whole = Layout.even(p * c, p)
    out = []
    for r, x in enumerate(inputs):
        if in_place and r == root:  # the root's block is already in place
            recv = np.zeros(p * c, x.dtype)
            recv[r * c:(r + 1) * c] = x
            out.append(({"recv": recv}, {"recv": whole, "send": whole}, "recv"))
        elif in_place:  # (the checker aliases send to recv everywhere)
            mine = Layout.only(r, c, p)
            out.append(({"recv": x.copy()}, {"recv": mine, "send": mine, "subtree": whole}, "recv"))
        else:
            out.append(({"send": x.copy(), "recv": np.empty(p * c, x.dtype)},
                        {"recv": whole, "send": Layout.only(r, c, p), "subtree": whole}, "recv"))
    return out


def _scatter(inputs: list[np.ndarray], nblocks: int, in_place: bool = False, root: int = 0) -> Setup:
    """The root scatters ``inputs[root]`` (p blocks); rank r starts with its own slice of ``inputs[r]``."""
    p = len(inputs)
    c = len(inputs[0]) // p
    whole = Layout.even(p * c, p)
    out = []
    for r, x in enumerate(inputs):
        if r == root and in_place:
            out.append(({"recv": x.copy()}, {"recv": whole, "send": whole}, "recv"))
        elif r == root:
            out.append(({"send": x.copy(), "recv": np.empty(c, x.dtype)}, {"recv": Layout.only(r, c, p), "send": whole},
                        "recv"))
        else:
            layouts = {"recv": Layout.only(r, c, p), "subtree": whole}
            out.append(({"recv": x[r * c:(r + 1) * c].copy()}, layouts, "recv"))
    return out


def _barrier(inputs: list[Any], nblocks: int, in_place: bool = False) -> Setup:
    """No data: every rank has empty buffers whatever the inputs."""
    empty = Layout([0] * nblocks, [0] * nblocks)
    return [({"send": np.empty(0), "recv": np.empty(0)}, {"send": empty, "recv": empty}, "recv") for _ in inputs]


ALLGATHER = Spec(
    "allgather", reduces=False, in_place=True,
    inputs=lambda r, p, nb, **_: {"send": [own(r, b) if b == r else None for b in range(nb)]},
    outputs=lambda r, p, nb, **_: {"recv": [own(b, b) for b in range(nb)]},
    simulate=_allgather,
)
ALLTOALL = Spec(
    "alltoall", reduces=False, in_place=False,
    # rank r's send block j is (j, r): "for j, from r"; rank j must end with it as its recv block r
    inputs=lambda r, p, nb, **_: {"send": [own(r, j) for j in range(nb)]},
    outputs=lambda r, p, nb, **_: {"recv": [own(j, r) for j in range(nb)]},
    simulate=_alltoall,
)
BCAST = Spec(
    "bcast", reduces=False, in_place=False, params=("root",),
    inputs=lambda r, p, nb, root=0, **_: {"recv": from_root(root, range(nb))} if r == root else {},
    outputs=lambda r, p, nb, root=0, **_: {"recv": from_root(root, range(nb))},
    simulate=_bcast,
)
GATHER = Spec(
    "gather", reduces=False, in_place=True, params=("root",),
    inputs=lambda r, p, nb, **_: {"send": at(r, nb, own(r, r))},
    outputs=lambda r, p, nb, root=0, **_: {"recv": [own(b, b) for b in range(nb)]} if r == root else {},
    simulate=_gather,
)
SCATTER = Spec(
    "scatter", reduces=False, in_place=True, params=("root",),
    inputs=lambda r, p, nb, root=0, **_: {"send": from_root(root, range(nb))} if r == root else {},
    outputs=lambda r, p, nb, root=0, **_: {"recv": at(r, nb, from_root(root, range(r, r + 1))[0])},
    simulate=_scatter,
)
BARRIER = Spec(
    "barrier", reduces=False, in_place=False,
    # tokens: what a message carries is only checked for being sent and received
    inputs=lambda r, p, nb, **_: {"send": [own(r, b) for b in range(nb)]},
    outputs=lambda r, p, nb, **_: {"recv": [None] * nb},
    simulate=_barrier,
)

# -- neighbourhood collectives (mpicoll.ir.topology): block k of recv comes from sources[k] --------------------

def _topology(topology: Any, p: int) -> Any:
    """The topology a neighbourhood schedule was built for: a periodic ring of p ranks when none is given."""
    from mpicoll.ir.topology import Cart  # noqa: PLC0415 - a sibling module, only for these contracts

    return Cart((p,), (True,)) if topology is None else topology


def _neighbor_in(r: int, p: int, nb: int, topology: Any = None, allgather: bool = False, **_: Any) -> dict:
    _, destinations = _topology(topology, p).neighbors(r)
    return {"send": [own(r, 0)] if allgather else [own(r, k) for k in range(len(destinations))]}


def _neighbor_out(r: int, p: int, nb: int, topology: Any = None, allgather: bool = False, **_: Any) -> dict:
    from mpicoll.ir.topology import matching_send  # noqa: PLC0415 - a sibling module, only for these contracts

    topology = _topology(topology, p)
    sources, _ = topology.neighbors(r)
    return {"recv": [None if src is None else own(src, 0 if allgather else matching_send(topology, r, k))
                     for k, src in enumerate(sources)]}


NEIGHBOR_ALLGATHER = Spec(
    "neighbor_allgather", reduces=False, in_place=False, params=("topology",),
    inputs=lambda r, p, nb, **kw: _neighbor_in(r, p, nb, allgather=True, **kw),
    outputs=lambda r, p, nb, **kw: _neighbor_out(r, p, nb, allgather=True, **kw),
)
NEIGHBOR_ALLTOALL = Spec(
    "neighbor_alltoall", reduces=False, in_place=False, params=("topology",),
    inputs=_neighbor_in, outputs=_neighbor_out,
)

# the v and w variants have their fixed-size sibling's contract, with blocks of any size
SPECS: dict[str, Spec] = {s.name: s for s in (
    ALLREDUCE, REDUCE, SCAN, EXSCAN, REDUCE_SCATTER_BLOCK, replace(REDUCE_SCATTER_BLOCK, name="reduce_scatter"),
    ALLGATHER, replace(ALLGATHER, name="allgatherv"), ALLTOALL, replace(ALLTOALL, name="alltoallv"),
    replace(ALLTOALL, name="alltoallw"), BCAST, GATHER, replace(GATHER, name="gatherv"), SCATTER,
    replace(SCATTER, name="scatterv"), BARRIER, NEIGHBOR_ALLGATHER, NEIGHBOR_ALLTOALL)}


def spec(collective: str) -> Spec:
    """The :class:`Spec` of ``collective`` (any case); ValueError for an unknown name."""
    try:
        return SPECS[collective.lower()]
    except KeyError:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(sorted(SPECS))}") from None
