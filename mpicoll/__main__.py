"""``python -m mpicoll``: show, verify, model, draw and calibrate any algorithm.

    python -m mpicoll show allreduce ring -p 4 [--rank 2]
    python -m mpicoll verify [allreduce [ring]] [-p 1024 ...]
    python -m mpicoll model allreduce -p 96 --bytes 8 --preset nccl-summit [--json]   (--bytes 1M also)
    python -m mpicoll draw allreduce ring -p 4 -o ring.png
    mpirun -n 2 python -m mpicoll calibrate [-o FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from . import tools
from .schedule import ScheduleError


def _sizes(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _nbytes(text: str) -> int:
    """``8``, ``64K``, ``1M``, ``2MiB`` -> bytes (the bench's parser)."""
    from .bench import parse_size

    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a byte count such as 8, 64K or 1M, got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mpicoll", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)

    s = sub.add_parser("show", help="print a schedule as a rounds x ranks table")
    s.add_argument("collective")
    s.add_argument("algorithm")
    s.add_argument("-p", type=int, required=True, help="number of ranks")
    s.add_argument("--rank", type=int, help="show this rank only")
    s.add_argument("--root", type=int, help="root of a rooted collective (default 0)")
    s.add_argument("--segments", type=int, help="pipeline segments of a pipelined algorithm")
    s.add_argument("--ranks-per-node", type=int, help="node-aware algorithms: blocks of this many ranks are nodes")

    v = sub.add_parser("verify", help="prove schedules correct symbolically")
    v.add_argument("collective", nargs="?")
    v.add_argument("algorithm", nargs="?")
    v.add_argument("-p", type=_sizes, action="append",
                   help="sizes (repeat or comma-separate; default 1..64, 127, 128)")
    v.add_argument("-q", "--quiet", action="store_true")
    v.add_argument("--ranks-per-node", type=int,
                   help="node-aware algorithms: check blocks of this many ranks as nodes (default: 1 node, 2, 3)")

    m = sub.add_parser("model", help="predicted time of each algorithm (alpha-beta-gamma on the schedules)")
    m.add_argument("collective")
    m.add_argument("--algorithms", help="comma-separated algorithm names (default: all)")
    m.add_argument("-p", type=int, required=True)
    m.add_argument("--bytes", type=_nbytes, required=True, dest="nbytes",
                   help="bytes per rank, e.g. 8, 64K, 1M (the whole vector for gather, scatter, allgather, "
                        "reduce-scatter, alltoall)")
    m.add_argument("--alpha", type=float, help="seconds per message")
    m.add_argument("--beta", type=float, help="seconds per byte")
    m.add_argument("--gamma", type=float, help="seconds per byte reduced")
    m.add_argument("--preset", help="local or nccl-summit")
    m.add_argument("--ranks-per-node", type=int,
                   help="intra-node constants between ranks of one node; node-aware algorithms built for it")
    m.add_argument("--json", action="store_true", help="print {algorithm: seconds}")

    d = sub.add_parser("draw", help="space-time diagram (PNG or SVG; needs matplotlib)")
    d.add_argument("collective")
    d.add_argument("algorithm")
    d.add_argument("-p", type=int, required=True)
    d.add_argument("-o", "--output", required=True, help="FILE.png or FILE.svg")
    d.add_argument("--root", type=int)
    d.add_argument("--segments", type=int)
    d.add_argument("--ranks-per-node", type=int, help="node-aware algorithms: blocks of this many ranks are nodes")

    c = sub.add_parser("calibrate", help="measure alpha, beta, gamma (run under mpirun -n 2)")
    c.add_argument("-o", "--output", help="also write the constants to this file")
    return ap


def _machine(ns: argparse.Namespace):
    from .exec.cost import Machine
    from .presets import preset

    given = [ns.alpha, ns.beta, ns.gamma]
    if ns.preset and any(x is not None for x in given):
        raise SystemExit("model: give either --preset or --alpha/--beta/--gamma, not both")
    if ns.preset:
        machine = preset(ns.preset)
    elif all(x is not None for x in given):
        machine = Machine(ns.alpha, ns.beta, ns.gamma, name="command line")
    elif any(x is not None for x in given):
        raise SystemExit("model: --alpha, --beta and --gamma go together")
    else:
        machine = preset("local")
    if ns.ranks_per_node is not None:
        machine = machine.with_nodes(_per_node(ns))
    return machine


def _per_node(ns: argparse.Namespace) -> int | None:
    """``--ranks-per-node``, checked (None when not given)."""
    if ns.ranks_per_node is not None and ns.ranks_per_node < 1:
        raise SystemExit(f"--ranks-per-node: expected a positive integer, got {ns.ranks_per_node}")
    return ns.ranks_per_node


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        if ns.command == "show":
            print(tools.show(ns.collective, ns.algorithm, ns.p, ns.rank, root=ns.root, segments=ns.segments,
                             nodes=_per_node(ns)))
        elif ns.command == "verify":
            return _verify(ns)
        elif ns.command == "model":
            algs = [a.strip() for a in ns.algorithms.split(",")] if ns.algorithms else None
            res = tools.model(ns.collective, ns.p, ns.nbytes, _machine(ns), algs)
            if ns.json:
                print(json.dumps({name: c.time for name, c in res.costs.items()}))
            else:
                print(res.table())
        elif ns.command == "draw":
            path = tools.draw(ns.collective, ns.algorithm, ns.p, ns.output, root=ns.root, segments=ns.segments,
                              nodes=_per_node(ns))
            print(f"wrote {path}")
        elif ns.command == "calibrate":
            values = tools.calibrate(path=ns.output)
            from mpi4py import MPI

            if MPI.COMM_WORLD.rank == 0:
                print(json.dumps(values))
    except (ValueError, TypeError, ImportError) as exc:
        print(f"python -m mpicoll {ns.command}: {exc}", file=sys.stderr)
        return 2
    return 0


def _verify(ns: argparse.Namespace) -> int:
    sizes = [p for group in ns.p for p in group] if ns.p else list(tools.SWEEP_SIZES)
    colls = [ns.collective] if ns.collective else None
    algs = [ns.algorithm] if ns.algorithm else None
    t0 = time.perf_counter()
    count = 0
    done: set[tuple[str, str]] = set()
    try:
        for case in tools.verify_all(colls, algs, sizes, _per_node(ns)):
            count += 1
            if (case.collective, case.algorithm) not in done:
                done.add((case.collective, case.algorithm))
                if not ns.quiet:
                        print(f"checking {case.collective}/{case.algorithm} ...", flush=True)
    except ScheduleError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"verified {count} cases ({len(done)} algorithms, p in {_span(sizes)}) in "
          f"{time.perf_counter() - t0:.1f} s")
    return 0


def _span(sizes: list[int]) -> str:
    return ", ".join(map(str, sizes)) if len(sizes) <= 6 else f"{sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)"


if __name__ == "__main__":
    sys.exit(main())
