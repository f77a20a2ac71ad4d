"""How close "auto" comes to the fastest forced algorithm, size by size.

Run under MPI like the bench (it runs :func:`mpicoll.bench.sweep.run_bench`: every
algorithm of each collective and ``auto`` timed in one run, interleaved round
by round on the same buffers)::

    python -m mpicoll.launch -n 2 -m mpicoll.bench.autocheck --sizes 8:16M --iters 11
    python -m mpicoll.bench.autocheck --from results.json     # a saved ``mpicoll.bench --json`` sweep

and prints, per collective and size, the algorithm "auto" chose, its time and
the fastest forced algorithm's, as medians (the bench's figure) and as minima
over the rounds (less moved by other processes sharing the cores), and their
ratios: ``auto / fastest``, 1.00 when auto picked the fastest.  A ratio above
1.10 is flagged.  The summary also gives auto's time over the same algorithm's
forced (when the bench says which one auto ran): identical calls, so its spread
is this run's noise floor.  Not a test: timings on a shared machine are noisy, and
algorithms whose schedules coincide at this p differ by noise alone.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mpicoll.bench.cli import parse_sizes
from mpicoll.bench.report import human
from mpicoll.bench.sweep import run_bench
from mpicoll.bench.variants import AUTO, BUILTIN, COLLECTIVES, PERSISTENT
from mpicoll.comm.comm import Comm
from mpicoll.families import registry
from mpicoll.tools.cli import Parser, guarded

__all__ = ["ratios", "report", "main"]

SKIP = ("memcpy", BUILTIN, PERSISTENT, AUTO)
FLAG = 1.10


def ratios(results: list[dict]) -> list[dict[str, Any]]:
    """One row per (collective, size): auto's and the fastest algorithm's median and minimum, and the ratios."""
    rows = []
    for res in results:
        for entry in res["sizes"]:
            stats = entry["stats"]
            auto = stats.get(AUTO, {})
            forced = {n: s for n, s in stats.items() if n not in SKIP and "median_s" in s and s.get("ok", True)}
            if "median_s" not in auto or not forced:
                continue
            by_median = min(forced, key=lambda n: forced[n]["median_s"])
            by_min = min(forced, key=lambda n: forced[n]["min_s"])
            rows.append({"collective": res["collective"], "p": res["p"], "bytes": entry["bytes"],
                         "auto": auto.get("ran", ""),
                         "auto_median_s": auto["median_s"], "fastest_median": by_median,
                         "fastest_median_s": forced[by_median]["median_s"],
                         "ratio_median": auto["median_s"] / forced[by_median]["median_s"],
                         "auto_min_s": auto["min_s"], "fastest_min": by_min, "fastest_min_s": forced[by_min]["min_s"],
                         "ratio_min": auto["min_s"] / forced[by_min]["min_s"],
                         # auto against its own algorithm forced: 1 but for noise (the noise floor of this run)
                         "same_min": (auto["min_s"] / forced[auto["ran"]]["min_s"]
                                      if auto.get("ran") in forced else None)})
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """The text table of :func:`ratios`, with a summary line per collective."""
    lines = []
    for coll in dict.fromkeys(r["collective"] for r in rows):
        mine = [r for r in rows if r["collective"] == coll]
        lines.append(f"# {coll}  p = {mine[0]['p']}  (auto / fastest forced algorithm; median and minimum over the "
                     "rounds; us)")
        lines.append(f"{'size':>9} {'auto runs':<20} {'auto med':>9} {'fastest (median)':<20} {'med':>9} "
                     f"{'ratio':>6}   {'auto min':>9} {'fastest (min)':<20} {'min':>9} {'ratio':>6}")
        for r in mine:
            flag = "  <-- over 1.10" if min(r["ratio_median"], r["ratio_min"]) > FLAG else ""
            lines.append(f"{human(r['bytes']):>9} {r['auto']:<20} {r['auto_median_s'] * 1e6:9.2f} "
                         f"{r['fastest_median']:<20} {r['fastest_median_s'] * 1e6:9.2f} {r['ratio_median']:6.2f}   "
                         f"{r['auto_min_s'] * 1e6:9.2f} {r['fastest_min']:<20} {r['fastest_min_s'] * 1e6:9.2f} "
                         f"{r['ratio_min']:6.2f}{flag}")
        worst_med = max(r["ratio_median"] for r in mine)
        worst_min = max(r["ratio_min"] for r in mine)
        within = sum(1 for r in mine if min(r["ratio_median"], r["ratio_min"]) <= FLAG)
        lines.append(f"# {coll}: worst ratio {worst_med:.2f} (medians), {worst_min:.2f} (minima); "
                     f"within 10% (by either) at {within} of {len(mine)} sizes")
        same = sorted(r["same_min"] for r in mine if r.get("same_min") is not None)
        if same:
            lines.append(f"# noise: auto's minimum over the same algorithm's forced: median {same[len(same) // 2]:.2f},"
                         f" range {same[0]:.2f}-{same[-1]:.2f} (1.00 on a quiet machine)")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = Parser(prog="python -m mpicoll autocheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("collectives", nargs="*", default=list(COLLECTIVES),
                    help=f"default: all of {', '.join(COLLECTIVES)}")
    ap.add_argument("--sizes", default="8:16M", help="as the bench's (default 8:16M, every factor 4)")
    ap.add_argument("--iters", type=int, default=11, help="timed rounds per size (default 11)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", help="also write the sweep (the bench's JSON) and the ratios here")
    ap.add_argument("--from", dest="source", help="read a saved `mpicoll.bench --json` sweep instead of running")
    args = ap.parse_args(argv)
    if args.source:
        with open(args.source) as fh:
            results = json.load(fh)
        if isinstance(results, dict):   # this command's own --json
            results = results["results"]
        rows = ratios(results)
        print(report(rows))
        return rows
    from mpi4py import MPI  # noqa: PLC0415

    comm = Comm(MPI.COMM_WORLD)
    try:
        sizes = parse_sizes(args.sizes)
    except ValueError as exc:
        ap.error(str(exc))
    for name in args.collectives:
        if name not in COLLECTIVES:
            ap.error(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)}")
    results = []
    for name in args.collectives:
        algs = [AUTO, *registry.algorithms(name)]
        results += run_bench(comm, [name], sizes, algorithms=algs, iters=args.iters, warmup=args.warmup,
                                   progress=False)
    rows = ratios(results)
    if comm.rank == 0:
        print(f"# mpicoll.bench.autocheck {' '.join(sys.argv[1:] if argv is None else argv)}")
        print(report(rows))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"results": results, "ratios": rows}, fh, indent=1)
    return rows


if __name__ == "__main__":
    sys.exit(guarded(main))
