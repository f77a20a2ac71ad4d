"""The symbolic checker: prove a schedule computes its collective, for any p.

Data are symbolic values ``(block, runs)`` (see :mod:`mpicoll.ir.contracts`).
Combining two values checks that they belong to the same block and either
(commutative mode) that no rank's contribution is counted twice, or (ordered
mode, for algorithms that claim to keep rank order) that the left operand
covers ranks [a, b) and the right one [b, c), so the result is in rank order.
At the end every output block must hold exactly the expected value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mpicoll.analysis.lockstep import Moves, Plan, Steps, plan_of, run_lockstep
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec
from mpicoll.ir.schedule import ScheduleError, ScheduleSet

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
    """Every buffer of every rank as one NumPy array of symbolic values, one per cell (None: no data yet).

    The cells are those of ``plan`` (:class:`~mpicoll.analysis.lockstep.Plan`); a
    :class:`~mpicoll.analysis.lockstep.BatchDomain`, it moves a round's messages
    and a group of steps with NumPy indexing, and combines values one pair at a time.
    ``alias`` maps a buffer name to the buffer it shares memory with (in place:
    ``{"send": "recv"}``): the cells of the one are those of the other.
    ``states[r][name]`` is rank r's buffer ``name`` (a view of the cells).
    """

    def __init__(self, plan: Plan, states: list[dict[str, list]], ordered: bool, alias: dict[str, str]):
        self.nblocks = nblocks = plan.nblocks
        self.ordered = ordered
        self.alias = alias
        nbuf = len(plan.buffers)
        self.values = np.full(plan.size * nbuf * nblocks, None, dtype=object)
        self.filled = np.zeros(self.values.shape, dtype=bool)
        home = np.arange(self.values.size).reshape(plan.size, nbuf, nblocks)
        for name, target in alias.items():   # the aliased buffer's cells are its target's
            home[:, plan.index[name]] = home[:, plan.index[target]]
        self.home = home.reshape(-1)   # cell -> where its value lives
        self.states = []
        for r, state in enumerate(states):
            for name, values in state.items():
                if len(values) > nblocks:
                    raise ValueError(f"rank {r} buffer {name}: {len(values)} symbolic values for {nblocks} blocks")
                cells = self.home[plan.cell(r, name) + np.arange(len(values))]
                self.values[cells] = np.fromiter(values, dtype=object, count=len(values))
                self.filled[cells] = [v is not None for v in values]
            self.states.append({name: self.values[self.home[plan.cell(r, name)]:][:nblocks]
                                for name in plan.buffers})

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

    def deliver(self, moves: Moves) -> None:
        if not len(moves.src):
            return
        src = self.home[moves.src]
        empty = ~self.filled[src]
        if empty.any():
            raise moves.error(moves.owner[empty.argmax()], "sent before it holds data")
        dst = self.home[moves.dst]
        self.values[dst] = self.values[src]
        self.filled[dst] = True

    def apply(self, steps: Steps) -> None:
        operands = (self.home[steps.left], self.home[steps.right]) if steps.reduces else (self.home[steps.left],)
        for cells in operands:
            empty = ~self.filled[cells]
            if empty.any():
                i = steps.owner[empty.argmax()]
                rank, step = steps.steps[i]
                block = step[1] if cells is operands[0] else step[2]
                raise steps.error(i, f"reads {block} before it holds data (rank {rank})")
        out = self.home[steps.out]
        if not steps.reduces:
            self.values[out] = self.values[operands[0]]
        else:
            left, right = self.values[operands[0]], self.values[operands[1]]
            try:
                self.values[out] = np.fromiter(map(self.combine, left, right), dtype=object, count=len(out))
            except ScheduleError:   # say which step: find the first pair that fails
                for j, (a, b) in enumerate(zip(left, right)):
                    try:
                        self.combine(a, b)
                    except ScheduleError as exc:
                        raise steps.error(steps.owner[j], str(exc)) from None
                raise
        self.filled[out] = True


def verify(collective: str, algorithm: str, size: int, *, ordered: bool | None = None,
           in_place: bool = False, schedules: ScheduleSet | None = None,
           progress: Callable[[int, int], None] | None = None, **params: int) -> None:
    """Raise :class:`ScheduleError` unless the algorithm computes ``collective`` at ``size`` ranks.

    ``ordered`` defaults to whether the algorithm claims to keep rank order at
    this size; ``in_place`` runs with the send buffer aliased to the receive
    buffer, as ``MPI.IN_PLACE`` does.  ``schedules`` may pass the schedules
    already built (``registry.schedules(collective, algorithm, size, **params)``)
    so that checking both forms at a large p builds them once.  ``progress(t, n)``,
    when given, is called after each round t of n.
    """
    with registry.gc_paused():  # see gc_paused: the schedules of a large p are millions of tuples
        _verify(collective, algorithm, size, ordered, in_place, schedules, params, progress)


def _verify(collective: str, algorithm: str, size: int, ordered: bool | None, in_place: bool,
            given: ScheduleSet | None, params: dict[str, int], progress: Callable[[int, int], None] | None) -> None:
    alg = registry.get(collective, algorithm)
    spec = get_spec(collective)
    sset = given or registry.schedules(collective, algorithm, size, **params)
    scheds = sset.schedules
    if len(scheds) != size or scheds[0].algorithm != algorithm or scheds[0].collective != collective:
        raise ValueError(f"schedules: expected the {size} schedules of {collective}/{algorithm}")
    nblocks = scheds[0].nblocks
    for sched in scheds:  # every buffer named is send, recv or declared scratch
        sched.scratch()
    plan = plan_of(sset)   # read once for both forms (kept on the ScheduleSet)
    ordered = alg.keeps_order(size) if ordered is None else ordered
    alias = {"send": "recv"} if in_place else {}
    states = []
    for r in range(size):
        state = {name: list(values) for name, values in spec.inputs(r, size, nblocks, **params).items()}
        if in_place and "send" in state:  # rooted collectives: ranks without a send buffer
            state["recv"] = state.pop("send")
        states.append(state)
    domain = SymbolicDomain(plan, states, ordered, alias)
    try:
        run_lockstep(plan, domain, alias,
                     after_round=None if progress is None else lambda t: progress(t + 1, plan.nrounds))
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
