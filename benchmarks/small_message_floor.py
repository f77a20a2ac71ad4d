"""The floor of a small-message collective written in Python, against mpicoll and the built-in.

Run on two processes::

    python -m mpicoll.launch -n 2 benchmarks/small_message_floor.py [--calls 20000] [--rounds 7]

Each variant is a two-rank all-reduce of one float64 (blocking, persistent or
nonblocking; or a barrier; or a broadcast of one byte, from a NumPy array or as mpi4py's OSU demo passes it,
``[mmap, 1, MPI.BYTE]``), timed as ``calls`` back-to-back calls; the variants are interleaved, and
each is timed ``rounds`` times, so that a change of the machine's load hits all
of them alike.  The table gives the median over the rounds, the minimum, and the
median's ratio to the built-in of the same collective; the Bcasts are also given as
the root alone times them (mpi4py's OSU demos print the root's time: a root that only
sends returns before its message is received).

The request variants are waited on with their own ``Wait`` and, for the
nonblocking call, with mpi4py's ``MPI.Request.Waitall`` (what a program that mixes
mpicoll's requests with its own does); the last lines compare mpicoll's requests
with its own blocking call.

The "bare" variants are the least a Python implementation must do: one mpi4py
``Sendrecv`` (or ``Send``/``Recv``) on ready-made buffers and one ``np.add``,
with no argument checks, no cache lookup and a fixed tag; "bare persistent" is
MPI persistent requests (``Startall``/``Waitall``) plus the add.  mpicoll's
blocking call cannot be cheaper than "bare", nor its ``Allreduce_init``
requests cheaper than "bare persistent".
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import time

import numpy as np
from mpi4py import MPI

import mpicoll


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    ns = parser.parse_args()
    world = MPI.COMM_WORLD
    if world.size != 2:
        raise SystemExit("run on 2 processes: python -m mpicoll.launch -n 2 benchmarks/small_message_floor.py")
    peer = 1 - world.rank
    comm = mpicoll.Comm(world)
    private = world.Dup()
    x, y, incoming = np.ones(1), np.empty(1), np.empty(1)
    send_bytes, incoming_bytes = x.view(np.uint8), incoming.view(np.uint8)
    byte = np.zeros(1, np.uint8)
    region = mmap.mmap(-1, 1 << 20)   # what mpi4py's OSU demos pass: [mmap, size, MPI.BYTE]
    persistent_pair = [private.Recv_init(incoming_bytes, peer, 7), private.Send_init(send_bytes, peer, 7)]
    request = comm.Allreduce_init(x, y)
    builtin_request = world.Allreduce_init(x, y)

    def bare() -> None:
        private.Sendrecv(send_bytes, peer, 5, incoming_bytes, peer, 5)
        np.add(x, incoming, y)

    def bare_persistent() -> None:
        MPI.Prequest.Startall(persistent_pair)
        MPI.Request.Waitall(persistent_pair)
        np.add(x, incoming, y)

    def bare_bcast() -> None:
        if world.rank == 0:
            private.Send(byte, 1, 6)
        else:
            private.Recv(byte, 0, 6)

    def mpicoll_persistent() -> None:
        request.Start()
        request.Wait()

    def builtin_persistent() -> None:
        builtin_request.Start()
        builtin_request.Wait()

    def waited_by_mpi(icomm: MPI.Comm) -> None:
        MPI.Request.Waitall([icomm.Iallreduce(x, y)])

    variants = {   # name: (call, the built-in it is compared with)
        "Allreduce 8 B built-in": (lambda: world.Allreduce(x, y), None),
        "Allreduce 8 B bare Sendrecv + add": (bare, "Allreduce 8 B built-in"),
        "Allreduce 8 B mpicoll": (lambda: comm.Allreduce(x, y), "Allreduce 8 B built-in"),
        "Allreduce 8 B bare persistent + add": (bare_persistent, "Allreduce 8 B built-in"),
        "Allreduce_init 8 B Start/Wait built-in": (builtin_persistent, None),
        "Allreduce_init 8 B Start/Wait mpicoll": (mpicoll_persistent, "Allreduce_init 8 B Start/Wait built-in"),
        "Iallreduce 8 B + Wait built-in": (lambda: world.Iallreduce(x, y).Wait(), None),
        "Iallreduce 8 B + Wait mpicoll": (lambda: comm.Iallreduce(x, y).Wait(), "Iallreduce 8 B + Wait built-in"),
        "Iallreduce 8 B + MPI Waitall built-in": (lambda: waited_by_mpi(world), None),
        "Iallreduce 8 B + MPI Waitall mpicoll": (lambda: waited_by_mpi(comm), "Iallreduce 8 B + MPI Waitall built-in"),
        "Barrier built-in": (world.Barrier, None),
        "Barrier mpicoll": (comm.Barrier, "Barrier built-in"),
        "Bcast 1 B built-in": (lambda: world.Bcast(byte, 0), None),
        "Bcast 1 B bare Send/Recv": (bare_bcast, "Bcast 1 B built-in"),
        "Bcast 1 B mpicoll": (lambda: comm.Bcast(byte, 0), "Bcast 1 B built-in"),
        "Bcast [mmap, 1, BYTE] built-in": (lambda: world.Bcast([region, 1, MPI.BYTE], 0), None),
        "Bcast [mmap, 1, BYTE] mpicoll": (lambda: comm.Bcast([region, 1, MPI.BYTE], 0),
                                          "Bcast [mmap, 1, BYTE] built-in"),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    root_times: dict[str, list[float]] = {name: [] for name in variants}   # rank 0's own, the Bcasts' root
    for _ in range(ns.rounds):
        for name, (call, _) in variants.items():
            for _ in range(ns.calls // 10):
                call()
            world.Barrier()
            start = time.perf_counter()
            for _ in range(ns.calls):
                call()
            elapsed = time.perf_counter() - start
            times[name].append(world.allreduce(elapsed, op=MPI.MAX) / ns.calls * 1e6)
            root_times[name].append(elapsed / ns.calls * 1e6)
    request.Free()
    builtin_request.Free()
    if world.rank == 0:
        print(f"# p = 2, {ns.calls} calls x {ns.rounds} rounds, interleaved; us per call (slowest rank)")
        print(f"# {'variant':<40} {'median':>8} {'min':>8} {'ratio':>7}")
        for name, (_, reference) in variants.items():
            median = statistics.median(times[name])
            ratio = f"{median / statistics.median(times[reference]):7.2f}" if reference else f"{1:7.2f}"
            print(f"  {name:<40} {median:8.2f} {min(times[name]):8.2f} {ratio}")
        mine = statistics.median(times["Allreduce 8 B mpicoll"])
        print("# mpicoll's requests against its own blocking Allreduce (median / median):")
        for name in ("Allreduce_init 8 B Start/Wait mpicoll", "Iallreduce 8 B + Wait mpicoll"):
            print(f"  {name:<40} {statistics.median(times[name]) / mine:8.2f}")
        own, by_mpi = (statistics.median(times[n]) for n in ("Iallreduce 8 B + Wait mpicoll",
                                                             "Iallreduce 8 B + MPI Waitall mpicoll"))
        print(f"  {'Iallreduce waited by MPI / by its Wait':<40} {by_mpi / own:8.2f}")
        print("# the Bcasts timed by the root alone (what mpi4py's OSU demo reports): median, ratio")
        for name, (_, reference) in variants.items():
            if name.startswith("Bcast"):
                median = statistics.median(root_times[name])
                ratio = median / statistics.median(root_times[reference]) if reference else 1.0
                print(f"  {name:<40} {median:8.2f} {ratio:8.2f}")


if __name__ == "__main__":
    main()
