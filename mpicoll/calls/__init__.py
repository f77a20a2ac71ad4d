"""One module per collective: its contract, its argument checks and its binding.

Each module ``mpicoll.calls.<collective>`` defines

- ``SPEC``: what the collective computes, on symbolic blocks (used by the
  checker) and on arrays (used by the simulator), see :class:`Spec`;
- ``prepare(comm, ...)``: validates a call's arguments (before any message),
  chooses the algorithm and returns a :class:`~mpicoll.plan.Plan` (or None when
  there is nothing to do), which the blocking, nonblocking and persistent paths
  run (``mpicoll.plan`` holds the plan and its cache).

A symbolic value is ``(block, runs)``: the data of block index ``block`` reduced
over the ranks in ``runs``, a tuple of half-open ranges ``(lo, hi)`` in the order
they were combined.  Rank r's own input of block b is ``(b, ((r, r + 1),))``; a
complete all-reduce result is ``(b, ((0, p),))``.  Data-movement collectives use
the same form with a single contributing rank.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..debug import MismatchError, debug_check
from ..layout import Layout

__all__ = ["Spec", "spec", "MismatchError", "debug_check", "own"]

Value = tuple[int, tuple[tuple[int, int], ...]]


def own(rank: int, block: int) -> Value:
    """Rank ``rank``'s own input of block ``block``."""
    return (block, ((rank, rank + 1),))


@dataclass(frozen=True)
class Spec:
    """The contract of one collective.

    ``inputs(rank, size, nblocks, **params)`` and ``outputs(...)`` give, per
    buffer name, the symbolic values before and (expected) after the call;
    ``None`` entries in outputs are not checked.  ``simulate(inputs, nblocks,
    **params)`` gives per rank ``(arrays, layouts, result_names)`` for the
    simulator, from one input array per rank.
    """

    name: str
    reduces: bool
    in_place: bool
    inputs: Callable[..., dict[str, list]]
    outputs: Callable[..., dict[str, list]]
    simulate: Callable[..., list[tuple[dict[str, Any], dict[str, Layout], str]]] | None = None
    params: tuple[str, ...] = field(default=())


def spec(collective: str) -> Spec:
    """The :class:`Spec` of ``collective``."""
    try:
        module = importlib.import_module(f"{__name__}.{collective}")
    except ModuleNotFoundError:
        raise ValueError(f"unknown collective {collective!r}") from None
    return module.SPEC


