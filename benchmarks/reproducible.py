"""What ``reproducible=True`` costs: mpicoll's Allreduce with and without it, side by side in one run.

Run on two processes (or more)::

    python -m mpicoll.launch -n 2 benchmarks/reproducible.py [--sizes 8,1K,64K,1M,64M] [--rounds 7]
        [--form blocking|nonblocking|persistent] [--json reproducible_p2.json]

For each dtype (float64, float32) and message size (bytes of the float buffer), three variants are timed
interleaved round by round on the same buffers, so that a change of the machine's load hits all of them alike:
mpicoll's ``Allreduce`` (``auto``), the same with ``reproducible=True``, and the MPI library's built-in.  A
round times a batch of back-to-back calls (about ``--target`` seconds, at least one); its time is the slowest
rank's.  The table gives each variant's median time per call (microseconds, OSU's unit; ``--stat min``: its
fastest round's), the ratio of the reproducible call to the ordinary one, and the ratio of the bytes the
reproducible call moves (the gathered rows, or the floats' blocks there and back) to the ordinary one's
(:func:`bytes_ratio`).  The reproducible call's local work (summing the table of its block, one row per
process) is timed alone too, in one process, as ``local(us)``.  ``--form nonblocking`` times ``Iallreduce`` and
``Wait`` instead, ``--form persistent`` ``Start`` and ``Wait`` of an ``Allreduce_init`` (each variant's own).
``--json FILE`` also writes the rows and the run's facts (:func:`mpicoll.tools.record.run_record`), which
``python -m mpicoll.bench.figures`` draws."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.comm import reproducible
from mpicoll.data import fixedpoint as fp
from mpicoll.data import fixedpoint_kernels as kernels

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def timed(world: MPI.Comm, call, batch: int) -> float:
    """Seconds per call of ``batch`` back-to-back calls, the slowest rank's."""
    world.Barrier()
    t0 = time.perf_counter()
    for _ in range(batch):
        call()
    return world.allreduce((time.perf_counter() - t0) / batch, op=MPI.MAX)


def local_work(x: np.ndarray, p: int) -> float:
    """Seconds of one process's sum of the table a reproducible ``Allreduce`` of ``x`` on ``p`` processes sums
    (``p`` rows: of all of ``x`` where the call gathers, of its ``1/p`` block where it scatters), with the
    compiled kernels where they are used (``mpicoll.data.fixedpoint_kernels``)."""
    fmt = fp.format_of(x.dtype)
    block = x if x.nbytes * p <= reproducible.GATHER_BYTES else x[:-(-x.shape[0] // p)]
    rows = np.stack([block] * p)
    out = np.empty_like(block)
    t0 = time.perf_counter()
    kernels.sum_rows_into(rows, out, fmt)
    return time.perf_counter() - t0


def bytes_ratio(nbytes: int, p: int) -> float:
    """The bytes a rank receives in the reproducible ``Allreduce`` (auto) over those of a reduce-scatter and
    all-gather of the ordinary sum, ``2 (p - 1) / p`` times the vector: the gathered path receives every other
    row and its flags; the scattered path (above ``GATHER_BYTES``) the vector's bytes twice, as the ordinary
    sum, and the flags' MAX (one byte per step of its all-reduce, counted as one)."""
    if p == 1 or nbytes == 0:
        return 1.0
    ordinary = 2 * (p - 1) / p * nbytes
    if nbytes * p <= reproducible.GATHER_BYTES:
        return (p - 1) * (nbytes + reproducible.FLAG_BYTES) / ordinary
    return (ordinary + 1) / ordinary


def forms(form: str, comm: mpicoll.Comm, world: MPI.Comm, x: np.ndarray, y: np.ndarray) -> tuple[dict, list]:
    """The three variants of one call of ``form`` (``blocking``: ``Allreduce``; ``nonblocking``: ``Iallreduce``
    and ``Wait``; ``persistent``: ``Start`` and ``Wait`` of an ``Allreduce_init`` made here), and the persistent
    requests to free after them."""
    if form == "blocking":
        return {"ordinary": lambda: comm.Allreduce(x, y, op=MPI.SUM, reproducible=False),
                "reproducible": lambda: comm.Allreduce(x, y, op=MPI.SUM, reproducible=True),
                "built-in": lambda: world.Allreduce(x, y, op=MPI.SUM)}, []
    if form == "nonblocking":
        return {"ordinary": lambda: comm.Iallreduce(x, y, op=MPI.SUM, reproducible=False).Wait(),
                "reproducible": lambda: comm.Iallreduce(x, y, op=MPI.SUM, reproducible=True).Wait(),
                "built-in": lambda: world.Iallreduce(x, y, op=MPI.SUM).Wait()}, []
    requests = [comm.Allreduce_init(x, y, op=MPI.SUM, reproducible=False),
                comm.Allreduce_init(x, y, op=MPI.SUM, reproducible=True), world.Allreduce_init(x, y, op=MPI.SUM)]

    def started(request: MPI.Prequest):
        return lambda: (request.Start(), request.Wait())

    return dict(zip(("ordinary", "reproducible", "built-in"), map(started, requests))), requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,1K,64K,1M,16M,64M", help="bytes, comma-separated (K, M: 2**10, 2**20)")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--target", type=float, default=0.02, help="seconds per batch")
    parser.add_argument("--form", choices=["blocking", "nonblocking", "persistent"], default="blocking",
                        help="Allreduce, Iallreduce + Wait, or Allreduce_init's Start + Wait (default: %(default)s)")
    parser.add_argument("--stat", choices=["median", "min"], default="median",
                        help="each variant's time over the rounds: the median, or the fastest round (on a "
                             "machine shared with other jobs, the rounds in which none of them ran)")
    parser.add_argument("--json", help="also write the rows and the run's facts to this file")
    ns = parser.parse_args()
    world = MPI.COMM_WORLD
    rows = []
    comm = mpicoll.Comm(world)
    if world.rank == 0:
        load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
        library = MPI.Get_library_version().splitlines()[0].rstrip("\x00 ")
        print(f"# mpicoll reproducible Allreduce ({ns.form}), {world.size} processes, MPI: {library}")
        print(f"# load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
              f"{ns.stat} of {ns.rounds} rounds")
        print(f"{'Size(B)':>10} {'dtype':>8} {'ordinary(us)':>13} {'reproducible(us)':>17} {'ratio':>6} "
              f"{'bytes ratio':>11} {'built-in(us)':>13} {'local(us)':>10}")
    for name in ns.dtypes.split(","):
        dtype = np.dtype(name)
        for nbytes in (size(s) for s in ns.sizes.split(",")):
            count = max(nbytes // dtype.itemsize, 1)
            rng = np.random.default_rng(world.rank)
            x = (rng.standard_normal(count) * np.exp2(rng.integers(-20, 20, count))).astype(dtype)
            y = np.empty_like(x)
            variants, requests = forms(ns.form, comm, world, x, y)
            batches = {}
            for label, call in variants.items():     # warm up, and size each variant's batch
                call()
                once = timed(world, call, 1)
                batches[label] = max(1, int(ns.target / max(once, 1e-7)))
            times: dict[str, list[float]] = {label: [] for label in variants}
            for _ in range(ns.rounds):
                for label, call in variants.items():
                    times[label].append(timed(world, call, batches[label]))
            local = min(local_work(x, world.size) for _ in range(3))
            stat = statistics.median if ns.stat == "median" else min
            med = {label: stat(t) * 1e6 for label, t in times.items()}
            moved = bytes_ratio(count * dtype.itemsize, world.size)
            if world.rank == 0:
                print(f"{count * dtype.itemsize:>10} {name:>8} {med['ordinary']:>13.1f} {med['reproducible']:>17.1f} "
                      f"{med['reproducible'] / med['ordinary']:>6.2f} {moved:>11.2f} {med['built-in']:>13.1f} "
                      f"{local * 1e6:>10.1f}", flush=True)
                rows.append({"bytes": count * dtype.itemsize, "dtype": name, "ordinary_us": med["ordinary"],
                             "reproducible_us": med["reproducible"], "builtin_us": med["built-in"],
                             "bytes_ratio": moved, "local_us": local * 1e6})
            for request in requests:
                request.Free()
    if world.rank == 0 and ns.json:
        from mpicoll.tools.record import run_record, write_json

        command = f"python -m mpicoll.launch -n {world.size} benchmarks/reproducible.py " + " ".join(sys.argv[1:])
        write_json(ns.json, {"kind": "reproducible", "run": run_record(world.size, command.strip()),
                             "form": ns.form, "stat": ns.stat, "rounds": ns.rounds, "rows": rows})


if __name__ == "__main__":
    main()
