"""The simulator: run all ranks of one collective in one process on NumPy data.

No MPI is involved; messages are copies between the ranks' arrays, matched
round by round (:mod:`.lockstep`).  Use it to watch an algorithm compute real
numbers, or to test an algorithm at p = 1024 on one core.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from .. import registry
from ..layout import Layout
from ..ops import reducer
from ..schedule import Block, Copy, Reduce, ScheduleError
from .lockstep import run_lockstep

__all__ = ["simulate", "ArrayDomain"]


class ArrayDomain:
    """Each rank's buffers as NumPy arrays; blocks resolved through one layout per buffer."""

    def __init__(self, arrays: list[dict[str, np.ndarray]], layouts: dict[str, Layout], op: Any,
                 alias: dict[str, str]):
        self.arrays = arrays
        self.layouts = layouts
        self.alias = alias
        dtype = next(iter(arrays[0].values())).dtype
        self.kernel = reducer(op, dtype).reduce

    def view(self, rank: int, block: Block) -> np.ndarray:
        name = self.alias.get(block.buf, block.buf)
        start, stop = self.layouts.get(block.buf, self.layouts["recv"]).span(block.lo, block.hi)
        return self.arrays[rank][name][start:stop]

    def read(self, rank: int, block: Block) -> np.ndarray:
        return self.view(rank, block).copy()

    def write(self, rank: int, block: Block, payload: np.ndarray) -> None:
        dst = self.view(rank, block)
        if dst.shape != payload.shape:
            raise ScheduleError(f"rank {rank} receives {payload.size} elements into {block} of {dst.size}")
        dst[...] = payload

    def reduce(self, rank: int, step: Reduce) -> None:
        self.kernel(self.view(rank, step.out), self.view(rank, step.left), self.view(rank, step.right))

    def copy(self, rank: int, step: Copy) -> None:
        self.view(rank, step.out)[...] = self.read(rank, step.src)


def simulate(collective: str, algorithm: str, inputs: Sequence[np.ndarray], op: Any = MPI.SUM, *,
             in_place: bool = False, **params: int) -> list[np.ndarray]:
    """Run ``algorithm`` on one array per rank; return each rank's result.

    Examples
    --------
    >>> import numpy as np
    >>> from mpicoll.exec.simulate import simulate
    >>> out = simulate("allreduce", "ring", [np.arange(5.0) * (r + 1) for r in range(3)])
    >>> out[2]
    array([ 0.,  6., 12., 18., 24.])
    """
    if collective != "allreduce":
        raise NotImplementedError(f"the simulator does not know {collective!r} yet")
    size = len(inputs)
    scheds = registry.schedules(collective, algorithm, size, **params).schedules
    count = len(inputs[0])
    layout = Layout.even(count, scheds[0].nblocks)
    arrays = []
    for r, data in enumerate(inputs):
        data = np.asarray(data)
        bufs = {"recv": np.full_like(data, _poison(data.dtype))}
        if in_place:
            bufs["recv"][...] = data
        else:
            bufs["send"] = data.copy()
        for name in scheds[r].scratch():
            bufs[name] = np.full_like(data, _poison(data.dtype))
        arrays.append(bufs)
    alias = {"send": "recv"} if in_place else {}
    domain = ArrayDomain(arrays, {"recv": layout}, op, alias)
    run_lockstep(scheds, domain, alias)
    return [bufs["recv"] for bufs in arrays]


def _poison(dtype: np.dtype) -> Any:
    """A value that stands out in results that were never written."""
    if dtype.kind == "f":
        return np.nan
    if dtype.names:
        return np.zeros((), dtype)
    return 0 if dtype.kind in "bV" else -7
