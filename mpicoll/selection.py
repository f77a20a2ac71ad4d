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
from .segments import MAX_SEGMENTS, SEGMENT_BYTES, segments_for  # noqa: F401 (part of this module's API)

__all__ = ["choose", "auto_rule", "forced_by_environment", "segments_for", "tuned_choice", "tuning_path",
           "reload_tuning"]

KiB = 1024
MiB = 1024 * KiB


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


def tuning_path() -> str:
    """The tuning file: ``$MPICOLL_TUNING``, else ``~/.config/mpicoll/tuning.json``."""
    return os.environ.get("MPICOLL_TUNING") or os.path.join(os.path.expanduser("~"), ".config", "mpicoll",
                                                             "tuning.json")


_TUNING: dict[str, Any] | None = None
_GENERATION = 0


def reload_tuning() -> None:
    """Forget the loaded tuning file (the next call reads it again; cached plans are chosen anew)."""
    global _TUNING, _GENERATION
    _TUNING = None
    _GENERATION += 1


def tuning_generation() -> int:
    """Counts :func:`reload_tuning` calls (part of the plan cache's key)."""
    return _GENERATION


def _tuning() -> dict[str, Any]:
    global _TUNING
    if _TUNING is None:
        import json  # noqa: PLC0415

        try:
            with open(tuning_path()) as fh:
                _TUNING = json.load(fh)
        except FileNotFoundError:
            _TUNING = {}
        except (OSError, ValueError) as exc:
            import warnings  # noqa: PLC0415

            warnings.warn(f"mpicoll: ignoring the tuning file {tuning_path()}: {exc}", stacklevel=2)
            _TUNING = {}
    return _TUNING


def tuned_choice(collective: str, size: int, nbytes: int, commutative: bool = True) -> str | None:
    """The algorithm ``python -m mpicoll.bench --tune`` measured fastest here, or None.

    The tuning file maps ``collective -> str(p) -> [[upper_bytes or null, algorithm], ...]``
    (bands in increasing size; a band covers sizes below its upper bound).  A
    tuned algorithm that is unknown, or that does not keep rank order when the
    op is not commutative, is ignored.
    """
    bands = _tuning().get(collective, {}).get(str(size))
    if not bands:
        return None
    name = next((alg for upper, alg in bands if upper is None or nbytes < upper), None)
    if name is None:
        return None
    try:
        alg = registry.get(collective, name)
    except ValueError:
        return None
    if not commutative and not alg.keeps_order(size):
        return None
    return name


def _env_nodes() -> Any:
    from .nodes import env_node_size  # noqa: PLC0415

    return env_node_size()


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
           commutative: bool = True, nodes: Callable[[], Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(algorithm name, build parameters) for one call; raises ValueError for a bad choice.

    ``nodes()`` gives the communicator's node layout (:func:`mpicoll.nodes.of_comm`; collective on
    its first call, so it is called on every rank alike): "auto" weighs the hierarchical algorithm
    against the flat choice when there are several nodes, and algorithms that take ``nodes`` get it.
    """
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
            tuned = tuned_choice(collective, size, nbytes, commutative) if count >= size else None
            name = tuned or _auto(collective)(size=size, nbytes=nbytes, count=count, commutative=commutative)
            if not tuned and nodes is not None and size > 1:
                from .hierarchy import prefer  # noqa: PLC0415

                name = prefer(collective, name, size=size, nbytes=nbytes, nodes=nodes(), commutative=commutative)
    try:
        alg = registry.get(collective, name)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    if not commutative and not alg.keeps_order(size):
        keeping = [n for n in registry.algorithms(collective) if registry.get(collective, n).keeps_order(size)]
        raise ValueError(f"{source}: {collective} algorithm {name!r} does not keep rank order at {size} ranks "
                         f"and the op is not commutative; use one of {', '.join(keeping)}")
    params: dict[str, Any] = {}
    if "nodes" in alg.params:
        params["nodes"] = nodes() if nodes is not None else _env_nodes()
    if "segments" in alg.params:
        params["segments"] = segments_for(nbytes, pieces=2 if name == "double_binary_tree" else 1)
    return name, params
