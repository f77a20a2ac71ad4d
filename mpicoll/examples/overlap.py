"""Overlap gradient averaging with computation, as data-parallel training does it.

Run:  mpirun -n 4 python -m mpicoll.examples.overlap      (any N >= 1)
  or: python -m mpicoll.launch -n 4 -m mpicoll.examples.overlap [--buckets 8 --size 262144 --work 6]

The "backward pass" produces the gradient bucket by bucket (here: a few
elementwise passes over a work array per bucket).  The serial version computes
a bucket, then averages it over the ranks with a blocking ``Allreduce``, then
computes the next.  The overlapped version starts an ``Iallreduce`` on each
bucket as soon as it is computed and goes on with the next bucket; while
computing, mpicoll's progress thread moves their rounds along (see
``docs/nonblocking.md``); it also calls ``mpicoll.Request.Testall`` on the
requests in flight every few passes, which is where they advance when the thread
is off (``MPICOLL_PROGRESS=0``).  Both versions must give bitwise the same
averaged gradient; the time of each and their ratio are printed (the median of
several repetitions).  How much a nonblocking collective can hide, and what a
machine with as many ranks as cores can show of it, is measured by
``python -m mpicoll.bench overlap`` (``mpicoll.bench.overlap``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.engine import progress


def compute_bucket(k: int, work: np.ndarray, out: np.ndarray, passes: int, poke: list) -> None:
    """Fill ``out`` with bucket ``k`` of this rank's gradient, poking the requests in ``poke`` between passes."""
    work.fill(0.001 * k)
    for _ in range(passes):
        np.sin(work, out=work)
        np.multiply(work, 1.0001, out=work)
        if poke:
            mpicoll.Request.Testall(poke)
    np.copyto(out, work)


def serial(comm: mpicoll.Comm, grads: list[np.ndarray], work: np.ndarray, passes: int, algorithm: str) -> None:
    for k, g in enumerate(grads):
        compute_bucket(k + comm.rank, work, g, passes, [])
        comm.Allreduce(MPI.IN_PLACE, g, algorithm=algorithm)
        g /= comm.size


def overlapped(comm: mpicoll.Comm, grads: list[np.ndarray], work: np.ndarray, passes: int, algorithm: str) -> None:
    pending: list = []
    for k, g in enumerate(grads):
        compute_bucket(k + comm.rank, work, g, passes, pending)
        pending.append(comm.Iallreduce(MPI.IN_PLACE, g, algorithm=algorithm))
        pending = [r for r in pending if not r.Test()]
    mpicoll.Request.Waitall(pending)
    for g in grads:
        g /= comm.size


def main() -> None:
    parser = argparse.ArgumentParser(description="serial vs overlapped bucketed gradient averaging")
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--size", type=int, default=1 << 18, help="doubles per bucket (default 262144 = 2 MiB)")
    parser.add_argument("--work", type=int, default=6, help="compute passes per bucket")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--algorithm", default="auto")
    ns = parser.parse_args()
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    work = np.empty(ns.size)
    results = {}
    times: dict[str, list[float]] = {"serial": [], "overlapped": []}
    for _ in range(ns.repeat):
        for name, fn in (("serial", serial), ("overlapped", overlapped)):
            grads = [np.empty(ns.size) for _ in range(ns.buckets)]
            comm.Barrier()
            t0 = time.perf_counter()
            fn(comm, grads, work, ns.work, ns.algorithm)
            elapsed = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            times[name].append(elapsed)
            results[name] = grads
    same = all(np.array_equal(a, b) for a, b in zip(results["serial"], results["overlapped"]))
    same = comm.allreduce(same, op=MPI.LAND)
    if comm.rank == 0:
        ts, to = np.median(times["serial"]), np.median(times["overlapped"])
        mib = ns.size * 8 / 2**20
        thread = "on" if progress.running() else "off"
        print(f"{comm.size} ranks, {ns.buckets} buckets of {mib:.1f} MiB, {ns.work} compute passes per bucket, "
              f"algorithm={ns.algorithm}, median of {ns.repeat}, progress thread {thread}")
        print(f"  {'serial (compute, then Allreduce)':40s} {ts * 1e3:9.2f} ms")
        print(f"  {'overlapped (Iallreduce while computing)':40s} {to * 1e3:9.2f} ms")
        print(f"  overlapped / serial = {to / ts:.3f}   (results bitwise identical: {same})")
    if not same:
        raise SystemExit("the overlapped version gave a different gradient")


if __name__ == "__main__":
    main()
