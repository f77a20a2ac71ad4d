"""Which algorithm runs: the ``algorithm=`` argument, ``MPICOLL_ALGO``, or "auto".

``MPICOLL_ALGO`` works like ``NCCL_ALGO``: ``allreduce=ring,bcast=binomial``
forces those choices wherever the call says ``algorithm="auto"``.  An explicit
``algorithm=`` argument wins over the environment.

The "auto" rule of each collective lives next to its call, in
``mpicoll.calls.<collective>``, registered with :func:`auto_rule`; each documents
its table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import registry

__all__ = ["choose", "auto_rule", "forced_by_environment", "segments_for"]

KiB = 1024
MiB = 1024 * KiB
SEGMENT_BYTES = 256 * KiB  # pipeline segment size for pipelined algorithms
MAX_SEGMENTS = 64


def forced_by_environment(collective: str) -> str | None:
    """The algorithm ``MPICOLL_ALGO`` names for ``collective``, if any."""
    text = os.environ.get("MPICOLL_ALGO", "").strip()
    if not text:
        return None
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise ValueError(f"MPICOLL_ALGO: expected collective=algorithm, got {item.strip()!r}")
        key, value = (x.strip().lower() for x in item.split("=", 1))
        if key == collective:
            return value
    return None


def segments_for(nbytes: int, pieces: int = 1) -> int:
    """Pipeline segments so that each of ``pieces`` parts moves in segments of about 256 KiB."""
    per_piece = -(-nbytes // max(1, pieces))
    return max(1, min(MAX_SEGMENTS, -(-per_piece // SEGMENT_BYTES)))


AutoRule = Callable[..., str]
_AUTO: dict[str, AutoRule] = {}


def auto_rule(collective: str) -> Callable[[AutoRule], AutoRule]:
    """Decorator: ``rule(size=, nbytes=, count=, commutative=)`` names the algorithm "auto" runs."""

    def deco(rule: AutoRule) -> AutoRule:
        _AUTO[collective] = rule
        return rule

    return deco


def _auto(collective: str) -> AutoRule:
    if collective not in _AUTO:
        import importlib

        importlib.import_module(f"{__package__}.calls.{collective}")  # registers its rule
    return _AUTO[collective]


def choose(collective: str, requested: str | None, *, size: int, nbytes: int, count: int,
           commutative: bool = True) -> tuple[str, dict[str, Any]]:
    """(algorithm name, build parameters) for one call; raises ValueError for a bad choice."""
    if requested is None:
        requested = "auto"
    if not isinstance(requested, str):
        raise TypeError(f"algorithm must be a string, got {type(requested).__name__}")
    name = requested.lower()
    source = "algorithm"
    if name == "auto":
        forced = forced_by_environment(collective)
        if forced and forced != "auto":
            name, source = forced, "MPICOLL_ALGO"
        else:
            name = _auto(collective)(size=size, nbytes=nbytes, count=count, commutative=commutative)
    try:
        alg = registry.get(collective, name)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    if not commutative and not alg.keeps_order(size):
        keeping = [n for n in registry.algorithms(collective) if registry.get(collective, n).keeps_order(size)]
        raise ValueError(f"{source}: {collective} algorithm {name!r} does not keep rank order at {size} ranks "
                         f"and the op is not commutative; use one of {', '.join(keeping)}")
    params: dict[str, Any] = {}
    if "segments" in alg.params:
        params["segments"] = segments_for(nbytes, pieces=2 if name == "double_binary_tree" else 1)
    return name, params
