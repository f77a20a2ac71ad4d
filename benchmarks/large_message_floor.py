"""The floor of large reductions written on mpi4py point-to-point calls, against mpicoll and the built-in.

Run on two processes::

    python -m mpicoll.launch -n 2 benchmarks/large_message_floor.py [--rounds 7]

Two questions, each answered side by side in one run (variants interleaved,
``rounds`` times; medians of the slowest rank):

* **Reduce, 1 MiB of float64 to rank 0.** The bare way is one receive of the
  whole vector and one ``np.add``.  Cutting it in segments, blocking or with the
  next segment's receive posted before the current segment's add, shows whether
  a transfer can overlap a reduction here.  (With Open MPI's shared-memory
  single-copy transfers the receiver does the copy itself, inside MPI, so a
  posted receive does not progress while the receiver adds.)
* **Allreduce, 64 MiB of float64.** The bare way at p = 2 is Rabenseifner's:
  exchange halves, add, exchange the sums.  Segmenting the exchange and the add,
  so that each segment is added while it is in cache, shows what that gains.
  busbw is given against ``np.copyto`` of the whole vector (memory-copy
  bandwidth).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import mpicoll

world = MPI.COMM_WORLD
rank, peer = world.rank, 1 - world.rank


def reduce_variants(count: int) -> dict[str, Callable[[], None]]:
    send = np.random.default_rng(rank).random(count)
    recv, incoming = np.empty(count), np.empty(count)
    comm = mpicoll.Comm(world)

    def bare() -> None:
        if rank == 0:
            world.Recv(incoming, 1, 1)
            np.add(send, incoming, out=recv)
        else:
            world.Send(send, 0, 1)

    def segmented(pieces: int, overlap: bool) -> Callable[[], None]:
        step = count // pieces
        starts = range(0, count, step)

        def run() -> None:
            if rank != 0:
                MPI.Request.Waitall([world.Isend(send[i:i + step], 0, 1) for i in starts])
                return
            request = world.Irecv(incoming[:step], 1, 1) if overlap else None
            for i in starts:
                if overlap:     # the next segment's receive is posted before this segment's add
                    request.Wait()
                    if i + step < count:
                        request = world.Irecv(incoming[i + step:i + 2 * step], 1, 1)
                else:
                    world.Recv(incoming[i:i + step], 1, 1)
                np.add(send[i:i + step], incoming[i:i + step], out=recv[i:i + step])

        return run

    variants = {"built-in": lambda: world.Reduce(send, recv, MPI.SUM, 0),
                "mpicoll auto": lambda: comm.Reduce(send, recv, MPI.SUM, 0),
                "mpicoll rabenseifner": lambda: comm.Reduce(send, recv, MPI.SUM, 0, algorithm="rabenseifner"),
                "bare receive + add": bare}
    for pieces in (4, 16):
        variants[f"bare {pieces} segments"] = segmented(pieces, overlap=False)
        variants[f"bare {pieces} segments, overlapped"] = segmented(pieces, overlap=True)
    return variants


def allreduce_variants(count: int) -> dict[str, Callable[[], None]]:
    send = np.random.default_rng(rank).random(count)
    recv, incoming = np.empty(count), np.empty(count // 2)
    half = count // 2
    mine, other = (0, half) if rank == 0 else (half, 0)
    comm = mpicoll.Comm(world)

    def exchange_halves(segment: int) -> None:
        for i in range(0, half, segment):
            world.Sendrecv(send[other + i:other + i + segment], peer, 1, incoming[i:i + segment], peer, 1)
            np.add(send[mine + i:mine + i + segment], incoming[i:i + segment], out=recv[mine + i:mine + i + segment])
        for i in range(0, half, segment):
            world.Sendrecv(recv[mine + i:mine + i + segment], peer, 2, recv[other + i:other + i + segment], peer, 2)

    variants = {"memcpy (np.copyto)": lambda: np.copyto(recv, send),
                "built-in": lambda: world.Allreduce(send, recv),
                "mpicoll auto": lambda: comm.Allreduce(send, recv),
                "bare halves + add": lambda: exchange_halves(half)}
    for segment_bytes in (4 << 20, 1 << 20, 256 << 10):
        segment = segment_bytes // 8
        variants[f"bare, {segment_bytes >> 10} KiB segments"] = lambda segment=segment: exchange_halves(segment)
    return variants


def timed(variants: dict[str, Callable[[], None]], rounds: int, calls: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            run()
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                run()
            world.Barrier()
            times[name].append(world.allreduce((time.perf_counter() - t0) / calls, op=MPI.MAX))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    ns = parser.parse_args()
    if world.size != 2:
        raise SystemExit("run on 2 processes: python -m mpicoll.launch -n 2 benchmarks/large_message_floor.py")
    reduce_times = timed(reduce_variants((1 << 20) // 8), ns.rounds, 20)
    allreduce_times = timed(allreduce_variants((64 << 20) // 8), ns.rounds, 2)
    if rank:
        return
    print(f"# p = 2, {ns.rounds} rounds, interleaved; median over rounds of the slowest rank")
    print("# Reduce 1 MiB float64 to rank 0            median us   ratio")
    base = statistics.median(reduce_times["built-in"])
    for name, values in reduce_times.items():
        print(f"  {name:40s} {statistics.median(values) * 1e6:9.1f}  {statistics.median(values) / base:6.2f}")
    print("# Allreduce 64 MiB float64                  median ms   ratio   busbw GB/s  of memcpy")
    base = statistics.median(allreduce_times["built-in"])
    copy = statistics.median(allreduce_times["memcpy (np.copyto)"])
    for name, values in allreduce_times.items():
        median = statistics.median(values)
        print(f"  {name:40s} {median * 1e3:9.2f}  {median / base:6.2f}  {(64 << 20) / median / 1e9:10.2f}  "
              f"{copy / median:8.0%}")


if __name__ == "__main__":
    main()
