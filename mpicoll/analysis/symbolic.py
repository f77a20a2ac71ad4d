"""The symbolic checker: prove a schedule computes its collective, for any p.

Data are symbolic values ``(block, runs)`` (see :mod:`mpicoll.ir.contracts`).
Combining two values checks that they belong to the same block and either
(commutative mode) that no rank's contribution is counted twice, or (ordered
mode, for algorithms that claim to keep rank order) that the left operand
covers ranks [a, b) and the right one [b, c), so the result is in rank order.
At the end every output block must hold exactly the expected value.
"""

from __future__ import annotations

from typing import Any

from mpicoll.analysis.lockstep import run_lockstep
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec
from mpicoll.ir.schedule import Block, Copy, Reduce, ScheduleError, ScheduleSet

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


class _Buffers(dict):
    """One rank's buffers by name; a buffer first named is made empty (None: no data yet)."""

    __slots__ = ("nblocks",)

    def __missing__(self, name: str) -> list:
        buf = self[name] = [None] * self.nblocks
        return buf


class SymbolicDomain:
    """Buffers of symbolic values, one list per buffer per rank (None: no data yet).

    ``alias`` maps a buffer name to the buffer it shares memory with (in place:
    ``{"send": "recv"}``); the two names then hold the same list object.
    """

    def __init__(self, states: list[dict[str, list]], nblocks: int, ordered: bool, alias: dict[str, str]):
        self.nblocks = nblocks
        self.ordered = ordered
        self.alias = alias
        self.states = []
        for state in states:
            bufs = _Buffers(state)
            bufs.nblocks = nblocks
            for name, target in alias.items():
                bufs[name] = bufs[target]
            self.states.append(bufs)

    def read(self, rank: int, block: Block) -> list:
        name, lo, hi = block
        if lo < 0 or lo > hi or hi > self.nblocks:
            raise ScheduleError(f"{block} is outside blocks 0..{self.nblocks - 1}")
        values = self.states[rank][name][lo:hi]
        if None in values:
            raise ScheduleError(f"reads {block} before it holds data (rank {rank})")
        return values

    def write(self, rank: int, block: Block, payload: list) -> None:
        name, lo, hi = block
        if lo < 0 or lo > hi or hi > self.nblocks:
            raise ScheduleError(f"{block} is outside blocks 0..{self.nblocks - 1}")
        self.states[rank][name][lo:hi] = payload

    def combine(self, left: Any, right: Any) -> Any:
        if left[0] != right[0]:
            raise ScheduleError(f"combines block {left[0]} with block {right[0]}")
        lruns, rruns = left[1], right[1]
        if len(lruns) == 1 and len(rruns) == 1:  # the common case: two contiguous ranges
            (a, b), (c, d) = lruns[0], rruns[0]
            if b == c:
                return (left[0], ((a, d),))
            if self.ordered:
                raise ScheduleError(f"reduces ranks {lruns} with {rruns} out of rank order")
            if d == a:
                return (left[0], ((c, b),))
        if not self.ordered:
            return (left[0], _normalize(lruns + rruns))
        raise ScheduleError(f"reduces ranks {lruns} with {rruns} out of rank order")

    def reduce(self, rank: int, step: Reduce) -> None:
        left, right = self.read(rank, step.left), self.read(rank, step.right)
        if step.out.hi - step.out.lo != len(left) or len(left) != len(right):
            raise ScheduleError("operands have different numbers of blocks")
        if len(left) == 1:
            self.write(rank, step.out, [self.combine(left[0], right[0])])
        else:
            self.write(rank, step.out, [self.combine(a, b) for a, b in zip(left, right)])

    def copy(self, rank: int, step: Copy) -> None:
        values = self.read(rank, step.src)
        if step.out.nblocks != len(values):
            raise ScheduleError("copies between blocks of different sizes")
        self.write(rank, step.out, list(values))


def verify(collective: str, algorithm: str, size: int, *, ordered: bool | None = None,
           in_place: bool = False, schedules: ScheduleSet | None = None, **params: int) -> None:
    """Raise :class:`ScheduleError` unless the algorithm computes ``collective`` at ``size`` ranks.

    ``ordered`` defaults to whether the algorithm claims to keep rank order at
    this size; ``in_place`` runs with the send buffer aliased to the receive
    buffer, as ``MPI.IN_PLACE`` does.  ``schedules`` may pass the schedules
    already built (``registry.schedules(collective, algorithm, size, **params)``)
    so that checking both forms at a large p builds them once.
    """
    with registry.gc_paused():  # see gc_paused: the schedules of a large p are millions of tuples
        _verify(collective, algorithm, size, ordered, in_place, schedules, params)


def _verify(collective: str, algorithm: str, size: int, ordered: bool | None, in_place: bool,
            given: ScheduleSet | None, params: dict[str, int]) -> None:
    alg = registry.get(collective, algorithm)
    spec = get_spec(collective)
    scheds = (given or registry.schedules(collective, algorithm, size, **params)).schedules
    if len(scheds) != size or scheds[0].algorithm != algorithm or scheds[0].collective != collective:
        raise ValueError(f"schedules: expected the {size} schedules of {collective}/{algorithm}")
    nblocks = scheds[0].nblocks
    for sched in scheds:  # every buffer named is send, recv or declared scratch
        sched.scratch()
    ordered = alg.keeps_order(size) if ordered is None else ordered
    alias = {"send": "recv"} if in_place else {}
    states = []
    for r in range(size):
        state = {name: list(values) for name, values in spec.inputs(r, size, nblocks, **params).items()}
        if in_place and "send" in state:  # rooted collectives: ranks without a send buffer
            state["recv"] = state.pop("send")
        states.append(state)
    domain = SymbolicDomain(states, nblocks, ordered, alias)
    try:
        run_lockstep(scheds, domain, alias)
    except ScheduleError as exc:
        if in_place:  # say which form failed
            raise ScheduleError(f"{exc} [in place]") from None
        raise
    where = f"{collective}/{algorithm} p={size}" + (" in place" if in_place else "")
    for r in range(size):
        for name, expected in spec.outputs(r, size, nblocks, **params).items():
            got = domain.states[r].get(name, [None] * nblocks)
            for b, (g, e) in enumerate(zip(got, expected)):
                if e is None:
                    continue
                if g is None:
                    raise ScheduleError(f"{where}: rank {r} ends with no data in {name}[{b}]")
                if g != e and not ordered and spec.reduces:
                    g = (g[0], _normalize(g[1]))
                if g != e:
                    raise ScheduleError(f"{where}: rank {r} ends with {name}[{b}] = {g}, expected {e}")
