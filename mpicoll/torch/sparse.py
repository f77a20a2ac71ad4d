"""``all_reduce`` of a sparse COO tensor: the sum over the union of every rank's indices, coalesced (as Gloo).

Each rank coalesces its tensor, the ranks exchange their numbers of
non-zeros (one all-gather), then every rank's indices and values (two
all-gathers of varying sizes, as bytes), and each rank builds the sum: the
gathered entries as one sparse tensor, coalesced (entries at the same index are
added, in rank order), written into the caller's tensor.  Only SUM is defined
(as with Gloo); the tensor's sparse and dense shape and dtype must be the same
on every rank.  The call runs to completion in the caller (its second step's
sizes come from its first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from .reduceops import Reduction
from .tensors import bytes_of

__all__ = ["allreduce", "check"]


def check(t: torch.Tensor, red: Reduction) -> None:
    """Raise unless ``t`` can be summed as a sparse COO tensor.

    Raises
    ------
    ValueError
        ``t`` is not a CPU sparse COO tensor, or the reduction is not SUM.
    """
    if t.layout != torch.sparse_coo or t.device.type != "cpu":
        raise ValueError(f"mpicoll backend: all_reduce takes dense or sparse COO CPU tensors, got {t.layout} "
                         f"on {t.device}")
    if red.name != "SUM":
        raise ValueError(f"mpicoll backend: all_reduce of a sparse tensor supports ReduceOp.SUM only, "
                         f"got ReduceOp.{red.name}")


def _allgather_rows(comm: Any, rows: torch.Tensor, counts: list[int], algorithm: Callable[[str], str]) -> torch.Tensor:
    """Every rank's ``rows`` (``counts[r]`` rows of the same shape and dtype) in rank order, as one tensor."""
    width = rows.shape[1:]
    out = torch.empty((sum(counts), *width), dtype=rows.dtype)
    row_bytes = int(np.prod(width, dtype=np.int64)) * rows.element_size()
    sizes = [c * row_bytes for c in counts]
    displs = [int(x) for x in np.concatenate(([0], np.cumsum(sizes)[:-1]))]
    comm.Allgatherv(bytes_of(rows), [bytes_of(out), sizes, displs, MPI.BYTE], algorithm=algorithm("allgatherv"))
    return out


def allreduce(comm: Any, t: torch.Tensor, algorithm: Callable[[str], str]) -> None:
    """Replace ``t`` (sparse COO) with the sum of every rank's ``t`` over ``comm`` (an ``mpicoll.Comm``).

    ``algorithm(collective)`` is the algorithm to ask mpicoll for (the process group's choice).
    """
    mine = t.detach().coalesce()
    indices = mine.indices().t().contiguous()     # (nnz, sparse_dim) int64
    values = mine.values().contiguous()            # (nnz, *dense_shape)
    counts = np.empty(comm.Get_size(), dtype=np.int64)
    comm.Allgather(np.array([indices.shape[0]], dtype=np.int64), counts, algorithm=algorithm("allgather"))
    nnz = [int(c) for c in counts]
    all_indices = _allgather_rows(comm, indices, nnz, algorithm)
    all_values = _allgather_rows(comm, values, nnz, algorithm)
    total = torch.sparse_coo_tensor(all_indices.t(), all_values, t.shape, dtype=t.dtype).coalesce()
    with torch.no_grad():
        t.copy_(total)
