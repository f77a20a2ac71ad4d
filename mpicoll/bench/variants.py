"""What ``--style table`` times: its collectives, their warm buffers, and the variants of one call.

A *variant* is one way to run a call: the MPI library's built-in collective
(``builtin``), mpicoll's ``auto``, each registered algorithm by name, and the
persistent ``*_init`` form (``persistent``).  :func:`variants` lists those that
exist for a collective; :func:`make_call` turns one into a function of no
arguments on a :class:`Buffers`.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.comm.comm import Comm
from mpicoll.families import registry

__all__ = ["Collective", "COLLECTIVES", "Buffers", "variants", "make_call", "close", "has_module",
           "BUILTIN", "AUTO", "PERSISTENT"]

BUILTIN = "builtin"
AUTO = "auto"
PERSISTENT = "persistent"


@dataclass(frozen=True)
class Collective:
    """How to benchmark one collective.

    ``buffers(rank, p, nbytes, dtype)`` returns ``(args, out, expected_fill)``:
    the positional arguments of the call after the buffers are filled, the array
    that holds the result, and a function filling the send data (called before
    the correctness check).  ``factor(p)`` is nccl-tests' busbw factor; ``payload``
    says whether the benchmark size is the per-rank buffer (1) or the total
    vector of p blocks (p).
    """

    name: str
    method: str
    reduces: bool
    factor: Callable[[int], float]
    total_vector: bool   # the size is count x p (allgather, reduce-scatter, alltoall)
    root_only: bool = False  # only the root's result is defined (reduce)


def _ring_factor(p: int) -> float:
    return (p - 1) / p if p > 1 else 1.0


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("allreduce", "Allreduce", True, lambda p: 2 * (p - 1) / p if p > 1 else 1.0, False),
    Collective("bcast", "Bcast", False, lambda p: 1.0, False),
    Collective("reduce", "Reduce", True, lambda p: 1.0, False, root_only=True),
    Collective("allgather", "Allgather", False, _ring_factor, True),
    Collective("reduce_scatter_block", "Reduce_scatter_block", True, _ring_factor, True),
    Collective("alltoall", "Alltoall", False, _ring_factor, True),
)}


class Buffers:
    """The warm buffers of one (collective, size): send data, one output per variant."""

    def __init__(self, coll: Collective, rank: int, p: int, nbytes: int, dtype: np.dtype):
        itemsize = dtype.itemsize
        self.coll, self.rank, self.p = coll, rank, p
        count = max(1, nbytes // itemsize)
        if coll.total_vector:
            count = max(1, count // p)       # elements per block
        self.count = count
        if coll.name in ("allreduce", "reduce", "bcast"):
            send_n, recv_n = count, count
        elif coll.name == "allgather":
            send_n, recv_n = count, count * p
        elif coll.name == "reduce_scatter_block":
            send_n, recv_n = count * p, count
        else:  # alltoall
            send_n, recv_n = count * p, count * p
        self.nbytes = (recv_n if coll.name == "allgather" else send_n) * itemsize
        rng = np.random.default_rng(1234 + rank)
        if dtype.kind == "f":
            self.send = rng.integers(-8, 8, send_n).astype(dtype)   # exact sums in floats
        else:
            self.send = rng.integers(-8, 8, send_n).astype(dtype)
        self.recv_n, self.dtype = recv_n, dtype
        self.outs: dict[str, np.ndarray] = {}
        self.copy_src = np.ones(max(1, nbytes // itemsize), dtype)
        self.copy_dst = np.empty_like(self.copy_src)

    def out(self, variant: str) -> np.ndarray:
        if variant not in self.outs:
            self.outs[variant] = np.zeros(self.recv_n, self.dtype)
        return self.outs[variant]

    def args(self, variant: str) -> tuple:
        """Arguments of the call for ``variant`` (its own output buffer, the shared send data)."""
        out = self.out(variant)
        name = self.coll.name
        if name == "bcast":
            return (out, 0)
        if name == "reduce":
            return (self.send, out, MPI.SUM, 0)
        if self.coll.reduces:
            return (self.send, out, MPI.SUM)
        return (self.send, out)

    def reset_for_check(self, variant: str) -> None:
        """Put the input of a bcast (the root's data) into the variant's buffer."""
        out = self.out(variant)
        out[...] = 0
        if self.coll.name == "bcast" and self.rank == 0:
            out[...] = self.send[: self.recv_n]


def has_module(coll: Collective) -> bool:
    """Whether mpicoll has a module of its own for the collective (else mpicoll.Comm forwards it)."""
    return importlib.util.find_spec(f"mpicoll.calls.{coll.method.lower()}") is not None


def _nonblocking() -> Any:
    try:
        return importlib.import_module("mpicoll.engine.nonblocking")
    except ImportError:
        return None


def variants(coll: Collective, p: int, only: list[str] | None) -> tuple[list[str], list[str]]:
    """(variant names, notes): the built-in first, then auto, the algorithms, the persistent form."""
    notes: list[str] = []
    names = [BUILTIN]
    if not has_module(coll):
        notes.append(f"{coll.name}: mpicoll has no {coll.method} of its own on this branch; mpicoll.Comm forwards "
                     "it to the built-in, so 'auto' times that forwarding (no algorithms to compare)")
        return names + [AUTO], notes
    algs = registry.algorithms(coll.name) if coll.name in registry.collectives() else []
    wanted = [AUTO, *algs] if only is None else [a for a in only if a == AUTO or a in algs]
    if only is not None:
        unknown = [a for a in only if a not in (AUTO, BUILTIN, PERSISTENT, *algs)]
        if unknown:
            raise ValueError(f"--algorithms: {coll.name} has no algorithm(s) {', '.join(unknown)}; "
                             f"choose from {', '.join([AUTO, *algs])}")
    names += wanted
    if only is None or PERSISTENT in only:
        if _nonblocking() is not None and hasattr(Comm, coll.method + "_init"):
            names.append(PERSISTENT)
        elif only is not None:
            notes.append(f"{coll.name}: no persistent form (mpicoll.engine.nonblocking is missing)")
    return names, notes


def make_call(variant: str, coll: Collective, comm: Comm, bufs: Buffers) -> tuple[Callable[[], None], Any]:
    """A no-argument function running one call of ``variant``, and a request to free later."""
    args = bufs.args(variant)
    if variant == BUILTIN:
        fn = getattr(MPI.Intracomm, coll.method)
        return (lambda: fn(comm, *args)), None
    if variant == PERSISTENT:
        req = getattr(comm, coll.method + "_init")(*args)
        start, wait = req.Start, req.Wait

        def persistent() -> None:
            start()
            wait()
        return persistent, req
    method = getattr(comm, coll.method)
    return (lambda: method(*args, algorithm=variant)), None


def close(results: np.ndarray, expected: np.ndarray) -> bool:
    """Whether a variant's result is the built-in's (floats: to rounding, the order of a reduction differs)."""
    if results.dtype.kind in "fc":
        return bool(np.allclose(results, expected, rtol=1e-5, atol=1e-6))
    return bool(np.array_equal(results, expected))
