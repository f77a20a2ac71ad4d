"""``python -m mpicoll``: every tool of mpicoll, one subcommand each.

    python -m mpicoll show allreduce ring -p 4 [--rank 2]
    python -m mpicoll verify [allreduce [ring]] [-p 1024 ...]
    python -m mpicoll model allreduce -p 96 --bytes 8 --preset nccl-summit [--json]   (--bytes 1M also)
    python -m mpicoll draw allreduce ring -p 4 -o ring.png
    python -m mpicoll launch -n 4 -m mpicoll.examples.allreduce        (= python -m mpicoll.launch)
    python -m mpicoll.launch -n 2 -m mpicoll calibrate [-o FILE]
    python -m mpicoll.launch -n 2 -m mpicoll bench allreduce --sizes 8:64M     (= python -m mpicoll.bench)
    python -m mpicoll.launch -n 2 -m mpicoll osu                       (= python -m mpicoll.bench.osu)
    python -m mpicoll.launch -n 2 -m mpicoll autocheck                 (= python -m mpicoll.bench.autocheck)
    python -m mpicoll doctor DIR          (what the flight records a job wrote with MPICOLL_TRACE=DIR say)

Every mistake in the arguments is answered with one line naming the valid
choices, printed by one rank (exit status 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

from mpicoll import __version__
from mpicoll.analysis.presets import PRESETS
from mpicoll.families import registry
from mpicoll.ir.schedule import ScheduleError
from mpicoll.tools import commands as tools
from mpicoll.tools.cli import Parser, guarded, usage_error
from mpicoll.tools.progress import Progress

# subcommands that are programs of their own: name -> (module with main(argv), help line)
PROGRAMS = {
    "bench": ("mpicoll.bench.cli", "time mpicoll's collectives against the MPI library's (run under launch -n P)"),
    "osu": ("mpicoll.bench.osu", "mpi4py's OSU latency demos with the built-in and with mpicoll.Comm"),
    "autocheck": ("mpicoll.bench.autocheck", "how close algorithm='auto' comes to the fastest algorithm"),
    "launch": ("mpicoll.launch", "run a program on N processes with the MPI found next to this Python"),
    "doctor": ("mpicoll.tools.doctor", "say what the ranks' flight records (MPICOLL_TRACE=DIR) show happened"),
}


COLLECTIVE_HELP = "one of " + ", ".join(registry.collectives())
ALGORITHM_HELP = ("an algorithm of the collective, e.g. ring for allreduce; "
                  "python -c \"import mpicoll; print(mpicoll.algorithms('allreduce'))\" lists them")
VERIFY_WHAT = ("Run every rank's schedule together on symbolic data (which rank contributed what to which "
               "block) and prove, for each size and parameter set (roots 0, p/2, p-1; 1 and 3 pipeline "
               "segments; node layouts) and out of place and in place: every rank ends with exactly the "
               "collective's result (each contribution counted once, in rank order where the algorithm claims "
               "it), no block is read before it holds data, every message is received, and nothing in flight "
               "is overwritten.")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _sizes(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _nbytes(text: str) -> int:
    """``8``, ``64K``, ``1M``, ``2MiB`` -> bytes (the bench's parser)."""
    from mpicoll.tools.units import parse_size

    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a byte count such as 8, 64K or 1M, got {text!r}") from None


class _Version(argparse.Action):
    """``--version``: the version, and whether each optional compiled part (:mod:`mpicoll.compiled`) is in use."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from mpicoll import compiled
        from mpicoll.engine import direct  # noqa: PLC0415 - initialises MPI: only when asked

        lines = [f"mpicoll {__version__}"]
        for name in ("_callkey", "_rounds", "_fixedpoint"):
            used = "in use" if compiled.extension(name) is not None else "not built, or MPICOLL_NO_EXTENSIONS is set"
            lines.append(f"  {compiled.EXTENSIONS[name]}: {used}")
        lines.append(f"  mpicoll.engine._direct (MPI called from C): {direct.available()[1]}")
        print("\n".join(lines))
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    ap = Parser(prog="python -m mpicoll", description="Every tool of mpicoll, one subcommand each "
                "(python -m mpicoll COMMAND --help for its options).")
    ap.add_argument("--version", action=_Version, nargs=0,
                    help="print mpicoll's version and which of its compiled parts this process uses, and exit")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("show", help="print a schedule as a rounds x ranks table")
    s.add_argument("collective", help=COLLECTIVE_HELP)
    s.add_argument("algorithm", help=ALGORITHM_HELP)
    s.add_argument("-p", type=_positive, required=True, help="number of ranks")
    s.add_argument("--rank", type=int, help="show this rank only")
    s.add_argument("--root", type=int, help="root of a rooted collective (default 0)")
    s.add_argument("--segments", type=_positive, help="pipeline segments of a pipelined algorithm")
    s.add_argument("--ranks-per-node", type=_positive,
                   help="node-aware algorithms: blocks of this many ranks are nodes")

    v = sub.add_parser("verify", help="prove schedules correct symbolically", description=VERIFY_WHAT)
    v.add_argument("collective", nargs="?", help=COLLECTIVE_HELP + " (default: every collective)")
    v.add_argument("algorithm", nargs="?", help=ALGORITHM_HELP + " (default: every algorithm of the collective)")
    v.add_argument("-p", type=_sizes, action="append",
                   help="sizes (repeat or comma-separate; default 1..64, 127, 128)")
    v.add_argument("-q", "--quiet", action="store_true")
    v.add_argument("--ranks-per-node", type=_positive,
                   help="node-aware algorithms: check blocks of this many ranks as nodes (default: 1 node, 2, 3)")

    m = sub.add_parser("model", help="predicted time of each algorithm (alpha-beta-gamma on the schedules)")
    m.add_argument("collective", help=COLLECTIVE_HELP)
    m.add_argument("--algorithms", help="comma-separated algorithm names (default: all)")
    m.add_argument("-p", type=_positive, help="number of ranks (needed unless --map)")
    m.add_argument("--bytes", type=_nbytes, dest="nbytes",
                   help="bytes per rank, e.g. 8, 64K, 1M (the whole vector for gather, scatter, allgather, "
                        "reduce-scatter, alltoall; default 8)")
    m.add_argument("--map", action="store_true",
                   help="which algorithm wins at p = 2 .. 4096 and 8 B .. 256 MiB (a table; -p, --bytes not needed)")
    m.add_argument("--alpha", type=float, help="seconds per message")
    m.add_argument("--beta", type=float, help="seconds per byte")
    m.add_argument("--gamma", type=float, help="seconds per byte reduced")
    m.add_argument("--preset", choices=list(PRESETS),
                   help="local (from calibrate; default) or nccl-summit")
    m.add_argument("--ranks-per-node", type=_positive,
                   help="intra-node constants between ranks of one node; node-aware algorithms built for it")
    m.add_argument("--json", action="store_true", help="print {algorithm: seconds}")

    d = sub.add_parser("draw", help="space-time diagram (PNG or SVG; needs matplotlib)")
    d.add_argument("collective", help=COLLECTIVE_HELP)
    d.add_argument("algorithm", help=ALGORITHM_HELP)
    d.add_argument("-p", type=_positive, required=True, help="number of ranks (readable up to 16)")
    d.add_argument("-o", "--output", required=True, help="FILE.png or FILE.svg")
    d.add_argument("--root", type=int, help="root of a rooted collective (default 0)")
    d.add_argument("--segments", type=_positive, help="pipeline segments of a pipelined algorithm")
    d.add_argument("--ranks-per-node", type=_positive,
                   help="node-aware algorithms: blocks of this many ranks are nodes")

    c = sub.add_parser("calibrate",
                       help="measure alpha, beta, gamma and the executor overheads (run under mpirun -n 2)")
    c.add_argument("-o", "--output", help="also write the constants to this file")
    c.add_argument("--json", action="store_true", help="print the constants as JSON (seconds, seconds per byte)")
    for name, (_, what) in PROGRAMS.items():   # listed here; main() hands their arguments to their own parser
        sub.add_parser(name, help=what + f" ({name} --help for its options)", add_help=False)
    return ap


def _machine(ns: argparse.Namespace):
    from mpicoll.analysis.cost import Machine
    from mpicoll.analysis.presets import preset

    given = [ns.alpha, ns.beta, ns.gamma]
    if ns.preset and any(x is not None for x in given):
        raise ValueError("give either --preset or --alpha, --beta and --gamma, not both")
    if ns.preset:
        machine = preset(ns.preset)
    elif all(x is not None for x in given):
        machine = Machine(ns.alpha, ns.beta, ns.gamma, name="command line")
    elif any(x is not None for x in given):
        raise ValueError("--alpha, --beta and --gamma go together (seconds per message, per byte sent, per byte "
                         "reduced), or name a --preset")
    else:
        machine = preset("local")
    if ns.ranks_per_node is not None:
        if ns.ranks_per_node < 1:
            raise SystemExit(f"--ranks-per-node: expected a positive integer, got {ns.ranks_per_node}")
        machine = machine.with_nodes(ns.ranks_per_node)
    return machine


def _names(collective: str | None, algorithm: str | None) -> None:
    """Check a collective and a concrete algorithm name, listing the choices."""
    if collective is not None and collective.lower() not in registry.collectives():
        raise ValueError(f"unknown collective {collective!r}; choose one of {', '.join(registry.collectives())}")
    if algorithm is not None:
        names = registry.algorithms(collective)
        if algorithm not in names:
            why = ("'auto' is chosen at run time from the message size; name a concrete algorithm"
                   if algorithm == "auto" else f"{collective} has no algorithm {algorithm!r}")
            raise ValueError(f"{why}; choose one of {', '.join(names)}")


def _root(ns: argparse.Namespace) -> None:
    """--root must lie in 0 .. p-1 and is only for rooted algorithms (MPI does not wrap it)."""
    if getattr(ns, "root", None) is None:
        return
    if "root" not in registry.get(ns.collective, ns.algorithm).params:
        raise ValueError(f"--root: {ns.collective} has no root (rooted collectives: bcast, reduce, gather, "
                         "gatherv, scatter, scatterv)")
    if not 0 <= ns.root < ns.p:
        raise ValueError(f"--root: expected 0 <= root < {ns.p}, got {ns.root}")


def _costing(bar: Progress):
    """``model``'s progress callback: which algorithm is being costed, on the bar."""
    def report(name: str, i: int, n: int) -> None:
        bar.update(i, n, f"costing {name}", "algorithms")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in PROGRAMS:
        return _program(args[0], args[1:])
    ns = _parser().parse_args(args)
    try:
        return _run(ns)
    except BrokenPipeError:  # ``python -m mpicoll show ... | head``: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (ValueError, TypeError, ImportError, OSError) as exc:
        usage_error(f"python -m mpicoll {ns.command}", str(exc))
        return 2


def _program(name: str, argv: list[str]) -> int:
    """Run a subcommand that is a program of its own (``bench``, ``osu``, ...) with its arguments."""
    import importlib

    module = importlib.import_module(PROGRAMS[name][0])
    if name == "launch":
        return module.main(argv)
    status = module.main(argv)
    return status if isinstance(status, int) else 0


def _run(ns: argparse.Namespace) -> int:
    if ns.command == "show":
        _names(ns.collective, ns.algorithm)
        _root(ns)
        print(tools.show(ns.collective, ns.algorithm, ns.p, ns.rank, root=ns.root, segments=ns.segments,
                         nodes=ns.ranks_per_node))
    elif ns.command == "verify":
        _names(ns.collective, ns.algorithm)
        return _verify(ns)
    elif ns.command == "model":
        _names(ns.collective, None)
        algs = [a.strip() for a in ns.algorithms.split(",")] if ns.algorithms else None
        for a in algs or []:
            _names(ns.collective, a)
        if ns.map:
            if ns.p is not None or ns.nbytes is not None:
                raise ValueError("--map costs its own grid of p and bytes: drop -p and --bytes")
            with Progress(f"model {ns.collective} --map") as bar:
                grid = tools.scale_map(ns.collective, _machine(ns), algorithms=algs, progress=_costing(bar))
            print(json.dumps({f"{p},{n}": dict(c) for (p, n), c in grid.cells.items()}) if ns.json else grid.table())
            return 0
        if ns.p is None:
            raise ValueError("-p is needed (or --map for a table of p and bytes)")
        if ns.nbytes is None:
            ns.nbytes = 8
            print("(no --bytes: 8 bytes per rank; --bytes 1M for a large message)", file=sys.stderr)
        with Progress(f"model {ns.collective} -p {ns.p}") as bar:
            res = tools.model(ns.collective, ns.p, ns.nbytes, _machine(ns), algs, progress=_costing(bar))
        if ns.json:
            print(json.dumps({name: c.time for name, c in res.costs.items()}))
        else:
            print(res.table())
    elif ns.command == "draw":
        _names(ns.collective, ns.algorithm)
        _root(ns)
        with Progress(f"draw {ns.collective}/{ns.algorithm} p={ns.p}") as bar:
            bar.update(0, 1, "tracing and drawing")
            path = tools.draw(ns.collective, ns.algorithm, ns.p, ns.output, root=ns.root, segments=ns.segments,
                              nodes=ns.ranks_per_node)
        print(f"wrote {path}")
    elif ns.command == "calibrate":
        return _calibrate(ns)
    return 0


def _calibrate(ns: argparse.Namespace) -> int:
    from mpicoll.analysis.presets import calibration_path

    values = tools.calibrate(path=ns.output)
    from mpi4py import MPI

    if MPI.COMM_WORLD.rank != 0:
        return 0
    if ns.json:
        print(json.dumps(values))
        return 0
    a, b, g = values["alpha"], values["beta"], values["gamma"]
    print(f"measured between ranks 0 and 1 of {values['processes']} processes, {values['measured']}:")
    print(f"  alpha  {a * 1e6:10.3f} us        per message (latency)")
    print(f"  beta   {b * 1e9:10.4f} ns/byte   per byte sent ({1 / b / 1e9:.2f} GB/s)")
    print(f"  gamma  {g * 1e9:10.4f} ns/byte   per byte reduced ({1 / g / 1e9:.2f} GB/s)")
    if "round_overhead" in values:   # the executor's own costs ("auto" weighs them; see mpicoll.selection.model)
        print(f"  copy   {values['copy'] * 1e9:10.4f} ns/byte   per byte copied locally")
        print(f"  sends and receives of a rank overlap (duplex): {'yes' if values.get('duplex', True) else 'no'}")
        print(f"  executor overheads: {values['round_overhead'] * 1e6:.3f} us per round, "
              f"{values['message_overhead'] * 1e6:.3f} us per message, {values['step_overhead'] * 1e6:.3f} us per "
              "local step")
    for target in dict.fromkeys([str(calibration_path()), *([str(ns.output)] if ns.output else [])]):
        print(f"wrote {target}" + ("  (read by --preset local)" if target == str(calibration_path()) else ""))
    return 0


def _verify(ns: argparse.Namespace) -> int:
    sizes = [p for group in ns.p for p in group] if ns.p else list(tools.SWEEP_SIZES)
    colls = [ns.collective] if ns.collective else None
    algs = [ns.algorithm] if ns.algorithm else None
    t0 = time.perf_counter()
    count = 0
    done: dict[tuple[str, str], dict[str, set]] = {}
    big = max(sizes) >= 256   # a case takes seconds from here on: say each one as it starts

    def announce(case: tools.Checked) -> None:
        if big and not ns.quiet:
            forms = "out of place and in place" if case.in_place else "out of place"
            print(f"  checking {case.collective}/{case.algorithm} p={case.size}"
                  f"{''.join(f', {k} {v}' for k, v in sorted(case.params.items()))} ({forms}) ..."
                  f"  {time.perf_counter() - t0:.0f} s so far", flush=True)

    bar = Progress("verify")

    def progress(stage: str, done: int, total: int, unit: str) -> None:
        bar.update(done, total, f"{case_name} {stage}", unit)

    case_name = ""

    def starting(case: tools.Checked) -> None:
        nonlocal case_name
        case_name = f"{case.collective}/{case.algorithm} p={case.size}"
        bar.close()   # the line below, if any, goes where the bar was
        announce(case)

    try:
        for case in tools.verify_all(colls, algs, sizes, ns.ranks_per_node, starting=starting,
                                     progress=progress if bar.enabled else None):
            count += 1
            seen = done.setdefault((case.collective, case.algorithm), {"form": set()})
            seen["form"].add("in place" if case.in_place else "out of place")
            for key, value in case.params.items():
                seen.setdefault(key, set()).add("one" if value is None else value)
    except ScheduleError as exc:
        bar.close()
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    bar.close()
    print(f"verified {count} cases in {time.perf_counter() - t0:.1f} s, p in {_span(sizes)}:")
    for (coll, alg), seen in done.items():
        parts = [f"{'nodes of' if k == 'nodes' else k.rstrip('s') + 's'} {', '.join(map(str, sorted(v, key=str)))}"
                 for k, v in seen.items() if k != "form"]
        print(f"  {coll}/{alg}: {'; '.join(parts + [' and '.join(sorted(seen['form'], reverse=True))])}")
    print("each case proved: every rank ends with exactly the collective's result (every contribution counted "
          "once; in rank order where the algorithm claims it), no block read before it holds data, every "
          "message received, nothing in flight overwritten")
    return 0


def _span(sizes: list[int]) -> str:
    return ", ".join(map(str, sizes)) if len(sizes) <= 6 else f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"


if __name__ == "__main__":
    sys.exit(guarded(main))
