"""Helpers shared by the non-rooted collectives (allgather, alltoall, reduce-scatter, scan, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..buffers import Buffer, VBuffer, _split_spec, as_count, parse
from ..layout import Layout
from . import Plan

__all__ = ["parse_blocks", "check_pair", "only", "contiguous", "check_disjoint", "copy_result_to",
           "scratch_layouts", "counts_of"]


def parse_blocks(spec: Any, what: str, blocks: int, *, writable: bool = False) -> Buffer:
    """A buffer of ``blocks`` equal blocks (Allgather's recvbuf, Alltoall's buffers), as mpi4py reads it.

    An explicit count in ``[buf, count, datatype]`` is the count of one block
    (the displacement is where block 0 starts); without one, the buffer is
    split into ``blocks`` equal blocks and must divide evenly.
    """
    obj, count, displ, datatype = _split_spec(spec, what)
    if count is not None:
        per = as_count(count, f"{what}: count")
        items: list = [obj, per * blocks, 0 if displ is None else displ]
        return parse(items + ([datatype] if datatype is not None else []), what, writable=writable)
    buf = parse(spec, what, writable=writable)
    units = buf.count // buf.unit
    if blocks and units % blocks:
        raise ValueError(f"{what}: cannot split {units} elements into {blocks} equal blocks (one per rank)")
    return buf


def check_pair(send: Buffer | VBuffer, recv: Buffer | VBuffer) -> None:
    """sendbuf and recvbuf must hold the same element type in the same kind of memory."""
    if send.dtype != recv.dtype or send.unit != recv.unit:
        raise TypeError(f"recvbuf: dtype {recv.dtype} differs from sendbuf's {send.dtype}")
    if send.xp is not recv.xp:
        raise TypeError("sendbuf and recvbuf must both be host arrays or both device arrays")


def only(block: int, count: int, nblocks: int) -> Layout:
    """A layout in which only ``block`` has elements: ``count`` of them from element 0."""
    ends = [0] * nblocks
    ends[block] = count
    return Layout([0] * nblocks, ends)


def contiguous(counts: Sequence[int]) -> Layout:
    """Blocks of ``counts`` elements, one after the other from element 0."""
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else []
    return Layout.v(list(counts), [int(d) for d in displs])


def check_disjoint(buf: VBuffer, what: str) -> None:
    """Receive blocks must not overlap (MPI: erroneous; the result would depend on the algorithm)."""
    spans = sorted((d, d + c, i) for i, (c, d) in enumerate(zip(buf.counts, buf.displs)) if c)
    for (_, end, i), (start, _, j) in zip(spans, spans[1:]):
        if start < end:
            raise ValueError(f"{what}: blocks {i} and {j} overlap; every rank's block needs its own elements")


def scratch_layouts(layout: Layout) -> dict[str, Layout]:
    """The layout of every scratch buffer an algorithm may use."""
    return {name: layout for name in ("tmp", "tmp2", "tmp3")}


def copy_result_to(plan: Plan, result: Any, target: Any, spans: Sequence[tuple[int, int]]) -> None:
    """Finish an in-place call that was computed into the scratch ``result``: copy ``spans`` to ``target``.

    The algorithm then never overwrites input it still has to send; the copy
    runs once all messages are done, and only the ``spans`` (the receive
    blocks) of ``target`` are written.
    """
    staged = plan.finish

    def finish() -> None:
        if staged is not None:
            staged()  # a GPU result first comes back into ``result`` on the device
        for start, stop in spans:
            target[start:stop] = result[start:stop]

    plan.finish = finish


def counts_of(recvcounts: Any, size: int, what: str = "recvcounts") -> list[int]:
    """A sequence of ``size`` non-negative integer counts."""
    if recvcounts is None or np.ndim(recvcounts) != 1:
        raise TypeError(f"{what} must be a sequence of {size} integers (one per rank), got {recvcounts!r}")
    counts = [as_count(c, f"{what}[{i}]") for i, c in enumerate(recvcounts)]
    if len(counts) != size:
        raise ValueError(f"{what}: expected {size} counts (one per rank), got {len(counts)}")
    return counts
