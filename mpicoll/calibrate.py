"""Measure this machine's alpha, beta and gamma for the ``local`` cost preset.

Run under MPI with at least two processes (``mpirun -n 2 python -m mpicoll
calibrate``): ranks 0 and 1 measure

* alpha: half the round-trip time of a 1-byte ping-pong (median of many);
* beta: the time per byte of a large (16 MiB) Sendrecv exchange, less alpha;
* gamma: the time per byte of a NumPy float64 add of 16 MiB (rank 0 alone).

Rank 0 writes ``{"alpha": s, "beta": s/byte, "gamma": s/byte, ...}`` as JSON to
the calibration file (see :func:`mpicoll.presets.calibration_path`) and to
``-o FILE`` when given.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from .presets import calibration_path

__all__ = ["measure", "calibrate"]


def _median(xs: list[float]) -> float:
    return float(np.median(xs))


def measure(comm: Any, *, reps: int = 200, big: int = 16 << 20) -> dict[str, float] | None:
    """The constants measured between ranks 0 and 1 of ``comm`` (on every rank of ``comm``)."""
    if comm.size < 2:
        raise ValueError(f"calibrate: needs at least 2 MPI processes, got {comm.size} (mpirun -n 2 ...)")
    rank = comm.rank
    one = np.zeros(1, np.uint8)
    times: list[float] = []
    for i in range(reps + 10):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank == 0:
            comm.Send(one, 1, 7)
            comm.Recv(one, 1, 7)
        elif rank == 1:
            comm.Recv(one, 0, 7)
            comm.Send(one, 0, 7)
        if i >= 10:
            times.append((time.perf_counter() - t0) / 2)
    alpha = _median(times)
    send = np.ones(big, np.uint8)
    recv = np.empty(big, np.uint8)
    times = []
    for _ in range(5):
        comm.Barrier()
        t0 = time.perf_counter()
        if rank in (0, 1):
            comm.Sendrecv(send, 1 - rank, 8, recv, 1 - rank, 8)
        times.append(time.perf_counter() - t0)
    beta = max(_median(times) - alpha, 1e-15) / big
    a = np.ones(big // 8)
    b = np.ones(big // 8)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.add(a, b, out=b)
        times.append(time.perf_counter() - t0)
    gamma = _median(times) / big
    values = {"alpha": alpha, "beta": beta, "gamma": gamma}
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
