"""Ring versus hierarchical all-reduce across hosts: bytes on the network, measured and modelled time.

Run on 2 emulated hosts with 1 Gbit/s links (needs root or user namespaces)::

    export MPICOLL_CALIBRATION=/tmp/testbed-1gbit.json      # the test bed's constants, kept apart
    python -m mpicoll.launch --emulate-hosts 2 --link-rate 1gbit -n 4 -m mpicoll calibrate
    python -m mpicoll.launch --emulate-hosts 2 --link-rate 1gbit -n 4 -m mpicoll.examples.hierarchical_allreduce

or anywhere, pretending blocks of k ranks are nodes (on one host without
``MPICOLL_NODE_SIZE`` the example emulates nodes of 2 ranks itself, and says so)::

    MPICOLL_NODE_SIZE=2 python -m mpicoll.launch -n 4 -m mpicoll.examples.hierarchical_allreduce

A flat ring all-reduce sends 2 (p-1)/p n bytes from every rank to its right
neighbour; wherever that neighbour sits on another host, those bytes cross the
network, and on each host only the one rank at the ring's boundary uses the
link.  The hierarchical all-reduce first reduce-scatters inside each host
(shared memory), then every rank all-reduces its shard with the ranks that hold
the same shard on the other hosts, then all-gathers inside the host: each host
sends 2 (L-1)/L n bytes in all (L hosts), spread over all its ranks.

The example prints, per rank, the bytes it sends to other hosts under each
schedule (from the schedules themselves, for the node layout this run found),
the measured time of ring, hierarchical and MPI's built-in ``Allreduce`` (best
and median of ``--reps``), and, when the machine's constants were calibrated
across nodes (``calibrate`` run on the test bed, as above), what the
cost model predicts.  Every result is checked against the built-in.
Environment: ``MPICOLL_EXAMPLE_BYTES`` (default 16 MiB), ``MPICOLL_EXAMPLE_REPS``
(default 5).  On a shared machine the times are noisy: compare them only
between runs made under the same conditions.
"""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll import config
from mpicoll.analysis.cost import cost
from mpicoll.examples._common import check, say
from mpicoll.families import registry
from mpicoll.ir import nodes
from mpicoll.ir.layout import Layout
from mpicoll.selection import hierarchy

ALGORITHMS = ("ring", "hierarchical")


def inter_node_bytes(algorithm: str, rank: int, size: int, nbytes: int, layout: nodes.Nodes) -> int:
    """Bytes ``rank`` sends to ranks on other nodes in ``algorithm``'s schedule for ``nbytes`` bytes."""
    params = {"nodes": layout} if "nodes" in registry.get("allreduce", algorithm).params else {}
    sched = registry.schedule("allreduce", algorithm, rank, size, **params)
    where = nodes.node_of(size, layout)
    lay = Layout.even(nbytes, sched.nblocks)
    return sum(lay.count(x.block.lo, x.block.hi) for rnd in sched.rounds for x in rnd.sends
               if where[x.peer] != where[rank])


def timed(comm: mpicoll.Comm, x: np.ndarray, out: np.ndarray, algorithm: str, reps: int) -> list[float]:
    """Times of ``reps`` calls (after one warm-up), each the slowest rank's."""
    times = []
    for i in range(reps + 1):
        comm.Barrier()
        t0 = time.perf_counter()
        if algorithm == "builtin":
            MPI.COMM_WORLD.Allreduce(x, out)
        else:
            comm.Allreduce(x, out, algorithm=algorithm)
        t = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
        if i:
            times.append(t)
    return times


def wrapped_with_nodes(world: MPI.Intracomm) -> tuple[mpicoll.Comm, bool]:
    """``world`` wrapped; on one host, with nodes of 2 ranks emulated (``MPICOLL_NODE_SIZE=2``): (comm, emulated)."""
    comm = mpicoll.Comm(world)
    if comm.size < 2 or nodes.is_multi_node(comm.size, comm.node_layout):
        return comm, False
    os.environ["MPICOLL_NODE_SIZE"] = "2" if comm.size > 2 else "1"   # every rank sets the same
    config.reload()                          # communicators wrapped from now on see the variable
    try:
        return mpicoll.Comm(world.Dup()), True
    finally:
        del os.environ["MPICOLL_NODE_SIZE"]
        config.reload()


def main() -> None:
    world = MPI.COMM_WORLD
    comm, emulated = wrapped_with_nodes(world)
    p, rank = comm.size, comm.rank
    nbytes = int(os.environ.get("MPICOLL_EXAMPLE_BYTES", 16 << 20)) // 8 * 8
    reps = max(1, int(os.environ.get("MPICOLL_EXAMPLE_REPS", 5)))
    layout = comm.node_layout
    hosts = world.gather(MPI.Get_processor_name())
    groups = nodes.groups(p, layout)
    if emulated:
        say(world, f"All {p} ranks are on one host, where ring and hierarchical would send nothing between "
                   f"nodes; this run emulates nodes of {len(groups[0])} rank(s) (as MPICOLL_NODE_SIZE="
                   f"{len(groups[0])} would).",
            "The byte counts below are those of the emulated nodes; the times are all shared memory, so they",
            "cannot show what a network would cost (the docstring shows how to emulate slow links).")
    say(world, f"{p} ranks on {len(groups)} node(s): " + "; ".join(
        f"node {n} = ranks {list(g)} ({hosts[g[0]] if hosts else ''})" for n, g in enumerate(groups)),
        f"all-reduce of {nbytes / 2**20:.3g} MiB of float64, {reps} timed repetitions")

    sent = {a: world.allgather(inter_node_bytes(a, rank, p, nbytes, layout)) for a in ALGORITHMS}
    if rank == 0:
        print("\nbytes each rank sends to other nodes (from the schedules):")
        print("  rank " + "".join(f"{a:>16}" for a in ALGORITHMS))
        for r in range(p):
            print(f"  {r:4d} " + "".join(f"{sent[a][r]:16,d}" for a in ALGORITHMS))
        print("  all  " + "".join(f"{sum(sent[a]):16,d}" for a in ALGORITHMS))

    x = np.random.default_rng(rank).integers(-100, 100, nbytes // 8).astype(np.float64)
    expected = np.empty_like(x)
    world.Allreduce(x, expected)
    rows = []
    for algorithm in (*ALGORITHMS, "builtin"):
        out = np.empty_like(x)
        times = timed(comm, x, out, algorithm, reps)
        check(world, np.array_equal(out, expected), f"{algorithm} equals the built-in")
        rows.append((algorithm, min(times), float(np.median(times))))

    machine = hierarchy.machine(p, layout) if len(groups) > 1 else None
    if rank == 0:
        print("\nmeasured (seconds; each call timed on its slowest rank):")
        print(f"  {'algorithm':14s} {'best':>9s} {'median':>9s} {'model':>9s}")
        for algorithm, best, median in rows:
            model = "" if machine is None or algorithm == "builtin" else \
                f"{cost('allreduce', algorithm, p, nbytes, machine, nodes=layout).time:9.4f}"
            print(f"  {algorithm:14s} {best:9.4f} {median:9.4f} {model:>9s}")
        if machine is None:
            print("  (no model column: calibrate across nodes first, see this example's docstring)")
    check(world, sum(sent["hierarchical"]) <= sum(sent["ring"]) or len(groups) == 1 or
          any(len(g) != len(groups[0]) for g in groups), "hierarchical sends no more bytes between nodes than ring")


if __name__ == "__main__":
    main()
