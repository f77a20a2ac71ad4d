"""Which algorithm runs: the ``algorithm=`` argument, ``MPICOLL_ALGO``, or "auto".

``MPICOLL_ALGO`` works like ``NCCL_ALGO``: ``allreduce=ring,bcast=binomial``
forces those choices wherever the call says ``algorithm="auto"``.  An explicit
``algorithm=`` argument wins over the environment.

"auto" decides, in order of precedence: ``MPICOLL_ALGO``; the band of the
tuning file (``python -m mpicoll.bench --tune``: direct measurements) for the
collective and p; the cost model (:mod:`mpicoll.selection.model`) with the
calibrated constants (``python -m mpicoll calibrate``), else the built-in
``local`` preset; the rule table of the collective where the model does not
apply.  A communicator's ranks decide from the data of its rank 0
(:class:`mpicoll.selection.tuning.Shared`, exchanged when the communicator was
made), so that all ranks choose alike.

Everything here is a local function of its arguments: no message, no file read
on a communicator's behalf.  The rule of each collective (its rule
table) is in :mod:`mpicoll.selection.rules` (and in the docstring of its call's
module, ``mpicoll.calls.<collective>``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpicoll import config
from mpicoll.families import registry
from mpicoll.ir.nodes import Nodes, is_multi_node
from mpicoll.selection import model as costed
from mpicoll.selection import tuning
from mpicoll.selection.rules import RULES
from mpicoll.selection.segments import segments_for
from mpicoll.selection.tuning import Shared

__all__ = ["choose", "forced_by_environment", "tuned_choice", "reload_tuning"]



def forced_by_environment(collective: str) -> str | None:
    """The algorithm ``MPICOLL_ALGO`` names for ``collective``, if any; ValueError naming the variable for a
    collective or algorithm that does not exist."""
    forced = config.current().algo
    if forced and forced is not _CHECKED[0]:
        _check_forced(forced)
        _CHECKED[0] = forced
    return forced.get(collective)


_CHECKED: list[Any] = [None]   # the MPICOLL_ALGO value last found valid


def _check_forced(forced: dict[str, str]) -> None:
    known = registry.collectives()
    for collective, name in forced.items():
        if collective not in known:
            raise ValueError(f"MPICOLL_ALGO: no collective {collective!r}; expected one of {', '.join(known)}")
        if name != "auto" and name not in registry.algorithms(collective):
            raise ValueError(f"MPICOLL_ALGO: {collective} has no algorithm {name!r}; expected one of "
                             f"{', '.join(registry.algorithms(collective))}")


def reload_tuning() -> None:
    """Read the tuning and calibration files again (and the environment: :func:`mpicoll.config.reload`).

    Communicators made afterwards agree on the new data; existing ones keep what
    their ranks agreed on when they were made.
    """
    config.reload()


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
    data instead.
    """
    return _band(tuning.local().bands(collective, size), collective, size, nbytes, commutative)


def _auto(collective: str) -> Callable[..., str]:
    """The collective's rule table (:mod:`mpicoll.selection.rules`)."""
    return RULES[collective]


def choose(collective: str, requested: str | None, *, size: int, nbytes: int, count: int,
           commutative: bool = True, nodes: Nodes = None, agreed: Shared | None = None) -> tuple[str, dict[str, Any]]:
    """(algorithm name, build parameters) for one call; raises ValueError for a bad choice.

    "auto", in order: ``MPICOLL_ALGO``; the tuning file's band for this
    collective, size and p; the cost model (:mod:`mpicoll.selection.model`)
    for the collectives it covers; else the collective's rule table.
    ``agreed`` is the communicator's rank-0 data (this process's own files
    when None); ``nodes`` its node layout: "auto" weighs the hierarchical
    algorithm against the flat ones when there are several nodes, and
    algorithms that take ``nodes`` get it.
    """
    if requested is None:
        requested = "auto"
    if not isinstance(requested, str):
        raise TypeError(f"algorithm must be a string, got {type(requested).__name__}")
    name = requested.lower()
    source = "algorithm"
    if name == "auto":
        name, source = _decide(collective, size=size, nbytes=nbytes, count=count, commutative=commutative,
                               nodes=nodes, agreed=agreed if agreed is not None else tuning.local())
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
        params["nodes"] = nodes
    if "segments" in alg.params:
        params["segments"] = segments_for(nbytes, pieces=2 if name == "double_binary_tree" else 1)
    return name, params


def _decide(collective: str, *, size: int, nbytes: int, count: int, commutative: bool, nodes: Nodes,
            agreed: Shared) -> tuple[str, str]:
    """(the algorithm "auto" runs, what named it); see :func:`choose`."""
    forced = forced_by_environment(collective)
    if forced and forced != "auto":
        return forced, "MPICOLL_ALGO"
    if count >= size:
        tuned = _band(agreed.bands(collective, size), collective, size, nbytes, commutative)
        if tuned:
            tuning.tell(collective, size, nbytes, tuned, agreed.tuning_from)
            return tuned, agreed.tuning_from
    rule = _auto(collective)(size=size, nbytes=nbytes, count=count, commutative=commutative)
    if size < 2:
        return rule, "algorithm"
    machine = agreed.machine
    split = None
    if nodes is not None and machine.alpha_intra is not None and machine.beta_intra is not None:
        split = nodes if is_multi_node(size, nodes) else None
    if collective in costed.MODELLED and size <= costed.MODEL_LIMIT:
        return costed.best(collective, size=size, nbytes=nbytes, commutative=commutative, machine=machine,
                           key=agreed.key, rule=rule, nodes=split), "the cost model"
    if split is not None:
        from mpicoll.selection.hierarchy import machine_for, prefer  # noqa: PLC0415

        rule = prefer(collective, rule, size=size, nbytes=nbytes, nodes=split, commutative=commutative,
                      constants=machine_for(machine, size, split))
    return rule, "algorithm"
