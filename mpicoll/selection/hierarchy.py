""""auto" with several nodes: flat or hierarchical, by the cost model.

With more than one node (and some node holding more than one rank) the
hierarchical algorithm of a collective competes with the flat choice of its
rule table: both are costed by :func:`mpicoll.analysis.cost.cost` for the
communicator's node layout with the machine's intra- and inter-node constants
(:func:`machine`), and the cheaper one runs.  The flat choice wins ties and
every case the model cannot judge (no hierarchical algorithm, an op that is
not commutative, no inter-node constants measured).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

from mpicoll.analysis.cost import Machine, cost
from mpicoll.families import registry
from mpicoll.ir.nodes import Nodes, block_size, groups, is_multi_node
from mpicoll.selection.model import build_params

__all__ = ["prefer", "machine", "machine_for", "HIERARCHICAL"]

HIERARCHICAL = "hierarchical"
_CACHE: OrderedDict[tuple, str] = OrderedDict()
_CACHE_ENTRIES = 256


def machine(size: int, nodes: Nodes) -> Machine | None:
    """The local preset's constants for this layout, or None when they have no inter-node part.

    ``calibrate`` run across nodes (e.g. on the emulated test bed) stores
    ``alpha_intra`` and ``beta_intra`` besides the inter-node ``alpha`` and
    ``beta``; a calibration on one node has none, and then the model cannot
    tell the two kinds of link apart.
    """
    from mpicoll.analysis.presets import preset  # noqa: PLC0415 (presets imports the cost model, which imports the registry)

    return machine_for(preset("local"), size, nodes)


def machine_for(base: Machine, size: int, nodes: Nodes) -> Machine | None:
    """``base`` with this layout's ranks per node, or None when it has no inter-node part."""
    if base.alpha_intra is None or base.beta_intra is None:
        return None
    per_node = block_size(size, nodes) or max(len(g) for g in groups(size, nodes))
    return replace(base, ranks_per_node=per_node)


def prefer(collective: str, flat: str, *, size: int, nbytes: int, nodes: Nodes, commutative: bool = True,
           constants: Machine | None = None) -> str:
    """``flat`` or the hierarchical algorithm of ``collective``, whichever the cost model finds faster.

    ``constants`` defaults to :func:`machine`; results are cached (bounded) by
    their arguments, with message sizes rounded to powers of two.
    """
    if not is_multi_node(size, nodes) or HIERARCHICAL not in registry.algorithms(collective) or flat == HIERARCHICAL:
        return flat
    if not commutative and not registry.get(collective, HIERARCHICAL).keeps_order(size):
        return flat
    consts = constants if constants is not None else machine(size, nodes)
    if consts is None:
        return flat
    band = 1 << max(0, nbytes - 1).bit_length()
    key = (collective, flat, size, band, nodes, consts.alpha, consts.beta, consts.gamma, consts.alpha_intra,
           consts.beta_intra, consts.link_per_node)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    t_flat = cost(collective, flat, size, band, consts, nodes=nodes, **build_params(collective, flat, band)).time
    t_hier = cost(collective, HIERARCHICAL, size, band, consts, nodes=nodes,
                  **build_params(collective, HIERARCHICAL, band)).time
    choice = HIERARCHICAL if t_hier < t_flat else flat
    _CACHE[key] = choice
    while len(_CACHE) > _CACHE_ENTRIES:
        _CACHE.popitem(last=False)
    return choice
