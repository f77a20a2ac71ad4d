"""Schedules as NumPy tables: one row per send, per receive and per local step, with its round and rank.

The lockstep interpreter (:mod:`.lockstep`) reads all ranks' rounds at once.  A loop in Python over the millions of
messages of a large p costs more than everything they do with them, so the
rounds are read column by column with ``map`` and ``itemgetter`` (loops in C),
and the rest is NumPy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, compress, repeat
from operator import is_not, itemgetter
from typing import Any

import numpy as np

from mpicoll.ir.schedule import EMPTY_ROUND, Round

__all__ = ["Table", "read"]


class Table:
    """Rows read off rounds: a NumPy array per column (an attribute each); ``items[i]`` is row i's
    :class:`~mpicoll.ir.schedule.Block` (messages) or step.

    Columns: ``t`` (round), ``rank``, ``k`` (place in its round's list); for messages ``peer``,
    for steps ``reduces``; then ``lo``, ``hi`` (and ``buf``, a buffer's number) of the block,
    or of a step's ``out``, and with prefixes ``l`` and ``r`` of its operands (a copy's
    ``r`` columns repeat its source).
    """

    def __init__(self, columns: dict[str, np.ndarray], items: list[Any]):
        for name, column in columns.items():
            setattr(self, name, column)
        self.items = items

    def __len__(self) -> int:
        return len(self.items)


def read(ranks: Sequence[int], rounds: Sequence[Sequence[Round]],
         index: Callable[[str], int] | None = None) -> tuple[Table, Table, Table]:
    """The tables ``(sends, recvs, steps)`` of ``rounds[i]``, the rounds of rank ``ranks[i]``.

    ``index`` numbers buffer names (``buf`` columns); without it there are none.
    Rows come rank by rank (in the order given), round by round, in listed order.
    """
    every = list(chain.from_iterable(rounds))
    count = np.array([len(x) for x in rounds], dtype=np.int64)
    rank = np.repeat(np.asarray(ranks, dtype=np.int64), count)
    t = np.arange(len(every)) - np.repeat(np.cumsum(count) - count, count)
    busy = np.fromiter(map(is_not, every, repeat(EMPTY_ROUND)), dtype=bool, count=len(every))
    if not busy.all():   # rounds a rank idles through (most of a linear algorithm's) have no rows
        every, rank, t = list(compress(every, busy)), rank[busy], t[busy]

    def ints(values: Any, n: int) -> np.ndarray:
        return np.fromiter(values, dtype=np.int64, count=n)

    def table(which: int, blocks_at: tuple[int, ...]) -> Table:
        parts = list(map(itemgetter(which), every))
        items = list(chain.from_iterable(parts))
        n = len(items)
        per_round = ints(map(len, parts), len(parts))
        columns = {"t": np.repeat(t, per_round), "rank": np.repeat(rank, per_round),
                   "k": np.arange(n) - np.repeat(np.cumsum(per_round) - per_round, per_round)}
        if which < 2:   # a message: (peer, block)
            columns["peer"] = ints(map(itemgetter(0), items), n)
        else:           # a step: (out, left, right) or (out, src)
            columns["reduces"] = ints(map(len, items), n) == 3
        for prefix, at in zip(("", "l", "r"), blocks_at):
            blocks = list(map(itemgetter(at), items))
            if index is not None:
                columns[prefix + "buf"] = ints(map(index, map(itemgetter(0), blocks)), n)
            columns[prefix + "lo"] = ints(map(itemgetter(1), blocks), n)
            columns[prefix + "hi"] = ints(map(itemgetter(2), blocks), n)
        return Table(columns, items if which == 2 else list(map(itemgetter(1), items)))

    return table(0, (1,)), table(1, (1,)), table(2, (0, 1, -1))
