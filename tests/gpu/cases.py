"""Collective calls on device arrays checked against the same calls on NumPy arrays.

Shared by the GPU tests (CuPy, ``tests/gpu``) and the host stand-in tests
(``tests/mpi/test_gpu_standin.py``): ``make`` turns a NumPy array into a
device array, ``host`` turns one back.  The oracle is mpicoll's own host path
(itself tested against MPI's built-ins), run on the same data and algorithm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.families import registry

# method, registry name, takes an op, in place possible, outputs undefined on these ranks
COLLECTIVES = [
    ("Allreduce", "allreduce"), ("Reduce", "reduce"), ("Bcast", "bcast"), ("Allgather", "allgather"),
    ("Alltoall", "alltoall"), ("Reduce_scatter_block", "reduce_scatter_block"), ("Gather", "gather"),
    ("Scatter", "scatter"), ("Scan", "scan"), ("Exscan", "exscan"),
]
IN_PLACE = {"Allreduce", "Allgather", "Alltoall", "Reduce_scatter_block", "Scan"}


def cases() -> list[tuple[str, str]]:
    """(method, algorithm) for every collective above and every algorithm it has, plus auto."""
    return [(method, algo) for method, name in COLLECTIVES for algo in ["auto", *registry.algorithms(name)]]


def data(rank: int, count: int, dtype: Any, salt: int = 0) -> np.ndarray:
    """Small exact values (sums of a few ranks stay exact even in float16)."""
    dtype = np.dtype(dtype)
    values = (np.arange(count) * 7 + rank * 3 + salt) % 11 + 1
    return values.astype(dtype)


def run(comm: Any, method: str, algorithm: str, count: int, dtype: Any, make: Callable, host: Callable,
        in_place: bool = False, salt: int = 0, op: Any = MPI.SUM) -> list[np.ndarray]:
    """Run one call with arrays from ``make``; the outputs as NumPy arrays (only the defined ones)."""
    r, p = comm.rank, comm.size
    n = count
    kw = {"algorithm": algorithm}
    if method == "Bcast":
        buf = make(data(r, n, dtype, salt) if r == 0 else np.zeros(n, dtype))
        comm.Bcast(buf, 0, **kw)
        return [host(buf)]
    if method in ("Allgather", "Gather"):
        recv = make(np.zeros(n * p, dtype))
        if in_place:
            full = np.zeros(n * p, dtype)
            full[r * n:(r + 1) * n] = data(r, n, dtype, salt)
            recv = make(full)
            comm.Allgather(MPI.IN_PLACE, recv, **kw)
        else:
            args = (make(data(r, n, dtype, salt)), recv) + ((0,) if method == "Gather" else ())
            getattr(comm, method)(*args, **kw)
        return [host(recv)] if method == "Allgather" or r == 0 else []
    if method == "Scatter":
        send = make(np.concatenate([data(q, n, dtype, salt) for q in range(p)]) if r == 0 else np.zeros(n * p, dtype))
        recv = make(np.zeros(n, dtype))
        comm.Scatter(send, recv, 0, **kw)
        return [host(recv)]
    if method == "Alltoall":
        mine = np.concatenate([data(r * p + q, n, dtype, salt) for q in range(p)])
        if in_place:
            recv = make(mine)
            comm.Alltoall(MPI.IN_PLACE, recv, **kw)
        else:
            recv = make(np.zeros(n * p, dtype))
            comm.Alltoall(make(mine), recv, **kw)
        return [host(recv)]
    if method == "Reduce_scatter_block":
        mine = data(r, n * p, dtype, salt)
        if in_place:
            recv = make(mine)
            comm.Reduce_scatter_block(MPI.IN_PLACE, recv, op, **kw)
            return [host(recv)[:n]]
        recv = make(np.zeros(n, dtype))
        comm.Reduce_scatter_block(make(mine), recv, op, **kw)
        return [host(recv)]
    # Allreduce, Reduce, Scan, Exscan
    recv = make(np.zeros(n, dtype))
    if in_place:
        recv = make(data(r, n, dtype, salt))
        getattr(comm, method)(MPI.IN_PLACE, recv, op, **kw)
    else:
        args = (make(data(r, n, dtype, salt)), recv, op) + ((0,) if method == "Reduce" else ())
        getattr(comm, method)(*args, **kw)
    if (method == "Reduce" and r != 0) or (method == "Exscan" and r == 0):
        return []
    return [host(recv)]


def mismatches(comm: Any, method: str, algorithm: str, count: int, dtype: Any, make: Callable, host: Callable,
               in_place: bool = False, salt: int = 0) -> list[str]:
    """What differs between the device call and the same call on NumPy arrays (empty: nothing)."""
    got = run(comm, method, algorithm, count, dtype, make, host, in_place, salt)
    want = run(comm, method, algorithm, count, dtype, np.array, np.asarray, in_place, salt)
    bad = []
    for g, w in zip(got, want):
        if g.shape != w.shape or not np.array_equal(g, w):
            bad.append(f"{method} {algorithm} count={count} {np.dtype(dtype)} in_place={in_place}: {g[:8]} != {w[:8]}")
    return bad
