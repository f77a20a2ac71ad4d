"""``python -m mpicoll.bench``: benchmark mpicoll's collectives against the MPI library's built-in ones.

Run it like the OSU micro-benchmarks or nccl-tests::

    python -m mpicoll.launch -n 2 -m mpicoll.bench allreduce --sizes 8:64M
    mpirun -n 2 python -m mpicoll.bench allreduce bcast --algorithms ring,auto --json out.json
    python -m mpicoll.launch -n 2 -m mpicoll.bench --style osu all --buffer mmap      # OSU's columns
    python -m mpicoll.launch -n 2 -m mpicoll.bench --style nccl allreduce --sizes 8:64M:2   # nccl-tests' columns
    python -m mpicoll.launch -n 2 -m mpicoll.bench overlap     # nonblocking overlap (mpicoll.bench.overlap)

``--style table`` (the default): for every size, every algorithm of the
collective, ``auto`` (with the algorithm it ran), the persistent ``*_init``
form and the built-in
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
that "auto" consults (``--tuning-file``, else ``$MPICOLL_TUNING``, else
``~/.config/mpicoll/tuning.json``), naming the file and the bands it wrote.
The bands cover the measured sizes only: outside them auto decides as before.

The command line is here; the work is in :mod:`mpicoll.bench.variants` (what
is timed), :mod:`mpicoll.bench.sweep` (the timing), :mod:`mpicoll.bench.report`
(tables, CSV, the plot), :mod:`mpicoll.bench.tune` (``--tune``),
:mod:`mpicoll.bench.styles` (``--style osu`` and ``nccl``) and
:mod:`mpicoll.bench.gpu` (``--device``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI

from mpicoll.bench import styles
from mpicoll.bench.report import Progress, human, plot, rows, table, write_csv
from mpicoll.bench.sweep import cores, run_bench
from mpicoll.bench.tune import describe_tuning, tune, write_tuning
from mpicoll.bench.variants import AUTO, BUILTIN, COLLECTIVES, PERSISTENT, Collective, variants
from mpicoll.comm.comm import Comm
from mpicoll.selection import choose as selection
from mpicoll.selection import tuning
from mpicoll.tools.cli import Parser
from mpicoll.tools.record import run_record, write_json
from mpicoll.tools.units import parse_size

# the names of the module this one was split from, for the programs and tests that use them
__all__ = ["Collective", "COLLECTIVES", "main", "parse_size", "parse_sizes", "run_bench", "human",
           "AUTO", "BUILTIN", "PERSISTENT", "Comm"]


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


def with_record(results: list[dict], processes: int, command: str) -> list[dict]:
    """The results, each with the run's facts under ``"run"`` (:func:`mpicoll.tools.record.run_record`)."""
    run = run_record(processes, f"python -m mpicoll.launch -n {processes} -m mpicoll bench {command}")
    return [{**res, "run": run} for res in results]


def _parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m mpicoll bench", description=__doc__.split("\n\n")[0],
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
    ap.add_argument("--json", help="write the results as JSON (python -m mpicoll.bench.figures draws them)")
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


def _run_style(args: argparse.Namespace, ap: argparse.ArgumentParser, wrapped: Comm, sizes: list[int],
               algorithms: list[str] | None, command: str) -> list[dict]:
    """``--style osu|nccl``: measure, print on rank 0, write JSON/CSV."""
    if args.tune or args.plot or args.device != "cpu":
        ap.error(f"--tune, --plot and --device are options of --style table, not --style {args.style}")
    try:
        opts = styles.StyleOptions(args.style, sizes, algorithms or [AUTO], kind=args.buffer,
                                         dtype=args.dtype or "float32", root=args.root, iters=args.iters,
                                         warmup=args.warmup)
        names = [n.lower() for n in args.collectives]
        colls = styles.collectives(names)
        for coll in colls:
            styles.check_algorithms(coll, opts.algorithms)
        if not 0 <= opts.root < wrapped.size:
            raise ValueError(f"--root: {opts.root} is not a rank of the {wrapped.size} processes")
        total = sum(len(styles.block_counts(c, opts.style, sizes, wrapped.size,
                                                  styles.element_type(c, opts)[0].itemsize)) for c in colls)
    except ValueError as exc:
        ap.error(str(exc))
    bar = Progress(total, not args.quiet and wrapped.rank == 0)
    results = styles.run_style(wrapped, names, opts, progress=bar.step)
    if wrapped.rank == 0:
        print(f"# mpicoll.bench: {command}")
        print(styles.tables(results, cores()), flush=True)
        if args.json:
            write_json(args.json, with_record(results, wrapped.size, command))
        if args.csv:
            write_csv(styles.flat_rows(results), args.csv)
    return results


def main(argv: list[str] | None = None, comm: MPI.Intracomm | None = None) -> list[dict]:
    """The command line; returns the results (every rank).

    ``comm`` (default ``MPI.COMM_WORLD``) is wrapped in :class:`mpicoll.Comm`
    unless it is one already (a test may pass a subclass of its own).
    """
    if (sys.argv[1:] if argv is None else argv)[:1] == ["overlap"]:     # python -m mpicoll.bench overlap ...
        from mpicoll.bench import overlap  # noqa: PLC0415 - its own command line

        overlap.main((sys.argv[1:] if argv is None else argv)[1:])
        return []
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
    names = list(COLLECTIVES) if args.collectives == ["all"] else [n.lower() for n in args.collectives]
    dtype = args.dtype or "float64"
    if args.tune:
        algorithms = None
    for name in names:   # every rank finds a wrong name here, before any message
        if name not in COLLECTIVES:
            ap.error(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)} or all")
        if args.device == "cpu":
            try:
                variants(COLLECTIVES[name], wrapped.size, algorithms)
            except ValueError as exc:
                ap.error(str(exc))
    if args.device != "cpu":
        from mpicoll.bench.gpu import run_bench_gpu  # noqa: PLC0415 - imports CuPy when --device gpu

        results = run_bench_gpu(wrapped, names, sizes, device=args.device, dtype=dtype,
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
            write_json(args.json, with_record(results, wrapped.size, command))
        if args.csv:
            write_csv(rows(results), args.csv)
        if args.plot:
            plot(results, args.plot)
        if args.tune:
            path = args.tuning_file or tuning.tuning_path()
            found = tune(results)
            write_tuning(found, path)
            print(f"# tuning: wrote {path}; from now on algorithm='auto' follows it at these sizes:")
            print(describe_tuning(found))
            print(f"# (sizes not measured are left to auto's model; delete {path} or set MPICOLL_TUNING "
                  "elsewhere to undo; MPICOLL_DEBUG=2 reports each call it decides)")
    wrapped.Barrier()
    if args.tune:
        selection.reload_tuning()
    return results

