"""The algorithm registry: which algorithms exist for each collective.

An algorithm is a pure function ``build(rank, size, **params)`` returning
``(nblocks, rounds)`` for one rank; :func:`schedule` wraps it in a cached
:class:`~mpicoll.schedule.Schedule`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .schedule import Round, Schedule, ScheduleSet

__all__ = ["Algorithm", "register", "algorithms", "get", "schedule", "schedules", "collectives"]

Build = Callable[..., tuple[int, tuple[Round, ...]]]


@dataclass(frozen=True)
class Algorithm:
    """One registered algorithm of one collective."""

    collective: str
    name: str
    build: Build
    keeps_order_for: Callable[[int], bool]
    params: tuple[str, ...]

    def keeps_order(self, size: int) -> bool:
        """Whether the algorithm reduces in rank order at ``size`` ranks (non-commutative ops)."""
        return self.keeps_order_for(size)

    @property
    def summary(self) -> str:
        doc = (self.build.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


_REGISTRY: dict[str, dict[str, Algorithm]] = {}


def register(collective: str, name: str, *, keeps_order: bool | Callable[[int], bool] = True,
             params: tuple[str, ...] = ()) -> Callable[[Build], Build]:
    """Decorator: register ``build`` as algorithm ``name`` of ``collective``.

    ``keeps_order`` says whether reductions happen in rank order (a bool, or a
    function of the size); ``params`` names the keyword parameters ``build`` takes
    (``root``, ``segments``).
    """
    order = keeps_order if callable(keeps_order) else (lambda size, _k=bool(keeps_order): _k)

    def deco(build: Build) -> Build:
        _REGISTRY.setdefault(collective, {})[name] = Algorithm(collective, name, build, order, params)
        return build

    return deco


def _load() -> None:
    # the subpackage registers every algorithm when imported; ``mpicoll.algorithms``
    # itself is this module's function, so import the subpackage by its full name
    import importlib

    importlib.import_module(f"{__package__}.algorithms")


def collectives() -> list[str]:
    """Collectives that have at least one algorithm."""
    _load()
    return sorted(_REGISTRY)


def algorithms(collective: str) -> list[str]:
    """Names of the algorithms registered for ``collective`` (e.g. ``"allreduce"``)."""
    _load()
    key = collective.lower()
    if key not in _REGISTRY:
        raise ValueError(f"unknown collective {collective!r}; known: {', '.join(sorted(_REGISTRY))}")
    return list(_REGISTRY[key])


def get(collective: str, name: str) -> Algorithm:
    """The registered algorithm, or a ValueError that lists the choices."""
    names = algorithms(collective)
    if name not in names:
        raise ValueError(f"algorithm: {collective} has no algorithm {name!r}; choose one of "
                         f"{', '.join(names)} or 'auto'")
    return _REGISTRY[collective.lower()][name]


@lru_cache(maxsize=16384)
def _schedule(collective: str, name: str, rank: int, size: int, params: tuple[tuple[str, Any], ...]) -> Schedule:
    alg = get(collective, name)
    nblocks, rounds = alg.build(rank, size, **dict(params))
    return Schedule(collective, name, rank, size, nblocks, tuple(rounds), params)


def schedule(collective: str, name: str, rank: int, size: int, **params: Any) -> Schedule:
    """The (cached) schedule of ``rank`` among ``size`` ranks."""
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is out of range for size {size}")
    alg = get(collective, name)
    extra = set(params) - set(alg.params)
    if extra:
        raise TypeError(f"{collective}/{name} takes no parameter(s) {', '.join(sorted(extra))}")
    return _schedule(collective.lower(), name, rank, size, tuple(sorted(params.items())))


def schedules(collective: str, name: str, size: int, **params: Any) -> ScheduleSet:
    """The schedules of all ``size`` ranks; ``print()`` it for a rounds x ranks table."""
    return ScheduleSet(tuple(schedule(collective, name, r, size, **params) for r in range(size)))
