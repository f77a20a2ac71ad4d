"""The table of algorithms: what a family module registers, and the one-rank schedule every algorithm shares.

The family modules (:mod:`mpicoll.families`) import this module only, and
register their builders with :func:`register`; :mod:`mpicoll.families.registry`
reads the table (and re-exports these names).  Keeping the table apart from the
lookups is what lets the registry import the families without an import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpicoll.ir.contracts import spec
from mpicoll.ir.schedule import USER_BUFFERS, Block, Copy, Round, Scratch

__all__ = ["Algorithm", "Build", "register", "trivial"]

Build = Callable[..., tuple[int, tuple[Round, ...]]]
# relabel(rank, size, **params) -> (another rank, move) or None; see register()
Move = Callable[[Any, Any, Any], tuple[Any, Any, Any]]
Relabel = Callable[..., "tuple[int, Move] | None"]


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm of one collective."""

    collective: str
    name: str
    build: Build
    keeps_order_for: Callable[[int], bool]
    params: tuple[str, ...]
    rotates: bool = False
    scratch: dict[str, Scratch] = field(default_factory=dict, compare=False)
    any_size: bool = False   # built at p = 1 too (a neighbourhood: a rank may be its own neighbour)
    relabel: Relabel | None = field(default=None, compare=False)

    def keeps_order(self, size: int) -> bool:
        """Whether the algorithm reduces in rank order at ``size`` ranks (non-commutative ops)."""
        return size == 1 or self.keeps_order_for(size)

    def rounds(self, rank: int, size: int, **params: Any) -> tuple[int, tuple[Round, ...]]:
        """``(nblocks, rounds)`` of ``rank``: the builder's for p >= 2, :func:`trivial`'s for p = 1."""
        if size == 1 and not self.any_size:
            return trivial(self.collective, **params)
        nblocks, rounds = self.build(rank, size, **params)
        return nblocks, tuple(rounds)

    def order_claim(self, largest: int = 64) -> str:
        """The registry's claim about rank order in words, e.g. ``"kept at even p only"``.

        Read off :meth:`keeps_order` at p = 2 .. ``largest``; the unit tests prove the claim
        symbolically (an algorithm that claims order is verified in ordered mode, one that
        does not must fail it), so a page that prints this sentence cannot contradict them.
        """
        kept = [p for p in range(2, largest + 1) if self.keeps_order(p)]
        if len(kept) == largest - 1:
            return "kept at every p (right for non-commutative operations)"
        if not kept:
            return "not kept for p >= 2 (commutative operations only; auto never picks it for others)"
        if kept == list(range(2, largest + 1, 2)):
            return "kept at even p only (auto never picks it for a non-commutative operation at odd p)"
        if kept == list(range(2, kept[-1] + 1)):
            return (f"kept for p <= {kept[-1]} only (auto never picks it for a non-commutative operation "
                    "at larger p)")
        return f"kept at p = {', '.join(map(str, kept))} only (of 2 .. {largest})"

    @property
    def summary(self) -> str:
        doc = (self.build.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


_REGISTRY: dict[str, dict[str, Algorithm]] = {}


def register(collective: str, name: str, *, keeps_order: bool | Callable[[int], bool] = True,
             params: tuple[str, ...] = (), rotates: bool = False,
             scratch: dict[str, Scratch] | None = None, any_size: bool = False,
             relabel: Relabel | None = None) -> Callable[[Build], Build]:
    """Decorator: register ``build`` as algorithm ``name`` of ``collective``.

    ``keeps_order`` says whether reductions happen in rank order (a bool, or a
    function of the size); ``params`` names the keyword parameters ``build`` takes
    (``root``, ``segments``).  ``rotates`` declares that rank r's schedule is rank
    0's with every peer and every block index shifted by r (mod p, with p blocks):
    the cost model then costs every rank exactly from rank 0's schedule alone
    (a unit test checks the claim for every algorithm that makes it).
    ``scratch`` declares every buffer other than ``send`` and ``recv`` that
    ``build`` may name, with its role and layout (:class:`~mpicoll.ir.schedule.Scratch`);
    binding, simulating or checking a schedule that names any other buffer raises.
    ``any_size``: ``build`` makes the one-rank schedule too (else it comes from the contract).
    ``relabel(rank, size, **params)``, where given, returns ``(base, move)`` when rank's schedule
    is rank ``base``'s relabelled, else None: ``move(peers, los, his)`` maps NumPy arrays of the
    peers and block ranges of ``base``'s messages and steps to ``rank``'s, in the same rounds
    and order.  The cost model then builds only the base ranks' schedules (a unit test checks
    the claim at small p for every algorithm that makes it).
    """
    order = keeps_order if callable(keeps_order) else (lambda size, _k=bool(keeps_order): _k)
    declared = dict(scratch or {})
    clash = set(declared) & set(USER_BUFFERS)
    if clash:
        raise ValueError(f"register: {collective}/{name} declares {', '.join(sorted(clash))} as scratch")
    for buf, decl in declared.items():
        if not isinstance(decl, Scratch) or decl.like not in ("send", "recv", "own"):
            raise ValueError(f"register: {collective}/{name} scratch {buf!r}: expected Scratch(role, like= 'send', "
                             f"'recv' or 'own'), got {decl!r}")

    def deco(build: Build) -> Build:
        _REGISTRY.setdefault(collective, {})[name] = Algorithm(collective, name, build, order, params, rotates,
                                                               declared, any_size, relabel)
        return build

    return deco


def trivial(collective: str, **params: Any) -> tuple[int, tuple[Round, ...]]:
    """The one-rank schedule of ``collective``: ``(1, rounds)``, from its contract alone.

    With one rank and one block, each output block whose expected value is an
    input block held elsewhere is copied from it in round 0 (``recv = send``
    for most collectives); an output already in place (a ``Bcast`` root's
    buffer) or left undefined (``Barrier``, rank 0 of ``Exscan``) needs nothing.
    An ``IN_PLACE`` call binds ``send`` to ``recv``'s memory, so its copy is onto itself.
    """
    contract = spec(collective)
    held = {value: Block(buf, b, b + 1)
            for buf, values in contract.inputs(0, 1, 1, **params).items() for b, value in enumerate(values)}
    copies = tuple(Copy(Block(buf, b, b + 1), held[value])
                   for buf, values in contract.outputs(0, 1, 1, **params).items()
                   for b, value in enumerate(values)
                   if value is not None and held[value] != Block(buf, b, b + 1))
    return 1, (Round(steps=copies),) if copies else ()
