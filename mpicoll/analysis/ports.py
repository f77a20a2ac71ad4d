"""The port model of the cost model (:mod:`.cost`), for many ranks' rounds at once, with NumPy.

Per round, a rank's time is the slower direction's sum of ``alpha_m + bytes_m beta_m``
over its messages (full-duplex, single port; both directions' bandwidth terms where
the machine is not ``duplex``) plus ``gamma`` times the bytes it reduces and the
executor's overheads; a round lasts as long as its slowest rank.  :func:`round_terms`
computes that for a batch of ranks from their rounds read into tables
(:mod:`.tables`), and :class:`Terms` keeps each round's slowest rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mpicoll.analysis import tables
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Round

__all__ = ["Terms", "round_terms"]


@dataclass
class Terms:
    """Per round t, the slowest costed rank's ``worst[t] = (time, latency, bandwidth, reduction, overhead)``;
    ``active[t]``: some costed rank acts in round t; ``links[t][node]``: with ``link_per_node``, the
    inter-node bytes [sent, received] of the node's costed ranks."""

    worst: np.ndarray
    active: np.ndarray
    links: dict[int, list[list[int]]]

    def merge(self, other: Terms) -> Terms:
        """Both sets of ranks: a round's slowest rank stays this one's unless the other's is slower."""
        n = max(len(self.worst), len(other.worst))
        worst, active = _padded(self.worst, n), _padded(self.active, n)
        theirs = _padded(other.worst, n)
        slower = theirs[:, 0] > worst[:, 0]
        worst[slower] = theirs[slower]
        links = {t: [list(x) for x in per] for t, per in self.links.items()}
        for t, per in other.links.items():
            mine = links.setdefault(t, [[0, 0] for _ in per])
            for node, (out, into) in enumerate(per):
                mine[node][0] += out
                mine[node][1] += into
        return Terms(worst, active | _padded(other.active, n), links)


def _padded(x: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([x, np.zeros((n - len(x), *x.shape[1:]), dtype=x.dtype)])


def round_terms(ranks: list[int], rounds: list[tuple[Round, ...]], layout: Layout,
           consts: tuple[float, float, float, float], where: tuple[int, ...] | None, machine: Any,
           nnodes: int) -> Terms:
    """Every round of every rank in ``ranks`` by the port model above (``rounds[i]``: rank ``ranks[i]``'s).

    One row per message and per local step (:func:`mpicoll.analysis.tables.read`); the sums
    over a rank's round are ``np.bincount`` over (rank, round), which adds in listed order as a
    loop would.  A rank's round costs, per direction, ``alpha_m + bytes_m beta_m`` summed over its
    messages (intra-node constants where ``where[peer] == where[rank]``); with ``duplex`` the
    slower direction counts (the sends on a tie), else the larger latency and both bandwidth terms.
    """
    a_out, b_out, a_in, b_in = consts
    nrounds = max((len(x) for x in rounds), default=0)
    cells = len(ranks) * nrounds                      # one per (rank, round): i * nrounds + t
    starts, ends = np.asarray(layout.starts, dtype=np.int64), np.asarray(layout.ends, dtype=np.int64)
    node = np.asarray(where, dtype=np.int64) if where else None
    sends, recvs, steps = tables.read(range(len(ranks)), rounds)   # rank column: the index i into ranks

    def moved(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:   # bytes of blocks lo .. hi-1
        return np.where(hi > lo, ends[hi - 1] - starts[np.minimum(lo, len(starts) - 1)], 0) if len(lo) else lo

    def per_cell(table: tables.Table, values: np.ndarray) -> np.ndarray:
        return np.bincount(table.rank * nrounds + table.t, weights=values, minlength=cells)

    directions = []
    links: dict[int, list[list[int]]] = {}
    for direction, msgs in enumerate((sends, recvs)):
        nbytes = moved(msgs.lo, msgs.hi)
        rank_of = np.asarray(ranks, dtype=np.int64)[msgs.rank] if len(msgs) else msgs.rank
        intra = node[msgs.peer] == node[rank_of] if node is not None else np.zeros(len(msgs), dtype=bool)
        lat = per_cell(msgs, np.where(intra, a_in, a_out))
        bw = per_cell(msgs, nbytes * np.where(intra, b_in, b_out))
        directions.append((lat, bw, np.bincount(msgs.rank * nrounds + msgs.t, minlength=cells)))
        if machine.link_per_node and node is not None:
            out = ~intra & (nbytes > 0)
            for t, n, b in zip(msgs.t[out].tolist(), node[rank_of[out]].tolist(), nbytes[out].tolist()):
                links.setdefault(t, [[0, 0] for _ in range(nnodes)])[n][direction] += b
    (s_lat, s_bw, s_count), (r_lat, r_bw, r_count) = directions
    if machine.duplex:
        recv_slower = r_lat + r_bw > s_lat + s_bw
        lat, bw = np.where(recv_slower, r_lat, s_lat), np.where(recv_slower, r_bw, s_bw)
    else:
        lat, bw = np.maximum(s_lat, r_lat), s_bw + r_bw
    out_bytes = moved(steps.lo, steps.hi)
    red = per_cell(steps, np.where(steps.reduces, out_bytes, 0))
    copied = per_cell(steps, np.where(steps.reduces, 0, out_bytes))
    nsteps = np.bincount(steps.rank * nrounds + steps.t, minlength=cells)
    acts = (s_count + r_count + nsteps) > 0
    over = np.zeros(cells)
    if machine.round_overhead or machine.message_overhead or machine.step_overhead or machine.copy:
        over = np.where(acts, machine.round_overhead + machine.message_overhead * (s_count + r_count)
                        + machine.step_overhead * nsteps + machine.copy * copied, 0.0)
    total = np.where(acts, lat + bw + red * machine.gamma + over, 0.0)
    table = np.stack([total, lat, bw, red * machine.gamma, over], axis=-1).reshape(len(ranks), nrounds, 5)
    slowest = table[:, :, 0].argmax(axis=0) if len(ranks) else np.zeros(nrounds, dtype=np.int64)
    worst = table[slowest, np.arange(nrounds)] if len(ranks) else np.zeros((nrounds, 5))
    worst[~(worst[:, 0] > 0)] = 0.0   # as a loop that keeps a rank only when it is slower than 0
    return Terms(worst, acts.reshape(len(ranks), nrounds).any(axis=0), links)
