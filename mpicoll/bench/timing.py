"""The timing loop every benchmark style shares: variants interleaved round by round, batches between barriers.

:func:`batch_size` agrees on how many back-to-back calls of one variant make a
timed round (about :data:`BATCH_SECONDS`, at least one call);
:func:`time_rounds` runs ``iters`` rounds of every variant, each round in an
order of its own, and gives this rank's seconds per call;
:func:`time_variants` gives the slowest rank's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["BATCH_SECONDS", "MAX_BATCH", "batch_size", "time_rounds", "time_variants"]

BATCH_SECONDS = 2e-3   # a timed round runs calls for about this long (small messages need batches)
MAX_BATCH = 1000


def batch_size(fn: Callable[[], None], world: MPI.Intracomm) -> int:
    """Calls per timed round: about BATCH_SECONDS of work, agreed on by every rank."""
    world.Barrier()
    t0 = time.perf_counter()
    fn()
    fn()
    one = (time.perf_counter() - t0) / 2
    one = world.allreduce(one, op=MPI.MAX)
    return int(max(1, min(MAX_BATCH, BATCH_SECONDS // max(one, 1e-9))))


def time_rounds(timed: dict[str, Callable[[], None]], batch: dict[str, int], iters: int,
                world: Any) -> np.ndarray:
    """This rank's seconds per call of every variant in ``timed``: an (iters x variants) array.

    Each iteration runs every variant ``batch[name]`` times between barriers, in
    an order drawn anew for each iteration, so that no variant always follows the
    same one: what a variant leaves behind (caches, pages, the MPI library's
    state) falls on different variants in turn.  (Rotating one order would not
    do: each variant would still follow the same one in every round but one.)
    The orders come from a generator seeded with the iteration, so every rank
    runs the variants in the same order, as collectives require.
    """
    times = np.zeros((iters, len(timed)))
    variants = list(enumerate(timed.items()))
    for it in range(iters):
        order = np.random.default_rng(it).permutation(len(variants))
        for j, (name, fn) in (variants[i] for i in order):
            k = batch[name]
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            times[it, j] = (time.perf_counter() - t0) / k
    return times


def time_variants(timed: dict[str, Callable[[], None]], batch: dict[str, int], iters: int,
                  world: Any) -> np.ndarray:
    """Seconds per call of every variant in ``timed`` (iters x variants), the slowest rank's in each round."""
    times = time_rounds(timed, batch, iters, world)
    slowest = np.empty_like(times)
    world.Allreduce(times, slowest, op=MPI.MAX)
    return slowest
