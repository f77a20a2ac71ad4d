"""The simulator: run all ranks of one collective in one process on NumPy data.

No MPI is involved; messages are copies between the ranks' arrays, matched
round by round (:mod:`.lockstep`).  Use it to watch an algorithm compute real
numbers, or to test an algorithm at p = 1024 on one core.  It needs no mpi4py
for MPI's predefined ops named as strings (``op="SUM"``, the default); an
``MPI.Op`` or :class:`mpicoll.Op` works too where mpi4py is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mpicoll.analysis.lockstep import run_lockstep
from mpicoll.data.kernels import predefined
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Block, Copy, Reduce, ScheduleError

__all__ = ["simulate", "ArrayDomain"]


class ArrayDomain:
    """Each rank's buffers as NumPy arrays; blocks resolved through each rank's layouts."""

    def __init__(self, arrays: list[dict[str, np.ndarray]], layouts: list[dict[str, Layout]], op: Any,
                 alias: dict[str, str]):
        self.arrays = arrays
        self.layouts = layouts
        self.alias = alias
        dtype = next(iter(arrays[0].values())).dtype
        self.kernel = _kernel(op, dtype)

    def view(self, rank: int, block: Block) -> np.ndarray:
        name = self.alias.get(block.buf, block.buf)
        start, stop = self.layouts[rank][block.buf].span(block.lo, block.hi)
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


def _kernel(op: Any, dtype: np.dtype) -> Any:
    """``reduce(out, left, right)`` of ``op``: a predefined op's name needs no MPI, any other op goes to data.ops."""
    if isinstance(op, str):
        return predefined(op.upper(), dtype).reduce
    from mpicoll.data.ops import reducer  # noqa: PLC0415 - MPI.Op and mpicoll.Op need mpi4py

    return reducer(op, dtype, abort=False).reduce   # one process: a raising user op raises here


def simulate(collective: str, algorithm: str, inputs: Sequence[np.ndarray], op: Any = "SUM", *,
             in_place: bool = False, **params: int) -> list[np.ndarray]:
    """Run ``algorithm`` on one array per rank; return each rank's result.

    ``op`` is the name of an MPI predefined op (``"SUM"``, ``"MAX"``, ...), an
    ``MPI.Op`` or a :class:`mpicoll.Op`.

    Examples
    --------
    >>> import numpy as np
    >>> from mpicoll.analysis.simulate import simulate
    >>> out = simulate("allreduce", "ring", [np.arange(5.0) * (r + 1) for r in range(3)])
    >>> out[2]
    array([ 0.,  6., 12., 18., 24.])
    """
    spec = get_spec(collective)
    size = len(inputs)
    scheds = registry.schedules(collective, algorithm, size, **params).schedules
    inputs = [np.asarray(x) for x in inputs]
    contract = {k: v for k, v in params.items() if k in spec.params}  # e.g. root, not segments
    setups = spec.simulate(inputs, scheds[0].nblocks, in_place=in_place, **contract)
    arrays, full = [], []
    for sched, (bufs, layouts, _) in zip(scheds, setups):
        bufs = dict(bufs)
        like = bufs["recv"]
        if not in_place and "send" in bufs:  # results must come from the algorithm, not from what was there
            like[...] = _poison(like.dtype)
        full.append(sched.layouts(layouts))  # scratch layouts as the algorithm declares them
        for name in sched.scratch():        # as many elements as the layout spans, poisoned
            bufs[name] = np.full(max(full[-1][name].ends, default=0), _poison(like.dtype), like.dtype)
        arrays.append(bufs)
    alias = {"send": "recv"} if in_place else {}
    domain = ArrayDomain(arrays, full, op, alias)
    run_lockstep(scheds, domain, alias)
    return [bufs[result] for bufs, (_, _, result) in zip(arrays, setups)]


def _poison(dtype: np.dtype) -> Any:
    """A value that stands out in results that were never written."""
    if dtype.kind == "f":
        return np.nan
    if dtype.names:
        return np.zeros((), dtype)
    return 0 if dtype.kind in "bV" else -7
