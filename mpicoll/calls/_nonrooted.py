"""Helpers shared by the non-rooted collectives (allgather, alltoall, reduce-scatter, scan, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..layout import Layout
from ..plan import Plan

__all__ = ["contiguous", "copy_result_to"]


def contiguous(counts: Sequence[int]) -> Layout:
    """Blocks of ``counts`` elements, one after the other from element 0."""
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else []
    return Layout.v(list(counts), [int(d) for d in displs])


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
