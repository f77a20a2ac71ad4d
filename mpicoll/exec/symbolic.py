"""The symbolic checker: prove a schedule computes its collective, for any p.

Data are symbolic values ``(block, runs)`` (see :mod:`mpicoll.collectives`).
Combining two values checks that they belong to the same block and either
(commutative mode) that no rank's contribution is counted twice, or (ordered
mode, for algorithms that claim to keep rank order) that the left operand
covers ranks [a, b) and the right one [b, c), so the result is in rank order.
At the end every output block must hold exactly the expected value.
"""

from __future__ import annotations

from typing import Any

from .. import registry
from ..calls import spec as get_spec
from ..schedule import Block, Copy, Reduce, ScheduleError
from .lockstep import run_lockstep

__all__ = ["verify", "SymbolicDomain"]

Runs = tuple[tuple[int, int], ...]


def _normalize(runs: Runs) -> Runs:
    """Sorted, merged runs; raises if two runs overlap (a contribution counted twice)."""
    out: list[list[int]] = []
    for lo, hi in sorted(runs):
        if out and lo < out[-1][1]:
            raise ScheduleError(f"ranks {lo}..{min(hi, out[-1][1]) - 1} are counted twice")
        if out and lo == out[-1][1]:
            out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


class SymbolicDomain:
    """Buffers of symbolic values, one list per buffer per rank (None: no data yet)."""

    def __init__(self, states: list[dict[str, list]], nblocks: int, ordered: bool, alias: dict[str, str]):
        self.states = states
        self.nblocks = nblocks
        self.ordered = ordered
        self.alias = alias

    def _buf(self, rank: int, name: str) -> list:
        name = self.alias.get(name, name)
        state = self.states[rank]
        buf = state.get(name)
        if buf is None:  # not setdefault: that would build a list of nblocks on every access
            buf = state[name] = [None] * self.nblocks
        return buf

    def read(self, rank: int, block: Block) -> list:
        if not 0 <= block.lo <= block.hi <= self.nblocks:
            raise ScheduleError(f"{block} is outside blocks 0..{self.nblocks - 1}")
        values = self._buf(rank, block.buf)[block.lo:block.hi]
        if any(v is None for v in values):
            raise ScheduleError(f"reads {block} before it holds data (rank {rank})")
        return values

    def write(self, rank: int, block: Block, payload: list) -> None:
        if not 0 <= block.lo <= block.hi <= self.nblocks:
            raise ScheduleError(f"{block} is outside blocks 0..{self.nblocks - 1}")
        self._buf(rank, block.buf)[block.lo:block.hi] = payload

    def combine(self, left: Any, right: Any) -> Any:
        if left[0] != right[0]:
            raise ScheduleError(f"combines block {left[0]} with block {right[0]}")
        if not self.ordered:
            return (left[0], _normalize(left[1] + right[1]))
        if len(left[1]) != 1 or len(right[1]) != 1 or left[1][0][1] != right[1][0][0]:
            raise ScheduleError(f"reduces ranks {left[1]} with {right[1]} out of rank order")
        return (left[0], ((left[1][0][0], right[1][0][1]),))

    def reduce(self, rank: int, step: Reduce) -> None:
        left, right = self.read(rank, step.left), self.read(rank, step.right)
        if step.out.nblocks != len(left) or len(left) != len(right):
            raise ScheduleError("operands have different numbers of blocks")
        self.write(rank, step.out, [self.combine(a, b) for a, b in zip(left, right)])

    def copy(self, rank: int, step: Copy) -> None:
        values = self.read(rank, step.src)
        if step.out.nblocks != len(values):
            raise ScheduleError("copies between blocks of different sizes")
        self.write(rank, step.out, list(values))


def verify(collective: str, algorithm: str, size: int, *, ordered: bool | None = None,
           in_place: bool = False, **params: int) -> None:
    """Raise :class:`ScheduleError` unless the algorithm computes ``collective`` at ``size`` ranks.

    ``ordered`` defaults to whether the algorithm claims to keep rank order at
    this size; ``in_place`` runs with the send buffer aliased to the receive
    buffer, as ``MPI.IN_PLACE`` does.
    """
    alg = registry.get(collective, algorithm)
    spec = get_spec(collective)
    scheds = registry.schedules(collective, algorithm, size, **params).schedules
    nblocks = scheds[0].nblocks
    ordered = alg.keeps_order(size) if ordered is None else ordered
    alias = {"send": "recv"} if in_place else {}
    states = []
    for r in range(size):
        state = {name: list(values) for name, values in spec.inputs(r, size, nblocks, **params).items()}
        if in_place:
            state["recv"] = state.pop("send")
        states.append(state)
    domain = SymbolicDomain(states, nblocks, ordered, alias)
    run_lockstep(scheds, domain, alias)
    where = f"{collective}/{algorithm} p={size}" + (" in place" if in_place else "")
    for r in range(size):
        for name, expected in spec.outputs(r, size, nblocks, **params).items():
            got = domain.states[r].get(name, [None] * nblocks)
            for b, (g, e) in enumerate(zip(got, expected)):
                if e is None:
                    continue
                if g is None:
                    raise ScheduleError(f"{where}: rank {r} ends with no data in {name}[{b}]")
                if not ordered and spec.reduces:
                    g = (g[0], _normalize(g[1]))
                if g != e:
                    raise ScheduleError(f"{where}: rank {r} ends with {name}[{b}] = {g}, expected {e}")
