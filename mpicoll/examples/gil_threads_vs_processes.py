"""The GIL: threads versus processes for Python work, measured; why one process per device.

Run:  mpirun -n 4 python -m mpicoll.examples.gil_threads_vs_processes   (any N >= 1)

CPython runs Python bytecode in one thread at a time (the global interpreter
lock, GIL).  N threads running pure-Python code therefore take about as long
as running the same work N times in one thread, however many cores there are;
N processes each have their own interpreter and lock and can use N cores.
NumPy releases the GIL inside its large operations, so threads doing large
NumPy work do run in parallel.  This is why PyTorch's DistributedDataParallel
and MPI programs run one *process* per GPU or core, while the older
single-process ``DataParallel`` drives several GPUs from threads of one process
and is held back by the GIL.

The example measures, with the same unit of work W (a pure-Python loop):

1. one thread doing W once (the unit time);
2. N threads in one process (rank 0), each doing W: with the GIL, about N units;
3. N processes (the MPI ranks), each doing W at the same time: about one unit
   when there are N free cores, more when processes outnumber cores;
4. the same with a NumPy reduction that releases the GIL, in N threads.

Besides wall times it prints how many cores each run kept busy (the process's
CPU time over the wall time).  The check: the pure-Python threads kept at most
1.2 cores busy, however many there are, because the GIL lets one run at a time
(a busy machine only lowers the figure).  The process figure depends on the
cores this run has, and the example says so.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

LOOP = 300_000           # iterations of the pure-Python unit of work
ARRAY = 4_000_000        # elements of the NumPy unit of work


def python_work() -> int:
    total = 0
    for i in range(LOOP):
        total += i % 7
    return total


def numpy_work(a: np.ndarray) -> float:
    return float(np.sqrt(a).sum())     # large NumPy calls release the GIL


def in_threads(n: int, work, *args) -> tuple[float, float]:
    """(wall seconds, cores kept busy = this process's CPU seconds / wall seconds) for ``n`` threads each
    doing ``work(*args)`` once, started together."""
    threads = [threading.Thread(target=work, args=args) for _ in range(n)]
    t0, c0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return wall, (time.process_time() - c0) / wall


def idle_until_rank0_is_done(comm: mpicoll.Comm) -> None:
    """Wait without using a core (MPI waits spin): the other ranks must not compete with rank 0's threads."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.005)


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    n, cores = comm.size, os.cpu_count() or 1
    a = np.random.default_rng(0).random(ARRAY)
    python_work()                                              # warm up
    unit = threads = busy_python = busy_numpy = 0.0
    if comm.rank == 0:
        unit = min(in_threads(1, python_work)[0] for _ in range(3))
        threads, busy_python = min(in_threads(n, python_work) for _ in range(2))
        np_unit = min(in_threads(1, numpy_work, a)[0] for _ in range(3))
        np_threads, busy_numpy = min(in_threads(n, numpy_work, a) for _ in range(2))
        say(comm, f"{n} workers, {cores} cores on this machine; unit of work: a pure-Python loop of {LOOP:,} steps",
            f"1. one thread, once:                          {unit * 1e3:7.1f} ms  (1 unit)",
            f"2. {n} threads of one process, pure Python:    {threads * 1e3:7.1f} ms  ({threads / unit:.2f} units; "
            f"cores kept busy: {busy_python:.2f})")
    idle_until_rank0_is_done(comm)
    comm.Barrier()
    t0 = time.perf_counter()
    python_work()                                              # every process at once
    mine = time.perf_counter() - t0
    slowest = comm.allreduce(mine, op=MPI.MAX)
    unit = comm.bcast(unit if comm.rank == 0 else None, root=0)
    np_line = ""
    if comm.rank == 0:
        np_line = (f"4. {n} threads, NumPy sqrt+sum of {ARRAY:,}: {np_threads / np_unit:.2f} times one thread's "
                   f"time; cores kept busy: {busy_numpy:.2f} (NumPy releases the GIL)")
    say(comm, f"3. {n} processes, pure Python, at once:        {slowest * 1e3:7.1f} ms  ({slowest / unit:.2f} units; "
              "the slowest process)", np_line)
    if n > cores:
        say(comm, f"   {n} processes share {cores} cores, so they need about {n / cores:.1f} units: more processes "
                  "than cores cannot all run at once either.")
    threads = comm.bcast(threads if comm.rank == 0 else None, root=0)
    say(comm, f"Speed-up over one thread doing the {n} units: threads {n * unit / threads:.2f}, processes "
              f"{n * unit / slowest:.2f} (at most {min(n, cores)} with {cores} cores; other jobs on the machine "
              "lower both).",
        "The threads never kept more than one core busy (the GIL); processes can use every core: hence one",
        "process per core or GPU in MPI programs and in PyTorch's DDP.")
    busy_python = comm.bcast(busy_python, root=0)
    check(comm, busy_python <= 1.2, "pure-Python threads kept at most 1.2 cores busy (CPU time / wall time): "
          "the GIL runs one at a time")


if __name__ == "__main__":
    main()
