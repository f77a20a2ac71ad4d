"""Benchmark mpicoll's collectives against the MPI library's built-in ones.

Run it like the OSU micro-benchmarks or nccl-tests::

    python -m mpicoll.launch -n 2 -m mpicoll.bench allreduce --sizes 8:64M
    mpirun -n 2 python -m mpicoll.bench allreduce bcast --algorithms ring,auto --json out.json
    python -m mpicoll.launch -n 2 -m mpicoll.bench --style osu all --buffer mmap      # OSU's columns
    python -m mpicoll.launch -n 2 -m mpicoll.bench --style nccl allreduce --sizes 8:64M:2   # nccl-tests' columns

``--style table`` (the default): for every size, every algorithm of the
collective, ``auto`` (with the algorithm it ran), the persistent ``*_init``
form (when :mod:`mpicoll.runtime.nonblocking` exists) and the built-in
collective are timed in the same run, interleaved round by round on the same
warm buffers, next to ``np.copyto`` of the same size (the memory-copy bandwidth
of this machine, the physical reference).  A round times a batch of back-to-back
calls (enough for about 2 ms, at least one call; :mod:`mpicoll.bench.timing`);
the time of a round is the slowest rank's; the table reports the median and the
minimum over ``--iters`` rounds, algbw and busbw (the nccl-tests factors) and the
ratio of each variant's median to the built-in's median (lower is better).
Every variant's result is checked against the built-in's once per size.

``--style osu`` and ``--style nccl`` (:mod:`mpicoll.bench.styles`): every
collective mpicoll has, including gather, scatter, scan, exscan, barrier and
the v-variants, on NumPy, ``mmap`` or ``bytearray`` buffers (``--buffer``),
the built-in and mpicoll's ``auto`` (or ``--algorithms``) interleaved the same
way.  ``osu`` prints OSU's ``Size  Avg Latency(us)  Min Latency(us)  Max
Latency(us)  Iterations`` (sizes in bytes, default 0, 1, 2, 4, ... 1 MiB;
Avg/Min/Max over ranks of each rank's average per call), the built-in's row
next to mpicoll's with their ratio and the algorithm that ran; ``nccl`` prints
nccl-tests' ``size count type redop root``, out-of-place and in-place ``time
algbw busbw #wrong`` (#wrong: elements differing from the built-in's result)
and the ``# Avg bus bandwidth`` line.

``--tune`` measures, for each collective at this process count, which
algorithm is fastest at each size and writes the crossovers to the tuning file
that "auto" consults (``$MPICOLL_TUNING``, else ``~/.config/mpicoll/tuning.json``).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.bench.cases import algorithm_run
from mpicoll.bench.timing import BATCH_SECONDS, MAX_BATCH, batch_size, time_variants  # noqa: F401 (re-exported)
from mpicoll.comm.comm import Comm
from mpicoll.families import registry
from mpicoll.selection import choose as selection
from mpicoll.selection import tuning
from mpicoll.tools.units import parse_size

__all__ = ["Collective", "COLLECTIVES", "main", "parse_size", "parse_sizes", "run_bench"]

BUILTIN = "builtin"
AUTO = "auto"
PERSISTENT = "persistent"


# -- the collectives ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Collective:
    """How to benchmark one collective.

    ``buffers(rank, p, nbytes, dtype)`` returns ``(args, out, expected_fill)``:
    the positional arguments of the call after the buffers are filled, the array
    that holds the result, and a function filling the send data (called before
    the correctness check).  ``factor(p)`` is nccl-tests' busbw factor; ``payload``
    says whether the benchmark size is the per-rank buffer (1) or the total
    vector of p blocks (p).
    """

    name: str
    method: str
    reduces: bool
    factor: Callable[[int], float]
    total_vector: bool   # the size is count x p (allgather, reduce-scatter, alltoall)
    root_only: bool = False  # only the root's result is defined (reduce)


def _ring_factor(p: int) -> float:
    return (p - 1) / p if p > 1 else 1.0


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("allreduce", "Allreduce", True, lambda p: 2 * (p - 1) / p if p > 1 else 1.0, False),
    Collective("bcast", "Bcast", False, lambda p: 1.0, False),
    Collective("reduce", "Reduce", True, lambda p: 1.0, False, root_only=True),
    Collective("allgather", "Allgather", False, _ring_factor, True),
    Collective("reduce_scatter_block", "Reduce_scatter_block", True, _ring_factor, True),
    Collective("alltoall", "Alltoall", False, _ring_factor, True),
)}


class Buffers:
    """The warm buffers of one (collective, size): send data, one output per variant."""

    def __init__(self, coll: Collective, rank: int, p: int, nbytes: int, dtype: np.dtype):
        itemsize = dtype.itemsize
        self.coll, self.rank, self.p = coll, rank, p
        count = max(1, nbytes // itemsize)
        if coll.total_vector:
            count = max(1, count // p)       # elements per block
        self.count = count
        if coll.name in ("allreduce", "reduce", "bcast"):
            send_n, recv_n = count, count
        elif coll.name == "allgather":
            send_n, recv_n = count, count * p
        elif coll.name == "reduce_scatter_block":
            send_n, recv_n = count * p, count
        else:  # alltoall
            send_n, recv_n = count * p, count * p
        self.nbytes = (recv_n if coll.name == "allgather" else send_n) * itemsize
        rng = np.random.default_rng(1234 + rank)
        if dtype.kind == "f":
            self.send = rng.integers(-8, 8, send_n).astype(dtype)   # exact sums in floats
        else:
            self.send = rng.integers(-8, 8, send_n).astype(dtype)
        self.recv_n, self.dtype = recv_n, dtype
        self.outs: dict[str, np.ndarray] = {}
        self.copy_src = np.ones(max(1, nbytes // itemsize), dtype)
        self.copy_dst = np.empty_like(self.copy_src)

    def out(self, variant: str) -> np.ndarray:
        if variant not in self.outs:
            self.outs[variant] = np.zeros(self.recv_n, self.dtype)
        return self.outs[variant]

    def args(self, variant: str) -> tuple:
        """Arguments of the call for ``variant`` (its own output buffer, the shared send data)."""
        out = self.out(variant)
        name = self.coll.name
        if name == "bcast":
            return (out, 0)
        if name == "reduce":
            return (self.send, out, MPI.SUM, 0)
        if self.coll.reduces:
            return (self.send, out, MPI.SUM)
        return (self.send, out)

    def reset_for_check(self, variant: str) -> None:
        """Put the input of a bcast (the root's data) into the variant's buffer."""
        out = self.out(variant)
        out[...] = 0
        if self.coll.name == "bcast" and self.rank == 0:
            out[...] = self.send[: self.recv_n]


# -- variants: how one call of each runs ------------------------------------------------------------

def _has_module(coll: Collective) -> bool:
    return importlib.util.find_spec(f"mpicoll.calls.{coll.method.lower()}") is not None


def _nonblocking() -> Any:
    try:
        return importlib.import_module("mpicoll.runtime.nonblocking")
    except ImportError:
        return None


def variants(coll: Collective, p: int, only: list[str] | None) -> tuple[list[str], list[str]]:
    """(variant names, notes): the built-in first, then auto, the algorithms, the persistent form."""
    notes: list[str] = []
    names = [BUILTIN]
    if not _has_module(coll):
        notes.append(f"{coll.name}: mpicoll has no {coll.method} of its own on this branch; mpicoll.Comm forwards "
                     "it to the built-in, so 'auto' times that forwarding (no algorithms to compare)")
        return names + [AUTO], notes
    algs = registry.algorithms(coll.name) if coll.name in registry.collectives() else []
    wanted = [AUTO, *algs] if only is None else [a for a in only if a == AUTO or a in algs]
    if only is not None:
        unknown = [a for a in only if a not in (AUTO, BUILTIN, PERSISTENT, *algs)]
        if unknown:
            raise ValueError(f"--algorithms: {coll.name} has no algorithm(s) {', '.join(unknown)}; "
                             f"choose from {', '.join([AUTO, *algs])}")
    names += wanted
    if only is None or PERSISTENT in only:
        if _nonblocking() is not None and hasattr(Comm, coll.method + "_init"):
            names.append(PERSISTENT)
        elif only is not None:
            notes.append(f"{coll.name}: no persistent form (mpicoll.runtime.nonblocking is missing)")
    return names, notes


def make_call(variant: str, coll: Collective, comm: Comm, bufs: Buffers) -> tuple[Callable[[], None], Any]:
    """A no-argument function running one call of ``variant``, and a request to free later."""
    args = bufs.args(variant)
    if variant == BUILTIN:
        fn = getattr(MPI.Intracomm, coll.method)
        return (lambda: fn(comm, *args)), None
    if variant == PERSISTENT:
        req = getattr(comm, coll.method + "_init")(*args)
        start, wait = req.Start, req.Wait

        def persistent() -> None:
            start()
            wait()
        return persistent, req
    method = getattr(comm, coll.method)
    return (lambda: method(*args, algorithm=variant)), None


def _close(results: np.ndarray, expected: np.ndarray) -> bool:
    if results.dtype.kind in "fc":
        return bool(np.allclose(results, expected, rtol=1e-5, atol=1e-6))
    return bool(np.array_equal(results, expected))


# -- timing: see mpicoll.bench.timing (re-exported for mpicoll.bench.gpu) ------------------------------

_batch = batch_size


def measure(coll: Collective, comm: Comm, nbytes: int, dtype: np.dtype, names: list[str], iters: int,
            warmup: int) -> dict[str, Any]:
    """Time every variant at one size; returns per-variant statistics (slowest rank) and checks."""
    world = MPI.Intracomm(comm)
    rank, p = comm.rank, comm.size
    bufs = Buffers(coll, rank, p, nbytes, dtype)
    calls: dict[str, Callable[[], None]] = {}
    requests = []
    errors: dict[str, str] = {}
    for name in names:
        try:
            fn, req = make_call(name, coll, comm, bufs)
        except Exception as exc:   # an algorithm that cannot run here (reported, not fatal)
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        calls[name] = fn
        if req is not None:
            requests.append(req)
    ran = {}
    if AUTO in calls and _has_module(coll):   # what "auto" runs at this size (prepared as the call would be)
        ran[AUTO] = algorithm_run(comm, coll.method, bufs.args(AUTO), AUTO)
    # check each result once, against the built-in's
    checked: dict[str, bool] = {}
    for name, fn in calls.items():
        bufs.reset_for_check(name)
        fn()
    ref = bufs.out(BUILTIN)
    for name in calls:
        if coll.root_only and rank != 0:
            checked[name] = True
        else:
            checked[name] = _close(bufs.out(name), ref)
    flags = np.array([checked[n] for n in calls], dtype=np.int32)
    world.Allreduce(MPI.IN_PLACE, flags, op=MPI.MIN)
    checked = {n: bool(f) for n, f in zip(calls, flags)}
    copy_src, copy_dst = bufs.copy_src, bufs.copy_dst
    copy_fn = lambda: np.copyto(copy_dst, copy_src)  # noqa: E731
    timed = {"memcpy": copy_fn, **calls}
    batch = {name: _batch(fn, world) for name, fn in timed.items()}
    for _ in range(warmup):
        for fn in timed.values():
            fn()
    slowest = time_variants(timed, batch, iters, world)
    for req in requests:
        req.Free()
    size_bytes = bufs.nbytes
    factor = coll.factor(p)
    stats: dict[str, Any] = {}
    for j, name in enumerate(timed):
        col = slowest[:, j]
        med, low = float(np.median(col)), float(col.min())
        algbw = size_bytes / med / 1e9
        stats[name] = {"median_s": med, "min_s": low, "algbw_GBs": algbw,
                       "busbw_GBs": algbw * (1.0 if name == "memcpy" else factor),
                       "batch": batch[name], "ok": checked.get(name, True)}
    base = stats[BUILTIN]["median_s"]
    for name in calls:
        stats[name]["ratio"] = stats[name]["median_s"] / base
    for name, alg in ran.items():
        stats[name]["ran"] = alg
    for name, err in errors.items():
        stats[name] = {"error": err}
    return {"bytes": size_bytes, "count": bufs.count, "stats": stats}


# -- sizes and output -------------------------------------------------------------------------------

def parse_sizes(text: str) -> list[int]:
    """``8:64M`` (8 bytes, the powers of 4 between, 64 MiB), ``0:1M:2`` (0, 1, 2, 4, ..., 1 MiB), or a list ``8,1M``."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"--sizes: expected LO:HI or LO:HI:FACTOR, got {text!r}")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) == 3 else 4
        if hi < lo or factor < 2:
            raise ValueError(f"--sizes: need LO <= HI and FACTOR >= 2, got {text!r}")
        sizes, s = [lo], 1
        while s < hi:   # the powers of FACTOR strictly between LO and HI, so that 8:64M hits 64K and 1M
            if s > lo:
                sizes.append(s)
            s *= factor
        if hi > lo:
            sizes.append(hi)
        return sizes
    return [parse_size(x) for x in text.split(",") if x.strip()]


def human(nbytes: float) -> str:
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(nbytes)} B"


class Progress:
    """A one-line progress bar on stderr (rank 0 only)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled and total > 1
        self.t0 = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        fill = int(width * self.done / self.total)
        elapsed = time.perf_counter() - self.t0
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} {label:<30} "
                         f"{elapsed:6.1f} s")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def rows(results: list[dict]) -> list[dict]:
    """One flat row per (collective, size, variant)."""
    out = []
    for res in results:
        for entry in res["sizes"]:
            fastest = min((s["median_s"], n) for n, s in entry["stats"].items()
                          if n not in ("memcpy", BUILTIN, PERSISTENT) and "median_s" in s and s["ok"])
            for name, s in entry["stats"].items():
                row = {"collective": res["collective"], "p": res["p"], "dtype": res["dtype"], "bytes": entry["bytes"],
                       "variant": name, **s}
                if name == AUTO and "median_s" in s:
                    row["auto_vs_fastest"] = s["median_s"] / fastest[0]
                    row["fastest"] = fastest[1]
                out.append(row)
    return out


def table(res: dict) -> str:
    """The text table of one collective's sweep."""
    lines = [f"# {res['collective']}  p = {res['p']}  dtype = {res['dtype']}  "
             f"(times: slowest rank, median [min] over {res['iters']} rounds; ratio = median / built-in median)"]
    if res["p"] > res.get("cores", res["p"]):
        lines.append(f"# NOISY: {res['p']} ranks on {res['cores']} cores (oversubscribed)")
    for note in res["notes"]:
        lines.append(f"# note: {note}")
    head = f"{'size':>9} {'variant (auto: what ran)':<26} {'median us':>11} {'min us':>10} {'algbw GB/s':>10} " \
           f"{'busbw GB/s':>10} {'ratio':>6} {'check':>5}"
    lines.append(head)
    for entry in res["sizes"]:
        stats = entry["stats"]
        algs = [(s["median_s"], n) for n, s in stats.items()
                if n not in ("memcpy", BUILTIN, PERSISTENT) and "median_s" in s]
        fastest = min(algs) if algs else None
        for name, s in stats.items():
            if "error" in s:
                lines.append(f"{human(entry['bytes']):>9} {name:<26} error: {s['error']}")
                continue
            ratio = "" if name == "memcpy" else f"{s['ratio']:.2f}" if "ratio" in s else ""
            flag = ""
            if name == AUTO and fastest is not None and s["median_s"] > 1.10 * fastest[0]:
                flag = f"  auto {s['median_s'] / fastest[0]:.2f}x the fastest ({fastest[1]})"
            label = ("memcpy (device)" if res.get("device") else "memcpy (np.copyto)") if name == "memcpy" else name
            if "ran" in s:
                label = f"{name} ({s['ran']})"
            lines.append(f"{human(entry['bytes']):>9} {label:<26} {s['median_s'] * 1e6:11.2f} {s['min_s'] * 1e6:10.2f} "
                         f"{s['algbw_GBs']:10.2f} {s['busbw_GBs']:10.2f} {ratio:>6} "
                         f"{'' if name == 'memcpy' else 'ok' if s['ok'] else 'WRONG':>5}{flag}")
    return "\n".join(lines)


def plot(results: list[dict], path: str) -> None:
    """busbw and time against size, one line per variant, one row of panels per collective."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise SystemExit("--plot needs matplotlib (pip install matplotlib)") from None
    fig, axes = plt.subplots(len(results), 2, figsize=(12, 4.2 * len(results)), squeeze=False)
    for (ax_bw, ax_t), res in zip(axes, results):
        names = list(res["sizes"][0]["stats"])
        # red is auto's alone: the algorithms take the other tab10/tab20 colours, each its own
        others = [c for j, c in enumerate(plt.get_cmap("tab20").colors) if j not in (6, 7)]  # 6, 7: the reds
        others = others[0::2] + others[1::2]                                                 # dark shades first
        for i, name in enumerate(names):
            pts = [(e["bytes"], e["stats"][name]) for e in res["sizes"] if "median_s" in e["stats"].get(name, {})]
            if not pts:
                continue
            x = [b for b, _ in pts]
            style = {"memcpy": dict(color="black", linestyle=":"), BUILTIN: dict(color="black", linewidth=2),
                     AUTO: dict(color="tab:red", linewidth=2)}.get(name, dict(color=others[i % len(others)]))
            label = "memcpy (np.copyto)" if name == "memcpy" else name
            ax_bw.plot(x, [s["busbw_GBs"] for _, s in pts], marker=".", label=label, **style)
            if name != "memcpy":
                ax_t.plot(x, [s["median_s"] * 1e6 for _, s in pts], marker=".", label=label, **style)
        title = f"{res['collective']}, p = {res['p']}, {res['dtype']}"
        for ax, ylabel in ((ax_bw, "busbw (GB/s)"), (ax_t, "time (us, median of slowest rank)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("bytes")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
        ax_t.set_yscale("log")
        ax_bw.set_yscale("log")
        ax_bw.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the sweep and tuning -----------------------------------------------------------------------------

def run_bench(comm: Comm, collectives: list[str], sizes: list[int], *, algorithms: list[str] | None = None,
              dtype: str = "float64", iters: int = 20, warmup: int = 3, progress: bool = True) -> list[dict]:
    """Run the sweep; every rank returns the same list of per-collective results."""
    dt = np.dtype(dtype)
    plans = []
    for name in collectives:
        key = name.lower()
        if key not in COLLECTIVES:
            raise ValueError(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)}")
        coll = COLLECTIVES[key]
        names, notes = variants(coll, comm.size, algorithms)
        plans.append((coll, names, notes))
    bar = Progress(sum(len(sizes) for _ in plans), progress and comm.rank == 0)
    results = []
    for coll, names, notes in plans:
        entries = []
        for nbytes in sizes:
            entries.append(measure(coll, comm, nbytes, dt, names, iters, warmup))
            bar.step(f"{coll.name} {human(nbytes)}")
        results.append({"collective": coll.name, "p": comm.size, "dtype": dt.name, "iters": iters,
                        "cores": _cores(), "notes": notes, "sizes": entries})
    return results


def _cores() -> int:
    import os  # noqa: PLC0415

    return os.cpu_count() or 1   # the machine's (mpirun binds each rank to one core)


def tune(results: list[dict]) -> dict[str, Any]:
    """Crossovers from a sweep: per collective and p, bands ``[upper_bytes, algorithm]`` of the fastest.

    A band ends halfway (geometrically) between the last size where its algorithm
    won and the next measured size; the last band is open (``null``).
    """
    out: dict[str, Any] = {}
    for res in results:
        best = []
        for entry in res["sizes"]:
            algs = [(s["median_s"], n) for n, s in entry["stats"].items()
                    if n not in ("memcpy", BUILTIN, PERSISTENT, AUTO) and "median_s" in s and s["ok"]]
            if algs:
                best.append((entry["bytes"], min(algs)[1]))
        bands: list[list] = []
        for i, (nbytes, name) in enumerate(best):
            if bands and bands[-1][1] == name:
                continue
            if bands:
                bands[-1][0] = int(math.sqrt(best[i - 1][0] * nbytes))
            bands.append([None, name])
        if bands:
            out.setdefault(res["collective"], {})[str(res["p"])] = bands
    return out


def write_tuning(found: dict[str, Any], path: str) -> None:
    """Merge ``found`` into the tuning file at ``path`` (other collectives and p are kept)."""
    import os  # noqa: PLC0415

    data: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as fh:
            data = json.load(fh)
    for coll, by_p in found.items():
        data.setdefault(coll, {}).update(by_p)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
    selection.reload_tuning()


# -- command line ---------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mpicoll.bench", description=__doc__.split("\n\n")[0],
                                 epilog="--style osu / nccl: see the module docstrings of mpicoll.bench.cli and "
                                        "mpicoll.bench.styles for the columns")
    ap.add_argument("collectives", nargs="*", default=["allreduce"],
                    help=f"collectives to time (default allreduce), or 'all'; --style table: {', '.join(COLLECTIVES)}; "
                         f"--style osu/nccl: also gather, scatter, scan, exscan, barrier and the v-variants")
    ap.add_argument("--style", choices=("table", "osu", "nccl"), default="table",
                    help="table (default): every algorithm, median/min of the slowest rank; osu: OSU's Avg/Min/Max "
                         "latency columns; nccl: nccl-tests' columns (out-of-place and in-place, #wrong)")
    ap.add_argument("--algorithms", help="comma-separated: algorithm names, auto, persistent (table: default all; "
                                         "osu/nccl: default auto)")
    ap.add_argument("--sizes", help="bytes: LO:HI[:FACTOR] (LO, the powers of FACTOR between, HI) or a list 8,64K,1M; "
                                    "default 8:64M (factor 4), --style osu 0:1M:2 (OSU's 0, 1, 2, 4, ...)")
    ap.add_argument("--buffer", choices=("numpy", "mmap", "bytearray"), default="numpy",
                    help="--style osu/nccl: the buffers' kind (non-NumPy ones passed as [buf, count, datatype])")
    ap.add_argument("--dtype", help="element type (default float64; --style osu/nccl float32; --style osu moves "
                                    "MPI.BYTE in the collectives that do not reduce)")
    ap.add_argument("--root", type=int, default=0, help="--style osu/nccl: the root of rooted collectives (default 0)")
    ap.add_argument("--iters", type=int, default=20, help="timed rounds per size (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed rounds per size (default 3)")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--csv", help="write one row per (size, variant) as CSV")
    ap.add_argument("--plot", help="--style table: draw busbw and time against size (PNG; needs matplotlib)")
    ap.add_argument("--tune", action="store_true",
                    help="--style table: measure crossovers between algorithms and write them to the tuning file")
    ap.add_argument("--tuning-file", help="where --tune writes (default $MPICOLL_TUNING or "
                                          "~/.config/mpicoll/tuning.json)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--device", choices=("cpu", "gpu", "standin"), default="cpu",
                    help="gpu: CuPy buffers, mpicoll's GPU transports against get + built-in + set (see "
                         "mpicoll.bench.gpu); standin: the same on the host stand-in device (tests only)")
    return ap


def _write_csv(flat: list[dict], path: str) -> None:
    keys = list(dict.fromkeys(k for r in flat for k in r))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(flat)


def _run_style(args: argparse.Namespace, ap: argparse.ArgumentParser, wrapped: Comm, sizes: list[int],
               algorithms: list[str] | None, command: str) -> list[dict]:
    """``--style osu|nccl``: measure, print on rank 0, write JSON/CSV."""
    from mpicoll.bench import styles as bench_styles  # noqa: PLC0415 - only these styles need it

    if args.tune or args.plot or args.device != "cpu":
        ap.error(f"--tune, --plot and --device are options of --style table, not --style {args.style}")
    try:
        opts = bench_styles.StyleOptions(args.style, sizes, algorithms or [AUTO], kind=args.buffer,
                                         dtype=args.dtype or "float32", root=args.root, iters=args.iters,
                                         warmup=args.warmup)
        names = [n.lower() for n in args.collectives]
        colls = bench_styles.collectives(names)
        for coll in colls:
            bench_styles.check_algorithms(coll, opts.algorithms)
        if not 0 <= opts.root < wrapped.size:
            raise ValueError(f"--root: {opts.root} is not a rank of the {wrapped.size} processes")
        total = sum(len(bench_styles.block_counts(c, opts.style, sizes, wrapped.size,
                                                  bench_styles.element_type(c, opts)[0].itemsize)) for c in colls)
    except ValueError as exc:
        ap.error(str(exc))
    bar = Progress(total, not args.quiet and wrapped.rank == 0)
    results = bench_styles.run_style(wrapped, names, opts, progress=bar.step)
    if wrapped.rank == 0:
        print(f"# mpicoll.bench: {command}")
        print(bench_styles.tables(results, _cores()), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1)
        if args.csv:
            _write_csv(bench_styles.flat_rows(results), args.csv)
    return results


def main(argv: list[str] | None = None, comm: MPI.Intracomm | None = None) -> list[dict]:
    """The command line; returns the results (every rank).

    ``comm`` (default ``MPI.COMM_WORLD``) is wrapped in :class:`mpicoll.Comm`
    unless it is one already (a test may pass a subclass of its own).
    """
    ap = _parser()
    args = ap.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    try:
        np.dtype(args.dtype or "float64")
    except TypeError:
        ap.error(f"--dtype: unknown dtype {args.dtype!r}")
    try:
        sizes = parse_sizes(args.sizes or ("0:1M:2" if args.style == "osu" else "8:64M"))
    except ValueError as exc:
        ap.error(str(exc))
    algorithms = [a.strip().lower() for a in args.algorithms.split(",")] if args.algorithms else None
    base = comm if comm is not None else MPI.COMM_WORLD
    wrapped = base if isinstance(base, Comm) else Comm(base)
    command = " ".join(sys.argv[1:] if argv is None else argv)
    if args.style != "table":
        results = _run_style(args, ap, wrapped, sizes, algorithms, command)
        wrapped.Barrier()
        return results
    if args.buffer != "numpy" or args.root != 0:
        ap.error("--buffer and --root are options of --style osu and --style nccl")
    names = list(COLLECTIVES) if args.collectives == ["all"] else args.collectives
    dtype = args.dtype or "float64"
    if args.tune:
        algorithms = None
    if args.device != "cpu":
        from mpicoll.bench.gpu import run_bench_gpu  # noqa: PLC0415

        results = run_bench_gpu(sys.modules[__name__], wrapped, names, sizes, device=args.device, dtype=dtype,
                                iters=args.iters, warmup=args.warmup, progress=not args.quiet)
    else:
        results = run_bench(wrapped, names, sizes, algorithms=algorithms, dtype=dtype, iters=args.iters,
                            warmup=args.warmup, progress=not args.quiet)
    if wrapped.rank == 0:
        print(f"# mpicoll.bench: {command}")
        for res in results:
            print(table(res))
            print()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1)
        if args.csv:
            _write_csv(rows(results), args.csv)
        if args.plot:
            plot(results, args.plot)
        if args.tune:
            path = args.tuning_file or tuning.tuning_path()
            found = tune(results)
            write_tuning(found, path)
            print(f"# tuning: wrote {json.dumps(found)} to {path}")
    wrapped.Barrier()
    if args.tune:
        selection.reload_tuning()
    return results

