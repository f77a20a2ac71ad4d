"""Measure this machine's alpha, beta and gamma for the ``local`` cost preset.

Run under MPI with at least two processes (``mpirun -n 2 python -m mpicoll
calibrate``): ranks 0 and 1 measure (across nodes: rank 0 with a rank of another
node, and with one of its own node, see :func:`measure`)

* alpha: half the round-trip time of a 1-byte ping-pong (median of many);
* beta: the time per byte of a large (16 MiB) message one way, less alpha;
* duplex: whether a large exchange (both ways at once) overlaps the two
  directions (if not, the cost model adds the bytes a rank sends and
  receives; on shared memory the directions overlap while each process has
  a core to itself, and take turns when other work shares the cores);
* gamma: the time per byte of a NumPy float64 add of 16 MiB (rank 0 alone);
* copy: the time per byte of a NumPy copy of 16 MiB (rank 0 alone);
* the executor's own costs (:func:`executor_overheads`): per round, per
  message and per local step of :func:`mpicoll.engine.blocking.execute`,
  from rounds of 1-byte messages between ranks 0 and 1.

Rank 0 writes ``{"alpha": s, "beta": s/byte, "gamma": s/byte, ...}`` as JSON to
the calibration file (see :func:`mpicoll.analysis.presets.calibration_path`) and to
``-o FILE`` when given.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from mpicoll.analysis.presets import calibration_path

__all__ = ["measure", "calibrate", "executor_overheads"]


def _median(xs: list[float]) -> float:
    return float(np.median(xs))


def _round_trip(comm: Any, peer: int, out: np.ndarray, into: np.ndarray, reply: np.ndarray, tag: int) -> float:
    """Seconds for rank 0 to send ``out`` to ``peer`` (received into ``into``) and get ``reply`` back.

    Every rank calls it (after a barrier, so all start together); ranks other
    than 0 and ``peer`` only time the barrier.
    """
    comm.Barrier()
    t0 = time.perf_counter()
    if comm.rank == 0:
        comm.Send(out, peer, tag)
        comm.Recv(reply, peer, tag)
    elif comm.rank == peer:
        comm.Recv(into, 0, tag)
        comm.Send(reply, 0, tag)
    return time.perf_counter() - t0


def _pair(comm: Any, peer: int, reps: int, big: int) -> tuple[float, float, bool]:
    """(alpha, beta, duplex) between rank 0 and ``peer``.

    alpha: half a 1-byte ping-pong's round trip (the median of ``reps``).
    beta: a ``big``-byte message one way, answered by 1 byte, less two
    alphas, per byte.  duplex: whether a ``big``-byte ``Sendrecv`` exchange
    (both ways at once) takes less than 1.5 times one way, i.e. whether a
    rank's sends and receives overlap.  The large transfers keep the fastest of 5 runs:
    the least disturbed by other processes sharing the cores.
    """
    rank = comm.rank
    one = np.zeros(1, np.uint8)
    times = [_round_trip(comm, peer, one, one, one, 7) / 2 for _ in range(reps + 10)][10:]   # 10 warm-ups
    alpha = _median(times)
    send = np.ones(big, np.uint8)
    recv = np.empty(big, np.uint8)
    other = peer if rank == 0 else 0
    one_way, exchange = float("inf"), float("inf")
    for _ in range(5):
        one_way = min(one_way, _round_trip(comm, peer, send, recv, one, 8))
        comm.Barrier()
        t0 = time.perf_counter()
        if rank in (0, peer):
            comm.Sendrecv(send, other, 9, recv, other, 9)
        exchange = min(exchange, time.perf_counter() - t0)
    beta = max(one_way - 2 * alpha, 1e-15) / big
    return alpha, beta, exchange < 1.5 * (alpha + beta * big)


def _per_round(comm: Any, peer: int, bound: list, reps: int) -> float:
    """Seconds per round of ``bound`` run by :func:`~mpicoll.engine.blocking.execute` (ranks 0 and ``peer``).

    The fastest of ``reps`` runs (each after a barrier): the executor's cost,
    not the noise of other processes sharing the cores.
    """
    from mpicoll.engine.blocking import execute  # noqa: PLC0415

    best = float("inf")
    for _ in range(reps):
        comm.Barrier()
        t0 = time.perf_counter()
        if comm.rank in (0, peer):
            execute(bound, comm, 9)
        best = min(best, time.perf_counter() - t0)
    return comm.bcast(best, root=0) / len(bound)


def executor_overheads(comm: Any, peer: int, alpha: float, *, rounds: int = 100,
                       reps: int = 30) -> dict[str, float]:
    """The executor's per round, message and local step costs, from three kinds of rounds of 1-byte messages.

    With the cost model's round time ``k alpha + o_round + 2k o_message +
    s o_step`` for 1-byte messages (k messages each way, s local steps; see
    :mod:`mpicoll.analysis.cost`), rounds that exchange one message (a
    ``Sendrecv``: t1), four messages each way (nonblocking, then
    ``Waitall``: t4) and one message plus eight steps (four float64 sums,
    four copies, one element each: ts) give::

        o_message = (t4 - t1 - 3 alpha) / 6
        o_round   = t1 - alpha - 2 o_message
        o_step    = (ts - t1) / 8

    each clipped at 0 (a negative value means the alphas already cover that part).
    """
    from mpi4py import MPI  # noqa: PLC0415

    from mpicoll.data.ops import reducer  # noqa: PLC0415

    other = peer if comm.rank == 0 else 0
    out = [np.zeros(1, np.uint8) for _ in range(4)]
    into = [np.zeros(1, np.uint8) for _ in range(4)]
    one = [([(out[0], other)], [(into[0], other)], [])] * rounds
    four = [([(b, other) for b in out], [(b, other) for b in into], [])] * rounds
    x, y, z = np.ones(1), np.ones(1), np.zeros(1)
    add = reducer(MPI.SUM, np.dtype(np.float64)).reduce
    steps = [partial(add, z, x, y) for _ in range(4)] + [partial(np.copyto, z, x) for _ in range(4)]
    stepped = [([(out[0], other)], [(into[0], other)], steps)] * rounds
    t1 = _per_round(comm, peer, one, reps)
    t4 = _per_round(comm, peer, four, reps)
    ts = _per_round(comm, peer, stepped, reps)
    o_message = max(0.0, (t4 - t1 - 3 * alpha) / 6)
    return {"round_overhead": max(0.0, t1 - alpha - 2 * o_message), "message_overhead": o_message,
            "step_overhead": max(0.0, (ts - t1) / 8)}


def measure(comm: Any, *, reps: int = 200, big: int = 16 << 20) -> dict[str, float] | None:
    """The constants measured from rank 0 of ``comm`` (returned on every rank of ``comm``).

    On one node: alpha and beta between ranks 0 and 1.  Across nodes (see
    :attr:`mpicoll.Comm.node_layout`; e.g. on the emulated test bed of
    ``launch --emulate-hosts``): alpha and beta between rank 0 and the first
    rank of another node, ``alpha_intra`` and ``beta_intra`` between rank 0 and
    another rank of its node (when it has one), and ``link_per_node`` true:
    the cost model then lets a node's ranks share its network link.
    """
    if comm.size < 2:
        raise ValueError(f"calibrate: needs at least 2 MPI processes, got {comm.size} (mpirun -n 2 ...)")
    from mpicoll.ir.nodes import groups  # noqa: PLC0415

    layout = groups(comm.size, _node_layout(comm))
    values: dict[str, Any] = {}
    if len(layout) > 1:
        alpha, beta, duplex = _pair(comm, layout[1][0], reps, big)
        values.update(alpha=alpha, beta=beta, duplex=duplex, link_per_node=True, nodes=[len(g) for g in layout])
        if len(layout[0]) > 1:
            values["alpha_intra"], values["beta_intra"], _ = _pair(comm, layout[0][1], reps, big)
    else:
        values["alpha"], values["beta"], values["duplex"] = _pair(comm, 1, reps, big)
    near = layout[0][1] if len(layout[0]) > 1 else layout[1][0]   # the executor's costs: within a node if we can
    values.update(executor_overheads(comm, near, values.get("alpha_intra", values["alpha"])))
    a = np.ones(big // 8)
    b = np.ones(big // 8)
    times, copies = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        np.add(a, b, out=b)
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.copyto(a, b)
        copies.append(time.perf_counter() - t0)
    values["gamma"] = _median(times) / big
    values["copy"] = min(copies) / big
    return comm.bcast(values, root=0)


def calibrate(comm: Any = None, path: str | None = None) -> dict[str, Any]:
    """Measure, write the calibration file (and ``path``) on rank 0, and return the constants."""
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    values: dict[str, Any] = dict(measure(comm) or {})
    values.update(processes=comm.size, measured=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if comm.rank == 0:
        for target in {str(calibration_path()), *( [str(path)] if path else [])}:
            file = Path(target)
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(values, indent=2) + "\n")
    comm.Barrier()
    return values


def _node_layout(comm: Any) -> Any:
    """The node layout of ``comm``: an ``mpicoll.Comm``'s own, else that of ``comm`` wrapped (collective)."""
    from mpicoll.comm import Comm  # noqa: PLC0415

    return (comm if isinstance(comm, Comm) else Comm(comm)).node_layout
