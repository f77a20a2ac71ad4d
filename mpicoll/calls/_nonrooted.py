"""Helpers shared by the non-rooted collectives (allgather, alltoall, reduce-scatter, scan, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpicoll.ir.layout import contiguous  # noqa: F401 (used by the call modules from here)
from mpicoll.program.plan import OUT, Plan

__all__ = ["contiguous", "copy_result_to"]


def copy_result_to(plan: Plan, result: Any, target: Any, spans: Sequence[tuple[int, int]]) -> None:
    """Finish an in-place call that was computed into the scratch ``result``: copy ``spans`` to ``target``.

    The algorithm then never overwrites input it still has to send; the copy
    runs once all messages are done, and only the ``spans`` (the receive
    blocks) of ``target`` are written.
    """
    staged, arrays = plan.finish, plan.arrays
    arrays[OUT] = target   # named, so that a cached plan views it by address (Plan.detach), keeping no user object

    def finish() -> None:
        if staged is not None:
            staged()  # a GPU result first comes back into ``result`` on the device
        out = arrays[OUT]
        for start, stop in spans:
            out[start:stop] = result[start:stop]

    plan.finish, plan.finish_by_name = finish, staged is None
