"""``python -m mpicoll.bench --style osu`` and ``--style nccl``: the OSU micro-benchmarks' and nccl-tests' tables.

Both time every collective mpicoll has (:data:`mpicoll.bench.cases.COLLS`) on
NumPy arrays, ``mmap`` buffers or ``bytearray`` buffers (``--buffer``), for the
built-in collective and mpicoll's (``auto``, or the ``--algorithms`` given) in
one run, interleaved round by round (:func:`mpicoll.bench.timing.time_rounds`),
and check every variant's result against the built-in's once per size.

``osu``: as ``osu_<collective> -f`` prints, one row per size and variant:
``Size`` (bytes, OSU's meaning: one rank's block for gather, scatter,
allgather and alltoall and their v-variants; the whole vector for the
others), ``Avg Latency(us)``, ``Min Latency(us)`` and ``Max Latency(us)`` (over
ranks, of each rank's average time per call), ``Iterations`` (timed calls
per variant), then the ratio to the built-in's average and the algorithm that
ran.  Data-movement collectives move ``MPI.BYTE`` (``count`` = bytes), the
reductions ``--dtype`` (default float32, OSU's ``MPI_FLOAT``) with ``MPI.SUM``.

``nccl``: as nccl-tests' ``<collective>_perf`` prints, one table per variant:
``size`` (bytes, nccl-tests' meaning: the whole vector of p blocks for
allgather, gather, scatter, alltoall, reduce-scatter and their v-variants),
``count`` (elements), ``type``, ``redop``, ``root`` (-1: not rooted), then
out-of-place and in-place ``time`` (us, average over ranks of each rank's
average per call), ``algbw`` (size / time, GB/s), ``busbw`` (algbw times
nccl-tests' factor) and ``#wrong`` (elements differing from the built-in's
out-of-place result, summed over ranks; ``N/A`` for the reference itself), and
the summary lines ``# Out of bounds values`` and ``# Avg bus bandwidth`` (the
mean busbw over every size, out-of-place and in-place).  In-place columns only
where MPI defines ``MPI_IN_PLACE`` for the collective (``N/A`` for Bcast and
Barrier); the in-place timing, as nccl-tests', reruns the call on its own output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.bench.cases import COLLS, KINDS, Case, Coll, algorithm_run
from mpicoll.bench.timing import batch_size, time_rounds
from mpicoll.families import registry

__all__ = ["STYLES", "StyleOptions", "run_style", "osu_table", "nccl_table", "flat_rows"]

STYLES = ("osu", "nccl")
BUILTIN = "builtin"
AUTO = "auto"
IN_PLACE = " in-place"     # suffix of the label of an in-place variant

#: nccl-tests' names of the element types
_NCCL_TYPES = {"float16": "half", "float32": "float", "float64": "double", "bfloat16": "bfloat16"}


@dataclass(frozen=True)
class StyleOptions:
    """What one ``--style osu|nccl`` run measures."""

    style: str
    sizes: list[int]
    algorithms: list[str]     # mpicoll's variants: "auto" and/or algorithm names
    kind: str = "numpy"
    dtype: str = "float32"
    root: int = 0
    iters: int = 20
    warmup: int = 3

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"--style: expected one of {', '.join(STYLES)}, got {self.style!r}")
        if self.kind not in KINDS:
            raise ValueError(f"--buffer: expected one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.algorithms:
            raise ValueError("--algorithms: name at least one of mpicoll's variants (auto or an algorithm)")


def collectives(names: list[str]) -> list[Coll]:
    """The collectives named (``all``: every one), or a ValueError listing them."""
    if names == ["all"]:
        return list(COLLS.values())
    unknown = [n for n in names if n.lower() not in COLLS]
    if unknown:
        raise ValueError(f"unknown collective(s) {', '.join(unknown)}; choose from {', '.join(COLLS)} or all")
    return [COLLS[n.lower()] for n in names]


def check_algorithms(coll: Coll, names: list[str]) -> None:
    """A ValueError unless every name is ``auto`` or an algorithm of ``coll``."""
    known = registry.algorithms(coll.name)
    unknown = [n for n in names if n != AUTO and n not in known]
    if unknown:
        raise ValueError(f"--algorithms: {coll.name} has no algorithm(s) {', '.join(unknown)}; "
                         f"choose from {', '.join([AUTO, *known])}")


# -- sizes ----------------------------------------------------------------------------------------

def element_type(coll: Coll, opts: StyleOptions) -> tuple[np.dtype, MPI.Datatype | None]:
    """(NumPy dtype, MPI datatype or None for the dtype's own): OSU moves bytes, nccl-tests ``--dtype``."""
    if opts.style == "osu" and not coll.reduces:
        return np.dtype(np.uint8), MPI.BYTE
    return np.dtype(opts.dtype), None


def is_vector(coll: Coll, style: str) -> bool:
    """Whether the style's message size is the whole vector of p blocks."""
    return coll.osu_vector if style == "osu" else coll.nccl_vector


def block_counts(coll: Coll, style: str, sizes: list[int], p: int, itemsize: int) -> list[tuple[int, int]]:
    """``(bytes, elements per block)`` of each size, rounded down to whole blocks, each reached once.

    A size that rounds to no element at all is left out, unless it is 0 (a 0-byte
    call is a valid call); the barrier has one size, 0.
    """
    if coll.name == "barrier":
        return [(0, 0)]
    out: dict[int, int] = {}
    blocks = p if is_vector(coll, style) else 1
    for nbytes in sizes:
        c = nbytes // itemsize // blocks
        if c or nbytes == 0:
            out.setdefault(c * itemsize * blocks, c)
    return list(out.items())


# -- one size -------------------------------------------------------------------------------------

def _call(variant: str, coll: Coll, comm: Any, case: Case) -> Callable[[], None]:
    """A no-argument function running one call of ``variant`` (``builtin`` or an mpicoll algorithm)."""
    args = case.args
    if variant == BUILTIN:
        fn = getattr(MPI.Intracomm, coll.method)
        return lambda: fn(comm, *args)
    method = getattr(comm, coll.method)
    return lambda: method(*args, algorithm=variant)


def make_cases(coll: Coll, comm: Any, c: int, opts: StyleOptions, in_place: bool) -> dict[str, tuple[str, Case]]:
    """label -> (variant, case): the built-in first (the reference), then mpicoll's, then the in-place forms."""
    dtype, datatype = element_type(coll, opts)
    common = dict(root=opts.root, kind=opts.kind, dtype=dtype, datatype=datatype)
    ref = Case(coll, comm.rank, comm.size, c, **common)
    cases = {BUILTIN: (BUILTIN, ref)}
    for name in opts.algorithms:
        cases[name] = (name, Case(coll, comm.rank, comm.size, c, send_from=ref, **common))
    if in_place and coll.in_place:
        for name in (BUILTIN, *opts.algorithms):
            cases[name + IN_PLACE] = (name, Case(coll, comm.rank, comm.size, c, in_place=True, **common))
    return cases


def _which(comm: Any, coll: Coll, cases: dict[str, tuple[str, Case]]) -> tuple[dict[str, str], dict[str, str]]:
    """(label -> algorithm run, label -> error): a variant that cannot run on some rank is dropped on every rank."""
    ran: dict[str, str] = {}
    errors: dict[str, str] = {}
    for label, (variant, case) in cases.items():
        if variant == BUILTIN:
            ran[label] = "MPI library"
            continue
        try:
            ran[label] = algorithm_run(comm, coll.method, case.args, variant)
        except Exception as exc:   # an algorithm that cannot run here: reported, not fatal
            errors[label] = f"{type(exc).__name__}: {exc}"
    world = MPI.Intracomm(comm)
    failed = world.allreduce(sorted(errors), op=MPI.SUM)   # every rank drops what failed anywhere
    for label in failed:
        errors.setdefault(label, "failed on another rank")
        ran.pop(label, None)
    return ran, errors


def measure_size(coll: Coll, comm: Any, c: int, opts: StyleOptions, in_place: bool) -> dict[str, Any]:
    """Check, then time, every variant at one block count; per label: times (us), iterations, #wrong, algorithm."""
    world = MPI.Intracomm(comm)
    cases = make_cases(coll, comm, c, opts, in_place)
    ran, errors = _which(comm, coll, cases)
    calls = {label: _call(variant, coll, comm, case) for label, (variant, case) in cases.items() if label in ran}
    # check once: every variant on the same inputs, compared with the built-in's out-of-place result
    for label, fn in calls.items():
        cases[label][1].fill()
        fn()
    ref = cases[BUILTIN][1]
    wrong = np.array([cases[label][1].wrong(ref) for label in calls], dtype=np.int64)
    world.Allreduce(MPI.IN_PLACE, wrong, op=MPI.SUM)
    # in place, a reduction reruns on its own output (as in nccl-tests): sums may overflow, harmlessly
    with np.errstate(over="ignore", invalid="ignore"):
        batch = {label: batch_size(fn, world) for label, fn in calls.items()}
        for _ in range(opts.warmup):
            for fn in calls.values():
                fn()
        rounds = time_rounds(calls, batch, opts.iters, world)     # rounds x variants, this rank's per call
    mine = rounds.mean(axis=0)                                     # this rank's average per call
    slowest = np.empty_like(rounds)                                # each round's slowest rank
    world.Allreduce(np.ascontiguousarray(rounds), slowest, op=MPI.MAX)
    median = np.median(slowest, axis=0)
    total, low, high = (np.empty_like(mine) for _ in range(3))
    world.Allreduce(mine, total, op=MPI.SUM)
    world.Allreduce(mine, low, op=MPI.MIN)
    world.Allreduce(mine, high, op=MPI.MAX)
    stats: dict[str, Any] = {}
    for j, label in enumerate(calls):
        stats[label] = {"variant": cases[label][0], "in_place": label.endswith(IN_PLACE),
                        "avg_us": total[j] / comm.size * 1e6, "min_us": low[j] * 1e6, "max_us": high[j] * 1e6,
                        "median_us": median[j] * 1e6,
                        "iterations": batch[label] * opts.iters, "algorithm": ran[label],
                        "wrong": None if label == BUILTIN else int(wrong[j])}
    for label, err in errors.items():
        stats[label] = {"variant": cases[label][0], "error": err}
    return stats


def run_style(comm: Any, names: list[str], opts: StyleOptions, progress: Callable[[str], None] | None = None
              ) -> list[dict[str, Any]]:
    """The sweep of ``--style osu|nccl``; every rank returns the same list, one entry per collective."""
    colls = collectives(names)
    for coll in colls:
        check_algorithms(coll, opts.algorithms)
    if not 0 <= opts.root < comm.size:
        raise ValueError(f"--root: {opts.root} is not a rank of {comm.size}")
    results = []
    for coll in colls:
        dtype, datatype = element_type(coll, opts)
        entries = []
        for nbytes, c in block_counts(coll, opts.style, opts.sizes, comm.size, dtype.itemsize):
            stats = measure_size(coll, comm, c, opts, in_place=opts.style == "nccl")
            for s in stats.values():
                if "avg_us" in s:
                    s["algbw_GBs"] = nbytes / (s["avg_us"] * 1e3) if s["avg_us"] > 0 else 0.0
                    s["busbw_GBs"] = s["algbw_GBs"] * coll.factor(comm.size)
            entries.append({"bytes": nbytes, "count": c * (comm.size if is_vector(coll, opts.style) else 1),
                            "stats": stats})
            if progress is not None:
                progress(f"{coll.name} {nbytes} B")
        results.append({"style": opts.style, "collective": coll.name, "method": coll.method, "p": comm.size,
                        "buffer": opts.kind, "dtype": dtype.name,
                        "datatype": (datatype or MPI.Datatype.fromcode(dtype.char)).Get_name(),
                        "op": "sum" if coll.reduces else "none", "root": opts.root if coll.rooted else -1,
                        "iters": opts.iters, "sizes": entries})
    return results


# -- the tables -----------------------------------------------------------------------------------

def _label(variant: str) -> str:
    return "built-in" if variant == BUILTIN else f"mpicoll {variant}"


def osu_table(res: dict[str, Any], cores: int) -> str:
    """OSU's ``-f`` columns, one row per size and variant, the built-in's first."""
    data = "" if res["collective"] == "barrier" else f", {res['buffer']} buffers, {res['datatype']}"
    lines = [f"# OSU MPI {res['method']} Latency Test (python -m mpicoll.bench --style osu): "
             "mpicoll.Comm against the built-in, interleaved",
             f"# p = {res['p']}{data}" + (", op MPI.SUM" if res["op"] == "sum" else "")
             + (f", root {res['root']}" if res["root"] >= 0 else "")
             + f"; {res['iters']} rounds; Avg/Min/Max over ranks of each rank's average per call; "
               "Ratio = Avg / built-in Avg; Algorithm: what ran (-: no message at all)"]
    if res["p"] > cores:
        lines.append(f"# NOISY: {res['p']} ranks on {cores} cores (oversubscribed)")
    lines.append(f"# {'Size':<8s}{'Variant':<24s}{'Avg Latency(us)':>16s}{'Min Latency(us)':>16s}"
                 f"{'Max Latency(us)':>16s}{'Iterations':>12s}{'Ratio':>8s}  Algorithm")
    for entry in res["sizes"]:
        base = entry["stats"][BUILTIN]["avg_us"]
        for s in entry["stats"].values():
            label = _label(s["variant"])
            if "error" in s:
                lines.append(f"{entry['bytes']:<10d}{label:<24s}error: {s['error']}")
                continue
            wrong = "" if not s["wrong"] else f"  WRONG: {s['wrong']} elements differ from the built-in's"
            ratio = s["avg_us"] / base if base > 0 else float("nan")
            lines.append(f"{entry['bytes']:<10d}{label:<24s}{s['avg_us']:16.2f}{s['min_us']:16.2f}"
                         f"{s['max_us']:16.2f}{s['iterations']:12d}{ratio:8.2f}  {s['algorithm']}{wrong}")
    return "\n".join(lines)


def _time(us: float) -> str:
    """nccl-tests' time field: 7 wide, fewer decimals as it grows."""
    return f"{us:7.2f}" if us < 1e4 else f"{us:7.1f}" if us < 1e5 else f"{us:7.0f}"


def _cell(s: dict[str, Any] | None) -> str:
    """One out-of-place or in-place group: time, algbw, busbw, #wrong."""
    if s is None:
        return f"  {'N/A':>7s}  {'N/A':>6s}  {'N/A':>6s}  {'N/A':>5s}"
    if "error" in s:
        return f"  {'error':>7s}  {'-':>6s}  {'-':>6s}  {'-':>5s}"
    wrong = "N/A" if s["wrong"] is None else str(s["wrong"])
    return f"  {_time(s['avg_us'])}  {s['algbw_GBs']:6.2f}  {s['busbw_GBs']:6.2f}  {wrong:>5s}"


def nccl_table(res: dict[str, Any], variant: str, cores: int) -> tuple[str, float, int]:
    """nccl-tests' columns for one variant: (text, average busbw, elements wrong in all)."""
    type_name = _NCCL_TYPES.get(res["dtype"], res["dtype"])
    lines = [f"# {res['collective']}: {_label(variant)}, p = {res['p']}, {res['buffer']} buffers "
             "(python -m mpicoll.bench --style nccl; time: average over ranks of each rank's average per call)"]
    if res["p"] > cores:
        lines.append(f"# NOISY: {res['p']} ranks on {cores} cores (oversubscribed)")
    lines += ["#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong"
              "     time   algbw   busbw #wrong  algorithm",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
              "      (us)  (GB/s)  (GB/s)"]
    busbw: list[float] = []
    errors = 0
    for entry in res["sizes"]:
        out = entry["stats"].get(variant)
        inp = entry["stats"].get(variant + IN_PLACE)
        ran = [s["algorithm"] for s in (out, inp) if s is not None and "algorithm" in s]
        for s in (out, inp):
            if s is not None and "busbw_GBs" in s:
                busbw.append(s["busbw_GBs"])
                errors += s["wrong"] or 0
        algorithm = ran[0] if ran and all(r == ran[0] for r in ran) else " / ".join(ran)
        lines.append(f"{entry['bytes']:12d}  {entry['count']:12d}  {type_name:>8s}  {res['op']:>6s}  "
                     f"{res['root']:6d}{_cell(out)}{_cell(inp)}  {algorithm}")
    avg = float(np.mean(busbw)) if busbw else 0.0
    lines.append(f"# {'Out of bounds values':<20s} : {errors} {'OK' if errors == 0 else 'FAILED'}")
    lines.append(f"# {'Avg bus bandwidth':<20s} : {avg:g}")
    return "\n".join(lines), avg, errors


def variants_of(res: dict[str, Any]) -> list[str]:
    """The variants of a result, the built-in first (out-of-place labels only)."""
    seen: dict[str, None] = {}
    for entry in res["sizes"]:
        for s in entry["stats"].values():
            seen.setdefault(s["variant"], None)
    return list(seen)


def tables(results: list[dict[str, Any]], cores: int) -> str:
    """Every table of a ``--style osu|nccl`` run."""
    blocks = []
    for res in results:
        if res["style"] == "osu":
            blocks.append(osu_table(res, cores))
        else:
            blocks += [nccl_table(res, variant, cores)[0] for variant in variants_of(res)]
    return "\n\n".join(blocks)


def flat_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per (collective, size, variant, in place or not), for ``--csv``."""
    rows = []
    for res in results:
        for entry in res["sizes"]:
            for label, s in entry["stats"].items():
                rows.append({"style": res["style"], "collective": res["collective"], "p": res["p"],
                             "buffer": res["buffer"], "dtype": res["dtype"], "bytes": entry["bytes"],
                             "count": entry["count"], "label": label, **s})
    return rows
