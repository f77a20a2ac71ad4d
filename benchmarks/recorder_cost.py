"""What the flight recorder costs a small blocking call: the 8-byte Allreduce with and without it, side by side.

Run on two processes::

    python -m mpicoll.launch -n 2 benchmarks/recorder_cost.py [--calls 20000] [--rounds 9]

Two communicators of the same ranks run the same cached call (one float64, summed): one keeps its flight
record (:mod:`mpicoll.engine.recorder`, as every communicator does by default), the other keeps none (as with
``MPICOLL_TRACE_CALLS=0``).  The variants are interleaved, ``rounds`` times ``calls`` calls each, so that a
change of the machine's load hits both alike; the table gives the median and minimum time per call and the
median of the per-round ratios.  ``MPICOLL_NO_EXTENSIONS=1`` measures the Python definition of the hot path.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    ns = parser.parse_args()
    recorded, unrecorded = mpicoll.Comm(MPI.COMM_WORLD), mpicoll.Comm(MPI.COMM_WORLD)
    unrecorded._state.recorder = None
    x, y = np.ones(1), np.zeros(1)
    times: dict[str, list[float]] = {"recorded": [], "not recorded": []}
    for comm in (recorded, unrecorded):      # warm: the plans cached
        for _ in range(100):
            comm.Allreduce(x, y)
    for r in range(ns.rounds):
        order = [("recorded", recorded), ("not recorded", unrecorded)]
        for name, comm in order if r % 2 == 0 else order[::-1]:
            MPI.COMM_WORLD.Barrier()
            t0 = time.perf_counter()
            for _ in range(ns.calls):
                comm.Allreduce(x, y)
            times[name].append((time.perf_counter() - t0) / ns.calls)
    if MPI.COMM_WORLD.Get_rank() == 0:
        ratios = [a / b for a, b in zip(times["recorded"], times["not recorded"])]
        for name, ts in times.items():
            print(f"{name:>13}: median {statistics.median(ts) * 1e6:6.2f} us  min {min(ts) * 1e6:6.2f} us per call")
        print(f"recorded / not recorded: median of the rounds' ratios {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f} .. {max(ratios):.3f}), {ns.rounds} rounds of {ns.calls} calls")


if __name__ == "__main__":
    main()
