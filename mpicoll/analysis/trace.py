"""The tracer: what every block of every rank holds after every round.

It runs the schedules in lockstep on the symbolic domain of
:mod:`mpicoll.analysis.symbolic` and snapshots the buffers after each round, so a
drawing can color each block by the contributions it holds (the textbook
figures of a ring all-reduce).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpicoll.analysis.lockstep import plan_of, run_lockstep
from mpicoll.analysis.symbolic import SymbolicDomain
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec
from mpicoll.ir.schedule import Schedule

__all__ = ["Trace", "trace", "holdings", "latest"]


@dataclass(frozen=True)
class Trace:
    """``states[t][r][buf]``: rank r's blocks of ``buf`` after round t (``states[0]``: before round 0)."""

    schedules: tuple[Schedule, ...]
    states: tuple[tuple[dict[str, list], ...], ...]

    @property
    def nrounds(self) -> int:
        return len(self.states) - 1


def trace(collective: str, algorithm: str, size: int, **params: Any) -> Trace:
    """Run ``algorithm`` symbolically on ``size`` ranks and record the buffers after each round."""
    spec = get_spec(collective)
    sset = registry.schedules(collective, algorithm, size, **params)
    scheds = sset.schedules
    nblocks = scheds[0].nblocks
    for sched in scheds:  # every buffer named is send, recv or declared scratch
        sched.scratch()
    plan = plan_of(sset)
    states = [{name: list(v) for name, v in spec.inputs(r, size, nblocks, **params).items()} for r in range(size)]
    domain = SymbolicDomain(plan, states, False, {})  # commutative: drawings need no order check

    def snapshot(t: int = -1) -> None:
        snaps.append(tuple({k: list(v) for k, v in st.items()} for st in domain.states))

    snaps: list[tuple[dict[str, list], ...]] = []
    snapshot()
    run_lockstep(plan, domain, after_round=snapshot)
    return Trace(tuple(scheds), tuple(snaps))


def holdings(state: dict[str, list], nblocks: int) -> list[tuple[int, ...]]:
    """Per block, the ranks whose contributions the rank holds in its fullest copy of that block."""
    out = []
    for b in range(nblocks):
        best: tuple[int, ...] = ()
        for values in state.values():
            v = values[b] if b < len(values) else None
            if v is not None:
                ranks = tuple(r for lo, hi in v[1] for r in range(lo, hi))
                if len(ranks) > len(best):
                    best = ranks
        out.append(best)
    return out


def latest(state: dict[str, list], nblocks: int) -> list[tuple[int, tuple[int, ...]] | None]:
    """Per block position, the value a data-moving collective (no reduction) shows there.

    The receive buffer first (the result being filled in), then scratch buffers
    (data on its way, as in Bruck), then the send buffer: ``(block, ranks)``,
    the block's identity (for alltoall, its destination) and the ranks it comes
    from, or None where the rank holds nothing.
    """
    order = sorted(state, key=lambda name: (name != "recv", name == "send", name))
    out: list[tuple[int, tuple[int, ...]] | None] = []
    for b in range(nblocks):
        found = None
        for name in order:
            values = state[name]
            v = values[b] if b < len(values) else None
            if v is not None:
                found = (v[0], tuple(r for lo, hi in v[1] for r in range(lo, hi)))
                break
        out.append(found)
    return out
