"""The cost model's walk over ranks' rounds with NumPy: the port model's terms of many ranks at once.

:func:`mpicoll.analysis.cost.cost` reads the schedules of the ranks it costs into tables
(:mod:`.tables`, one row per message and per step) a chunk of ranks at a time, and
:func:`rank_terms` prices every rank's every round with NumPy; :class:`Worst` keeps each
round's slowest rank.  An algorithm that relabels (``register(relabel=...)``) has only its
base ranks read: :func:`moved` relabels their tables for every other rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mpicoll.analysis import tables
from mpicoll.ir.layout import Layout

if TYPE_CHECKING:
    from mpicoll.analysis.cost import Machine

__all__ = ["Worst", "rank_terms", "moved", "joined"]


@dataclass
class Worst:
    """Per round, the terms of the slowest costed rank so far, and whether any costed rank acts in it."""

    time: np.ndarray
    latency: np.ndarray
    bandwidth: np.ndarray
    reduction: np.ndarray
    overhead: np.ndarray
    active: np.ndarray

    @classmethod
    def empty(cls, nrounds: int = 0) -> Worst:
        return cls(*(np.zeros(nrounds) for _ in range(5)), np.zeros(nrounds, dtype=bool))

    def grow(self, nrounds: int) -> None:
        """Make room for ``nrounds`` rounds (a later rank may have more rounds than the first)."""
        more = nrounds - len(self.time)
        if more > 0:
            for name in ("time", "latency", "bandwidth", "reduction", "overhead", "active"):
                column = getattr(self, name)
                setattr(self, name, np.concatenate([column, np.zeros(more, dtype=column.dtype)]))


def rank_terms(ranks: list[int], read: tuple[tables.Table, tables.Table, tables.Table], nrounds: int,
                layout: Layout, consts: tuple[float, float, float, float], where: np.ndarray | None,
                machine: Machine) -> dict[str, np.ndarray]:
    """The port model (:mod:`mpicoll.analysis.cost`) for ``ranks``: arrays (ranks x rounds).

    ``read`` holds the tables (:func:`mpicoll.analysis.tables.read`) of their sends, receives and
    steps, their ``rank`` column the position in ``ranks``.

    Keys: ``active`` (the rank does something in the round), ``time``, ``latency``, ``bandwidth``,
    ``reduction`` and ``overhead``, and ``out``, ``into``: the bytes it sends and receives across
    its node's boundary.  A rank's latency and bandwidth in a round are those of its sends or of its
    receives, whichever take longer (the receives only if strictly longer); a machine that is not
    ``duplex`` adds the two directions' bandwidth terms and takes the larger latency.  Every sum is
    taken in the order the schedule lists its messages (``np.bincount`` adds its weights in order),
    so the figures are those of adding them up one at a time.
    """
    a_out, b_out, a_in, b_in = consts
    sends, recvs, steps = read
    cells = len(ranks) * nrounds
    starts = np.asarray(layout.starts or [0], dtype=np.int64)
    ends = np.asarray(layout.ends or [0], dtype=np.int64)

    def per(table: tables.Table, weights: np.ndarray | None = None) -> np.ndarray:
        """``weights`` (default 1) summed per (rank, round) of the table's rows."""
        return np.bincount(table.rank * nrounds + table.t, weights, minlength=cells).reshape(len(ranks), nrounds)

    def moved(table: tables.Table) -> np.ndarray:
        """The bytes of each row's block (of a step's output)."""
        full = table.hi > table.lo
        return np.where(full, ends[np.where(full, table.hi - 1, 0)] - starts[np.where(full, table.lo, 0)], 0)

    terms: dict[str, np.ndarray] = {}
    lats, bws, crossing = [], [], []
    for msgs in (sends, recvs):
        size = moved(msgs)
        if where is None:
            intra = np.zeros(len(msgs.t), dtype=bool)
        else:
            intra = where[msgs.peer] == where[np.asarray(ranks)[msgs.rank]]
        lats.append(per(msgs, np.where(intra, a_in, a_out)))
        bws.append(per(msgs, size * np.where(intra, b_in, b_out)))
        crossing.append(per(msgs, np.where(intra, 0, size)).astype(np.int64))
    if machine.duplex:
        receives = lats[1] + bws[1] > lats[0] + bws[0]
        terms["latency"], terms["bandwidth"] = np.where(receives, lats[1], lats[0]), np.where(receives, bws[1], bws[0])
    else:
        terms["latency"], terms["bandwidth"] = np.maximum(lats[0], lats[1]), bws[0] + bws[1]
    size = moved(steps)
    terms["reduction"] = per(steps, np.where(steps.reduces, size, 0)) * machine.gamma
    messages, nsteps = per(sends) + per(recvs), per(steps)
    terms["overhead"] = (machine.round_overhead + machine.message_overhead * messages
                         + machine.step_overhead * nsteps + machine.copy * per(steps, np.where(steps.reduces, 0, size)))
    if not (machine.round_overhead or machine.message_overhead or machine.step_overhead or machine.copy):
        terms["overhead"] = np.zeros_like(terms["overhead"])
    terms["time"] = terms["latency"] + terms["bandwidth"] + terms["reduction"] + terms["overhead"]
    terms["active"] = (messages + nsteps) > 0
    terms["out"], terms["into"] = crossing
    return terms


def moved(table: tables.Table, move: Callable, position: int) -> tables.Table:
    """A base rank's table relabelled by ``move`` (see :func:`mpicoll.families.catalog.register`), as rank
    number ``position`` of a chunk: the columns the cost model reads."""
    columns = {"t": table.t, "rank": np.full(len(table.t), position, dtype=np.int64)}
    if hasattr(table, "peer"):
        columns["peer"], columns["lo"], columns["hi"] = move(table.peer, table.lo, table.hi)
    else:   # a step: only its output counts
        columns["reduces"] = table.reduces
        _, columns["lo"], columns["hi"] = move(np.zeros_like(table.lo), table.lo, table.hi)
    return tables.Table(columns, [])


def joined(parts: list[tables.Table]) -> tables.Table:
    """The rows of several tables, one after another."""
    names = [name for name in vars(parts[0]) if name != "items"]
    return tables.Table({name: np.concatenate([getattr(part, name) for part in parts]) for name in names}, [])
