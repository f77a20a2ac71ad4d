"""What each buffer kind costs a small collective: NumPy, bytes-like, MPI.memory, torch via ``.numpy()`` and
torch via DLPack, on mpicoll and on the built-in.

Run on two processes::

    python -m mpicoll.launch -n 2 benchmarks/buffer_kinds.py [--calls 5000] [--rounds 7]

Each variant is a two-rank ``Allreduce`` of one float64 (8 bytes), timed as ``calls`` back-to-back calls;
the variants are interleaved and each timed ``rounds`` times, so that the machine's load hits all alike.
The table gives the median over the rounds in microseconds per call, and its ratio to mpicoll on a NumPy
array.  The torch rows are left out where torch is not installed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def variants(comm: mpicoll.Comm, builtin: MPI.Intracomm) -> dict:
    x, y = np.ones(1), np.empty(1)
    send, recv = bytearray(x.tobytes()), bytearray(8)
    memory = [MPI.memory.fromaddress(x.ctypes.data, 8), MPI.DOUBLE], [MPI.memory.fromaddress(y.ctypes.data, 8),
                                                                       MPI.DOUBLE]
    table = {
        "mpicoll numpy": lambda: comm.Allreduce(x, y, op=MPI.SUM),
        "mpicoll bytearray + DOUBLE": lambda: comm.Allreduce([send, MPI.DOUBLE], [recv, MPI.DOUBLE], op=MPI.SUM),
        "mpicoll MPI.memory + DOUBLE": lambda: comm.Allreduce(*memory, op=MPI.SUM),
        "built-in numpy": lambda: builtin.Allreduce(x, y, op=MPI.SUM),
    }
    try:
        import torch
    except ImportError:
        return table
    tx, ty = torch.ones(1, dtype=torch.float64), torch.empty(1, dtype=torch.float64)
    table["mpicoll torch .numpy()"] = lambda: comm.Allreduce(tx.numpy(), ty.numpy(), op=MPI.SUM)
    table["mpicoll torch DLPack"] = lambda: comm.Allreduce(tx, ty, op=MPI.SUM)
    table["built-in torch DLPack"] = lambda: builtin.Allreduce(tx, ty, op=MPI.SUM)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    ns = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("run on 2 processes: python -m mpicoll.launch -n 2 benchmarks/buffer_kinds.py")
    comm, builtin = mpicoll.Comm(world), world.Dup()
    table = variants(comm, builtin)
    times: dict[str, list[float]] = {name: [] for name in table}
    for call in table.values():     # warm up: plans cached, pages touched
        for _ in range(200):
            call()
    for _ in range(ns.rounds):
        for name, call in table.items():
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(ns.calls):
                call()
            times[name].append((time.perf_counter() - t0) / ns.calls * 1e6)
    if world.rank == 0:
        base = statistics.median(times["mpicoll numpy"])
        print(f"{'variant':32s} {'median us':>10s} {'min us':>8s} {'/ mpicoll numpy':>16s}")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:32s} {med:10.2f} {min(ts):8.2f} {med / base:16.2f}")
    builtin.Free()


if __name__ == "__main__":
    main()
