"""The lowercase object collectives of small Python objects: mpicoll.Comm against mpi4py's own, side by side.

Run on two processes (any p works; the target is stated at p = 2)::

    python -m mpicoll.launch -n 2 benchmarks/objects.py [--calls 2000] [--rounds 7]
                                                        [--collectives allgather,bcast] [--objects int,dict]

Each variant is one collective (``allgather``, ``allreduce``, ``bcast``, ``gather``, ``scatter``,
``alltoall``) of one kind of object: an int, a 3-tuple shape, a short dict, and a 64 KiB ``bytes`` object (so
that the cost of a large object shows), called on ``MPI.COMM_WORLD`` (mpi4py's pickle-based call) or on
``mpicoll.Comm(MPI.COMM_WORLD)``.  The variants are interleaved: each round times every variant as ``calls``
back-to-back calls, so that a change of the machine's load hits all of them alike.  The table gives, per
variant, the median over the rounds of the slowest rank's time per call, the minimum, and the ratio of
mpicoll's median to mpi4py's.  ``allreduce`` sums the int, concatenates the tuples and the bytes (``MPI.SUM``
is ``a + b`` on objects) and merges the dicts with a Python callable.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from mpi4py import MPI

import mpicoll

COLLECTIVES = ("allgather", "allreduce", "bcast", "gather", "scatter", "alltoall")


def merged(a: dict, b: dict) -> dict:
    """The dicts' union (``b`` wins): an op that is only a Python callable."""
    return {**a, **b}


def objects() -> dict[str, object]:
    """The objects moved, by name."""
    return {"int": 42, "shape": (64, 128, 3), "dict": {"step": 7, "loss": 0.25, "name": "run-3"},
            "bytes 64K": bytes(65536)}


def calls(comm: MPI.Intracomm, collective: str, obj: object) -> Callable[[], object]:
    """One call of ``collective`` on ``comm`` moving ``obj`` (a sequence of p of them where one is wanted)."""
    size = comm.Get_size()
    many = [obj] * size
    op = merged if isinstance(obj, dict) else MPI.SUM
    return {
        "allgather": lambda: comm.allgather(obj),
        "allreduce": lambda: comm.allreduce(obj, op=op),
        "bcast": lambda: comm.bcast(obj, root=0),
        "gather": lambda: comm.gather(obj, root=0),
        "scatter": lambda: comm.scatter(many, root=0),
        "alltoall": lambda: comm.alltoall(many),
    }[collective]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--collectives", default=",".join(COLLECTIVES), help="comma-separated")
    parser.add_argument("--objects", default=",".join(objects()), help="comma-separated names of objects")
    ns = parser.parse_args()
    world = MPI.COMM_WORLD
    comm = mpicoll.Comm(world)
    variants: dict[tuple[str, str, str], Callable[[], object]] = {}
    for collective in ns.collectives.split(","):
        for name, obj in objects().items():
            if name not in ns.objects.split(","):
                continue
            variants[collective, name, "mpi4py"] = calls(world, collective, obj)
            variants[collective, name, "mpicoll"] = calls(comm, collective, obj)
    times: dict[tuple, list[float]] = {key: [] for key in variants}
    for _ in range(ns.rounds):
        for key, call in variants.items():
            count = ns.calls if not key[1].startswith("bytes") else max(ns.calls // 10, 10)
            for _ in range(max(count // 10, 1)):
                call()
            world.Barrier()
            start = time.perf_counter()
            for _ in range(count):
                call()
            elapsed = time.perf_counter() - start
            times[key].append(world.allreduce(elapsed, op=MPI.MAX) / count * 1e6)
    if world.rank == 0:
        print(f"# object collectives, p = {world.size}, {ns.calls} calls (64 KiB: a tenth) x {ns.rounds} rounds, "
              "interleaved; us per call (slowest rank); ratio = mpicoll median / mpi4py median")
        print(f"# {'collective':<10} {'object':<10} {'mpi4py':>8} {'min':>8} {'mpicoll':>8} {'min':>8} {'ratio':>6}")
        for collective in ns.collectives.split(","):
            for name in ns.objects.split(","):
                theirs, ours = times[collective, name, "mpi4py"], times[collective, name, "mpicoll"]
                print(f"  {collective:<10} {name:<10} {statistics.median(theirs):8.2f} {min(theirs):8.2f} "
                      f"{statistics.median(ours):8.2f} {min(ours):8.2f} "
                      f"{statistics.median(ours) / statistics.median(theirs):6.2f}")


if __name__ == "__main__":
    main()
