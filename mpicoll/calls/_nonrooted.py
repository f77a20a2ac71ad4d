"""Helpers shared by the non-rooted collectives (allgather, alltoall, reduce-scatter, scan, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mpicoll.ir.layout import contiguous  # noqa: F401 (used by the call modules from here)
from mpicoll.runtime.plan import Plan

__all__ = ["contiguous", "copy_result_to"]


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
