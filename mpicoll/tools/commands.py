"""The tools behind ``python -m mpicoll``: show, verify, model, draw, calibrate.

Everything is generic over :func:`mpicoll.families.registry.collectives`: a collective or
algorithm registered later is shown, verified, costed and drawn with no change
here.
"""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mpicoll.analysis.cost import Cost, Machine, cost, lower_bound
from mpicoll.analysis.lockstep import plan_of
from mpicoll.analysis.presets import describe
from mpicoll.analysis.symbolic import verify
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec
from mpicoll.ir.schedule import ScheduleError, ScheduleSet
from mpicoll.selection import choose as selection
from mpicoll.selection import tuning
from mpicoll.selection.tuning import Shared

__all__ = ["show", "check_cases", "count_cases", "verify_all", "model", "ModelResult", "scale_map", "ScaleMap",
           "draw", "calibrate", "SWEEP_SIZES"]

SWEEP_SIZES = (*range(1, 65), 127, 128)
SHOW_RANKS = 64   # columns of a table that still reads on a wide screen; more: one rank at a time


def show(collective: str, algorithm: str, size: int, rank: int | None = None, **params: Any) -> str:
    """The schedule as a rounds x ranks table (all ranks, or one)."""
    if size < 1:
        raise ValueError(f"-p/size: expected a positive number of ranks, got {size}")
    if rank is not None and not 0 <= rank < size:
        raise ValueError(f"--rank: expected 0 <= rank < {size}, got {rank}")
    if rank is None and size > SHOW_RANKS:
        raise ValueError(f"-p: a table of every rank is readable for up to {SHOW_RANKS} ranks, got {size}; "
                         f"show one rank's column: python -m mpicoll show {collective} {algorithm} -p {size} --rank 0")
    alg = registry.get(collective, algorithm)
    params = _default_params(alg, size, params)
    if rank is None:
        return registry.schedules(collective, algorithm, size, **params).table()
    # one rank: only its schedule is built (at p = 1024 building all of them takes seconds)
    one = registry.schedule(collective, algorithm, rank, size, **params)
    lines = ScheduleSet((one,)).table().split("\n")
    lines[0] = lines[0].replace(f"p = 1, {one.nblocks} block", f"p = {size}, rank {rank}, {one.nblocks} block")
    head = next(i for i, line in enumerate(lines) if line.startswith("round"))
    lines[head] = lines[head].replace("rank 0", f"rank {rank}")
    return "\n".join(lines)


def _default_params(alg: registry.Algorithm, size: int, params: dict[str, Any]) -> dict[str, Any]:
    params = {k: v for k, v in params.items() if v is not None}
    if "nodes" not in alg.params:  # --ranks-per-node shapes only the node-aware algorithms
        params.pop("nodes", None)
    if "root" in alg.params:
        params.setdefault("root", 0)
    return params


def check_cases(collective: str, algorithm: str, size: int, ranks_per_node: int | None = None) -> list[dict[str, Any]]:
    """Parameter sets verify checks: roots 0, p/2 and p-1; 1 and 3 pipeline segments; the node layout.

    Node-aware algorithms are checked for blocks of ``ranks_per_node`` ranks
    when given, else for one node and for blocks of 2 and of 3 ranks.
    """
    alg = registry.get(collective, algorithm)
    if "nodes" in alg.params:
        layouts = [ranks_per_node] if ranks_per_node else [None, 2, 3]
        return [{**case, "nodes": k} for case in _flat_cases(alg, size) for k in layouts]
    return _flat_cases(alg, size)


def _flat_cases(alg: registry.Algorithm, size: int) -> list[dict[str, Any]]:
    roots = sorted({0, size // 2, size - 1}) if "root" in alg.params else [None]
    segments = [1, 3] if "segments" in alg.params else [None]
    cases = []
    for root in roots:
        for seg in segments:
            case = {} if root is None else {"root": root}
            if seg is not None:
                case["segments"] = seg
            cases.append(case)
    return cases


@dataclass(frozen=True)
class Checked:
    collective: str
    algorithm: str
    size: int
    params: dict[str, Any]
    in_place: bool


def verify_all(collectives: Iterable[str] | None = None, algorithms: Iterable[str] | None = None,
               sizes: Iterable[int] = SWEEP_SIZES, ranks_per_node: int | None = None,
               starting: Callable[[Checked], None] | None = None,
               progress: Callable[[str, int, int, str], None] | None = None) -> Iterator[Checked]:
    """Verify symbolically; yields each case checked, raises ScheduleError on the first failure.

    Every algorithm of every collective (or those named), at every size, with
    every parameter set of :func:`check_cases`, and in place where the
    collective allows it.  ``starting(case)``, when given, is called before each
    parameter set is checked (its ``in_place`` true where both forms will be);
    ``progress(stage, done, total, unit)`` as the schedules are built (ranks) and run (rounds).
    """
    colls = list(collectives) if collectives else registry.collectives()
    sizes = list(sizes)
    for coll in colls:
        in_place = get_spec(coll).in_place
        names = list(algorithms) if algorithms else registry.algorithms(coll)
        for name in names:
            registry.get(coll, name)
            for size in sizes:
                if size < 1:
                    raise ValueError(f"-p: expected positive sizes, got {size}")
                for params in check_cases(coll, name, size, ranks_per_node):
                    if starting is not None:
                        starting(Checked(coll, name, size, params, in_place))
                    sset = _schedules(coll, name, size, params, progress)  # built once for both forms
                    forms = (False, True) if in_place else (False,)
                    if size >= PARALLEL_FROM and len(forms) == 2 and _can_fork():
                        _verify_both_forms(coll, name, size, sset, params, progress)
                    else:
                        for place in forms:
                            verify(coll, name, size, in_place=place, schedules=sset, **params,
                                   progress=_rounds(progress, place))
                    for place in forms:
                        yield Checked(coll, name, size, params, place)
                    del sset


def _schedules(coll: str, name: str, size: int, params: dict[str, Any],
               progress: Callable[[str, int, int, str], None] | None) -> ScheduleSet:
    """``registry.schedules(coll, name, size, **params)``, saying how many ranks' schedules are built."""
    if progress is None:
        return registry.schedules(coll, name, size, **params)
    with registry.gc_paused():
        built = []
        for rank in range(size):
            built.append(registry.schedule(coll, name, rank, size, **params))
            progress("building the schedules", rank + 1, size, "ranks")
        return ScheduleSet(tuple(built))


def _rounds(progress: Callable[[str, int, int, str], None] | None,
            in_place: bool) -> Callable[[int, int], None] | None:
    """verify's ``progress(t, n)`` as a stage of ``progress``."""
    if progress is None:
        return None
    stage = "checking in place" if in_place else "checking"
    return lambda t, n: progress(stage, t, n, "rounds")


def count_cases(sizes: Iterable[int] = SWEEP_SIZES) -> tuple[int, int, int]:
    """(algorithms, collectives, cases) that ``python -m mpicoll verify`` checks at ``sizes``, without checking."""
    sizes = list(sizes)
    cases = sum(len(check_cases(coll, name, size)) * (2 if get_spec(coll).in_place else 1)
                for coll in registry.collectives() for name in registry.algorithms(coll) for size in sizes)
    algorithms = sum(len(registry.algorithms(c)) for c in registry.collectives())
    return algorithms, len(registry.collectives()), cases


PARALLEL_FROM = 512  # from this size on, the two forms are checked in two processes


def _can_fork() -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1


def _verify_both_forms(coll: str, name: str, size: int, sset: Any, params: dict[str, Any],
                       progress: Callable[[str, int, int, str], None] | None = None) -> None:
    """Check the in-place form in a forked child (sharing the schedules) while this process checks the other."""
    if progress is not None:
        progress("reading the schedules", 0, 1, "")
    plan_of(sset)   # read the schedules once, before the fork: both processes share the plan
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the in-place result through the pipe, then leave at once
        os.close(read_end)
        try:
            verify(coll, name, size, in_place=True, schedules=sset, **params)
            message = b""
        except BaseException as exc:  # noqa: B036  (anything must reach the parent)
            message = (f"{type(exc).__name__}\0{exc}").encode() or b"?"
        os.write(write_end, message)
        os._exit(0)
    os.close(write_end)
    try:
        verify(coll, name, size, in_place=False, schedules=sset, **params, progress=_rounds(progress, False))
    finally:
        with os.fdopen(read_end, "rb") as f:
            message = f.read()
        os.waitpid(pid, 0)
    if message:
        kind, _, text = message.decode().partition("\0")
        raise (ScheduleError if kind == "ScheduleError" else RuntimeError)(text)


@dataclass(frozen=True)
class ModelResult:
    """Predicted times (seconds) by algorithm, the lower bound and the algorithm "auto" chooses."""

    collective: str
    size: int
    nbytes: int
    machine: Machine
    costs: dict[str, Cost]
    bound: float
    auto: str | None
    seconds: float
    auto_unknown: str = ""   # why ``auto`` is None (a module it needs could not be imported)
    tuned: str = ""          # what this machine's tuning file makes auto run instead, and which file

    def table(self) -> str:
        lines = [f"{self.collective}, p = {self.size}, {self.nbytes} bytes, constants: {self.machine.name}"
                 + (f", {self.machine.ranks_per_node} ranks per node" if self.machine.ranks_per_node else "")]
        lines.append(f"  {'algorithm':<22}{'time':>12}{'latency':>12}{'bandwidth':>12}{'reduction':>12}"
                     f"{'rounds':>8}  x bound")
        best = min(self.costs.values(), key=lambda c: c.time, default=None)
        for name, c in sorted(self.costs.items(), key=lambda kv: kv[1].time):
            mark = (" <- fastest" if c is best else "") + (" <- auto" if name == self.auto else "")
            ratio = c.time / self.bound if self.bound else float("nan")
            lines.append(f"  {name:<22}{_fmt(c.time):>12}{_fmt(c.latency):>12}{_fmt(c.bandwidth):>12}"
                         f"{_fmt(c.reduction):>12}{c.rounds:>8}  {ratio:7.2f}{mark}"
                         + ("  (sampled ranks)" if c.sampled else ""))
        lines.append(f"  {'lower bound':<22}{_fmt(self.bound):>12}")
        for line in describe(self.machine):
            lines += textwrap.wrap(line, 110, initial_indent="  assumed: ", subsequent_indent=" " * 11)
        lines.append(f"  auto chooses: {self.auto}" + (f" ({self.auto_unknown})" if self.auto_unknown else
                                                        " (with these constants and no tuning file)"))
        if self.tuned:
            lines.append(f"  on this machine auto runs {self.tuned}")
        return "\n".join(lines)


def _fmt(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def model(collective: str, size: int, nbytes: int, machine: Machine,
          algorithms: Iterable[str] | None = None,
          progress: Callable[[str, int, int], None] | None = None) -> ModelResult:
    """Cost every algorithm (or those named) of ``collective`` for ``nbytes`` bytes on ``size`` ranks.

    ``progress(name, i, n)`` is called before costing the i-th of n algorithms.
    """
    if size < 1:
        raise ValueError(f"-p/size: expected a positive number of ranks, got {size}")
    if nbytes < 0:
        raise ValueError(f"--bytes: expected a non-negative byte count, got {nbytes}")
    t0 = time.perf_counter()
    names = list(algorithms) if algorithms else registry.algorithms(collective)
    costs = {}
    for i, name in enumerate(names):
        if progress is not None:
            progress(name, i, len(names))
        costs[name] = _cost(collective, name, size, nbytes, machine)
    auto, unknown, tuned = None, "", ""
    count = max(1, nbytes // 8)
    try:   # auto with these constants and no tuning file; then what this machine's tuning file would do
        auto, _ = selection.choose(collective, "auto", size=size, nbytes=nbytes, count=count,
                                   agreed=Shared.make(machine, machine.name, {}))
        band = selection.tuned_choice(collective, size, nbytes) if count >= size else None
        if band is not None:
            tuned = f"{band}, decided by the tuning file {tuning.tuning_path()} (bench --tune measured it)"
    except ImportError as exc:   # the "auto" rules sit next to the calls, which import mpi4py
        unknown = f"unknown without {exc.name or 'mpi4py'}"
    except (KeyError, ValueError):
        pass
    return ModelResult(collective, size, nbytes, machine, costs, lower_bound(collective, size, nbytes, machine),
                       auto, time.perf_counter() - t0, unknown, tuned)


MAP_RANKS = (2, 8, 64, 512, 4096)   # beyond, one cell takes minutes (hierarchical at 24,576: ~25 s a size)
MAP_BYTES = (8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20)


@dataclass
class ScaleMap:
    """Which algorithm the cost model says is fastest for each (p, bytes): ``cells[p, n]`` = [(name, s), ...]."""

    collective: str
    machine: Machine
    ranks: tuple[int, ...]
    sizes: tuple[int, ...]
    cells: dict[tuple[int, int], list[tuple[str, float]]]

    def winner(self, p: int, nbytes: int) -> str:
        return self.cells[p, nbytes][0][0]

    def table(self) -> str:
        """Rows p, columns bytes; each cell the winner and, under it, the runner-up and how much slower it is."""
        head = f"{'p':>7} | " + " | ".join(f"{_bytes(n):>24}" for n in self.sizes)
        lines = [f"{self.collective}: the fastest algorithm by the cost model, constants: {self.machine.name}; "
                 "under it the runner-up, x how many times slower", head, "-" * len(head)]
        for p in self.ranks:
            first, second = [], []
            for n in self.sizes:
                ranked = self.cells[p, n]
                first.append(ranked[0][0].rjust(24))
                if len(ranked) > 1 and ranked[0][1] > 0:
                    ratio = ranked[1][1] / ranked[0][1]
                    second.append(f"{ranked[1][0]} x{ratio:.2f}".rjust(24))
                else:
                    second.append("".rjust(24))
            lines.append(f"{p:>7} | " + " | ".join(first))
            lines.append(f"{'':>7} | " + " | ".join(second))
        for line in describe(self.machine):
            lines += textwrap.wrap(line, 110, initial_indent="assumed: ", subsequent_indent=" " * 9)
        return "\n".join(lines)


def _bytes(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def scale_map(collective: str, machine: Machine, ranks: Iterable[int] = MAP_RANKS, sizes: Iterable[int] = MAP_BYTES,
              algorithms: Iterable[str] | None = None,
              progress: Callable[[str, int, int], None] | None = None) -> ScaleMap:
    """Cost every algorithm at every (p, bytes) of the grid; each cell's algorithms fastest first."""
    ranks, sizes = tuple(ranks), tuple(sizes)
    names = list(algorithms) if algorithms else registry.algorithms(collective)
    cells = {}
    for i, p in enumerate(ranks):
        if progress is not None:
            progress(f"p = {p}", i, len(ranks))
        for n in sizes:
            cells[p, n] = sorted(((name, _cost(collective, name, p, n, machine).time) for name in names),
                                 key=lambda item: item[1])
    return ScaleMap(collective, machine, ranks, sizes, cells)


def _cost(collective: str, name: str, size: int, nbytes: int, machine: Machine) -> Cost:
    """The cost model's time of one algorithm with the parameters "auto" would give it (segments)."""
    alg = registry.get(collective, name)
    _, params = selection.choose(collective, name, size=size, nbytes=nbytes, count=max(1, nbytes // 8))
    return cost(collective, name, size, nbytes, machine, **_default_params(alg, size, params))


def draw(collective: str, algorithm: str, size: int, path: str, **params: Any) -> str:
    """Draw a space-time diagram into ``path`` (.png or .svg); see :mod:`mpicoll.analysis.draw`."""
    from mpicoll.analysis.draw import draw as _draw

    alg = registry.get(collective, algorithm)
    return _draw(collective, algorithm, size, path, **_default_params(alg, size, params))


def calibrate(comm: Any = None, path: str | None = None) -> dict[str, Any]:
    """Measure alpha, beta, gamma under MPI; see :mod:`mpicoll.tools.calibrate`."""
    from mpicoll.tools.calibrate import calibrate as _calibrate

    return _calibrate(comm, path)
