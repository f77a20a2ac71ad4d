"""Helpers shared by the non-rooted collectives (allgather, alltoall, reduce-scatter, scan, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..buffers import Buffer, VBuffer, as_count
from ..layout import Layout
from . import Plan

__all__ = ["check_pair", "contiguous", "check_disjoint", "copy_result_to",
           "scratch_layouts", "counts_of"]




def check_pair(send: Buffer | VBuffer, recv: Buffer | VBuffer) -> None:
    """sendbuf and recvbuf must hold the same element type in the same kind of memory."""
    if send.dtype != recv.dtype or send.unit != recv.unit:
        raise TypeError(f"recvbuf: dtype {recv.dtype} differs from sendbuf's {send.dtype}")
    if send.xp is not recv.xp:
        raise TypeError("sendbuf and recvbuf must both be host arrays or both device arrays")




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
