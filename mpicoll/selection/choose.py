"""Which algorithm runs: the ``algorithm=`` argument, ``MPICOLL_ALGO``, or "auto".

``MPICOLL_ALGO`` works like ``NCCL_ALGO``: ``allreduce=ring,bcast=binomial``
forces those choices wherever the call says ``algorithm="auto"``.  An explicit
``algorithm=`` argument wins over the environment.

"auto" decides, in order of precedence: ``MPICOLL_ALGO``; the band of the
tuning file (``python -m mpicoll.bench --tune``: direct measurements) for the
collective and p; the cost model (:mod:`mpicoll.selection.model`) with the calibrated
constants (``python -m mpicoll calibrate``), else the built-in ``local``
preset; the rule table of the collective where the model does not apply.  On a
communicator every rank decides from the tuning and calibration data of rank 0,
broadcast once (:mod:`mpicoll.selection.tuning`), so that all ranks choose alike.

The rule of each collective lives next to its call, in
``mpicoll.calls.<collective>``, registered with :func:`auto_rule`; each documents
its table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mpicoll.families import registry
from mpicoll.selection import model as costed
from mpicoll.selection import tuning as agreement
from mpicoll.selection.segments import MAX_SEGMENTS, SEGMENT_BYTES, segments_for  # noqa: F401 (part of this module's API)
from mpicoll.selection.tuning import tuning_file, tuning_path

__all__ = ["choose", "auto_rule", "forced_by_environment", "segments_for", "tuned_choice", "tuning_path",
           "tuning_file", "reload_tuning", "agree"]

KiB = 1024
MiB = 1024 * KiB


def forced_by_environment(collective: str) -> str | None:
    """The algorithm ``MPICOLL_ALGO`` names for ``collective``, if any."""
    text = os.environ.get("MPICOLL_ALGO", "")
    forced = _FORCED.get(text)
    if forced is None:
        forced = _parse_forced(text)
        if len(_FORCED) >= 16:    # the variable rarely changes: a few values are enough
            _FORCED.clear()
        _FORCED[text] = forced
    return forced.get(collective)


_FORCED: dict[str, dict[str, str]] = {}   # MPICOLL_ALGO's value: what it forces (read on every "auto" call)


def _parse_forced(text: str) -> dict[str, str]:
    """``MPICOLL_ALGO``'s value as {collective: algorithm} (the first item for a collective wins)."""
    forced: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise ValueError(f"MPICOLL_ALGO: expected collective=algorithm, got {item.strip()!r}")
        key, value = (x.strip().lower() for x in item.split("=", 1))
        forced.setdefault(key, value)
    return forced


_GENERATION = 0


def reload_tuning(comm: Any = None) -> None:
    """Forget the tuning and calibration data this process read (cached plans are chosen anew).

    Communicators keep what their ranks agreed on (:mod:`mpicoll.selection.tuning`:
    once per communicator), except ``comm`` when given: then this is
    collective over ``comm``, whose ranks agree again at once on what its rank
    0 now reads.
    """
    global _GENERATION
    agreement.forget()
    costed.clear()
    _GENERATION += 1
    if comm is not None:
        getattr(comm, "__dict__", {}).pop(agreement.ATTR, None)
        agree(comm)


def tuning_generation() -> int:
    """Counts :func:`reload_tuning` calls (part of the plan cache's key)."""
    return _GENERATION


def _band(bands: Any, collective: str, size: int, nbytes: int, commutative: bool) -> str | None:
    """The algorithm of the band that holds ``nbytes``, if it exists and may run here."""
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


def tuned_choice(collective: str, size: int, nbytes: int, commutative: bool = True) -> str | None:
    """The algorithm ``python -m mpicoll.bench --tune`` measured fastest here (this process's file), or None.

    The tuning file maps ``collective -> str(p) -> [[upper_bytes or null, algorithm], ...]``
    (bands in increasing size; a band covers sizes below its upper bound).  A
    tuned algorithm that is unknown, or that does not keep rank order when the
    op is not commutative, is ignored.  Calls on a communicator use rank 0's
    file instead (:func:`agree`).
    """
    by_p = tuning_file().get(collective, {})
    return _band(by_p.get(str(size)) if isinstance(by_p, dict) else None, collective, size, nbytes, commutative)


def agree(comm: Any, timeout: float | None = None) -> Any:
    """The data "auto" decides from on ``comm``, rank 0's (see :mod:`mpicoll.selection.tuning`).

    :func:`choose` calls it on the first "auto" call of a communicator; the
    careful path (:mod:`mpicoll.comm.careful`) calls it before checking a call's
    arguments, so that a rank whose checks fail still takes part.
    """
    return agreement.of_comm(comm, timeout)


def _env_nodes() -> Any:
    from mpicoll.ir.nodes import env_node_size  # noqa: PLC0415

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

        importlib.import_module(f"mpicoll.calls.{collective}")  # registers its rule
    return _AUTO[collective]


def choose(collective: str, requested: str | None, *, size: int, nbytes: int, count: int,
           commutative: bool = True, nodes: Callable[[], Any] | None = None,
           comm: Any = None) -> tuple[str, dict[str, Any]]:
    """(algorithm name, build parameters) for one call; raises ValueError for a bad choice.

    "auto", in order: ``MPICOLL_ALGO``; the tuning file's band for this
    collective, size and p; the cost model (:mod:`mpicoll.selection.model`) for the
    collectives it covers; else the collective's rule table.  With ``comm``
    every rank decides from rank 0's tuning and calibration data
    (:func:`agree`, collective on the first "auto" call of ``comm``); without
    it, from this process's files.

    ``nodes()`` gives the communicator's node layout (:func:`mpicoll.ir.nodes.of_comm`; collective on
    its first call, so it is called on every rank alike): "auto" weighs the hierarchical algorithm
    against the flat ones when there are several nodes, and algorithms that take ``nodes`` get it.
    """
    if requested is None:
        requested = "auto"
    if not isinstance(requested, str):
        raise TypeError(f"algorithm must be a string, got {type(requested).__name__}")
    name = requested.lower()
    source = "algorithm"
    if name == "auto":
        name, source = _decide(collective, size=size, nbytes=nbytes, count=count, commutative=commutative,
                               nodes=nodes, comm=comm)
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


def _decide(collective: str, *, size: int, nbytes: int, count: int, commutative: bool,
            nodes: Callable[[], Any] | None, comm: Any) -> tuple[str, str]:
    """(the algorithm "auto" runs, what named it); see :func:`choose`."""
    # first, so that every rank takes part in the agreement whatever its environment says
    if comm is not None and size > 1:
        shared = getattr(comm, "__dict__", {}).get(agreement.ATTR) or agreement.of_comm(comm)
    else:
        shared = agreement.local(size)
    forced = forced_by_environment(collective)
    if forced and forced != "auto":
        return forced, "MPICOLL_ALGO"
    if count >= size:
        tuned = _band(shared.tuning.get(collective), collective, size, nbytes, commutative)
        if tuned:
            return tuned, "the tuning file"
    rule = _auto(collective)(size=size, nbytes=nbytes, count=count, commutative=commutative)
    if size < 2:
        return rule, "algorithm"
    layout = nodes() if nodes is not None else None
    machine = shared.machine
    split = None
    if layout is not None and machine.alpha_intra is not None and machine.beta_intra is not None:
        from mpicoll.ir.nodes import is_multi_node  # noqa: PLC0415

        split = layout if is_multi_node(size, layout) else None
    if collective in costed.MODELLED and size <= costed.MODEL_LIMIT:
        return costed.best(collective, size=size, nbytes=nbytes, commutative=commutative, machine=machine,
                           key=shared.key, rule=rule, nodes=split), "the cost model"
    if split is not None:
        from mpicoll.selection.hierarchy import machine_for, prefer  # noqa: PLC0415

        rule = prefer(collective, rule, size=size, nbytes=nbytes, nodes=split, commutative=commutative,
                      constants=machine_for(machine, size, split))
    return rule, "algorithm"
