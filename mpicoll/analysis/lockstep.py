"""Run the schedules of all ranks together, one round at a time, in one process.

The interpreter matches every send of round t to the receive its peer posts in
round t (in order, per pair of ranks), checks the rules of the IR, and hands the
data movement and local steps to a *domain*: NumPy arrays for the simulator,
symbolic contributions for the checker.  Any violation raises
:class:`~mpicoll.ir.schedule.ScheduleError` naming the algorithm, p, rank, round and
block.

It works in two passes.  A :class:`Plan` reads the schedules once: it matches
the messages, checks every rule that does not depend on the data (peers, block
ranges, block counts, unmatched messages, steps that write the send buffer) and
lists each round's messages and local steps, also as NumPy arrays of *cells*
(one cell is one block of one buffer of one rank).  :func:`run_lockstep` then
runs a plan on a domain, checking the hazards that depend on which buffers
share memory (``alias``).  A domain with ``deliver`` and ``apply``
(:class:`BatchDomain`, the symbolic checker) takes a whole round's messages, or
one local step of every rank, at once, and moves them with NumPy; any other
domain (:class:`Domain`) is handed them one at a time.  A plan depends on the
schedules alone, so checking a collective out of place and in place reads the
schedules once (:func:`plan_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mpicoll.analysis import tables
from mpicoll.analysis.tables import Table
from mpicoll.families.registry import gc_paused
from mpicoll.ir.schedule import USER_BUFFERS, Block, Copy, Reduce, Round, Schedule, ScheduleError

__all__ = ["Domain", "BatchDomain", "Plan", "Source", "Moves", "Steps", "plan_of", "run_lockstep"]


class Domain(Protocol):
    """Where the data live, one operation at a time.  ``read`` returns a snapshot (a copy), not a
    view: a rank's local steps may run before a message it sent in the same round is written at its peer."""

    def read(self, rank: int, block: Block) -> Any: ...
    def write(self, rank: int, block: Block, payload: Any) -> None: ...
    def reduce(self, rank: int, step: Reduce) -> None: ...
    def copy(self, rank: int, step: Copy) -> None: ...


class BatchDomain(Protocol):
    """Where the data live, a round's messages (:class:`Moves`) or a group of steps (:class:`Steps`) at once.

    ``deliver`` reads every message's blocks before it writes any; ``apply`` runs steps of
    different ranks, so no step of a group reads what another one writes.
    """

    def deliver(self, moves: Moves) -> None: ...
    def apply(self, steps: Steps) -> None: ...


def _where(s: Schedule, t: int) -> str:
    return f"{s.collective}/{s.algorithm} p={s.size} rank {s.rank} round {t}"


@dataclass(frozen=True)
class Source:
    """What a :class:`Plan` read: the schedules, and their tables of sends, receives and local steps.

    :class:`Moves` and :class:`Steps` point here rather than at their plan, which holds them:
    without that cycle the plan of a large p (millions of objects) is freed as soon as it is
    dropped, not by a full pass of the garbage collector.
    """

    schedules: tuple[Schedule, ...]
    sends: Table
    recvs: Table
    steps: Table


@dataclass
class Moves:
    """The messages of one round, matched.

    ``src[j]`` and ``dst[j]`` are the cells the j-th block of all messages is read from
    and written to (see :class:`Plan`); ``owner[j]`` is the index of its message in
    :attr:`messages`.
    """

    plan: Source
    round: int
    rows: Any    # per message: (its send's row, its receive's row) in the plan's tables
    src: Any
    dst: Any
    owner: Any

    @property
    def messages(self) -> list[tuple[int, Block, int, Block]]:
        """``(sender, block sent, receiver, block received)`` of each message."""
        sends, recvs = self.plan.sends, self.plan.recvs
        return [(int(sends.rank[i]), sends.items[i], int(recvs.rank[j]), recvs.items[j]) for i, j in self.rows]

    def error(self, i: int, what: str) -> ScheduleError:
        """The error of message i: ``what`` happened to it."""
        src, block, dst, _ = self.messages[i]
        return ScheduleError(f"{_where(self.plan.schedules[src], self.round)}: send of {block} to {dst}: {what}")


@dataclass
class Steps:
    """The k-th local step of every rank that has one in a round, all reductions or all copies.

    Per block of all of them, ``out`` is the cell written and ``left``, ``right`` the
    cells read (a copy reads ``left`` only; ``right`` repeats it); ``owner[j]`` is the
    index of block j's step in :attr:`steps`.
    """

    plan: Source
    round: int
    reduces: bool
    rows: Any    # the steps' rows in the plan's table of steps
    out: Any
    left: Any
    right: Any
    owner: Any

    @property
    def steps(self) -> list[tuple[int, Reduce | Copy]]:
        """``(rank, step)`` of each step."""
        table = self.plan.steps
        return [(int(table.rank[i]), table.items[i]) for i in self.rows]

    def error(self, i: int, what: str) -> ScheduleError:
        """The error of step i: ``what`` went wrong in it."""
        rank, step = self.steps[i]
        return ScheduleError(f"{_where(self.plan.schedules[rank], self.round)}: step {step}: {what}")


@dataclass
class _Round:
    moves: Moves
    steps: list[Steps]
    hazards: list[tuple[Schedule, Round]]   # rounds whose receives may overlap a block in flight


def _spread(first: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cells ``first[i] .. first[i] + length[i] - 1`` of every row, one after another, and each one's row."""
    owner = np.repeat(np.arange(len(length)), length)
    start = np.cumsum(length) - length
    return first[owner] + np.arange(len(owner)) - start[owner], owner


class Plan:
    """The schedules of all ranks, matched and checked, round by round, as arrays of cells.

    Cells number the blocks of every buffer of every rank: the cell of block b of
    buffer ``buffers[i]`` of rank r is ``(r * len(buffers) + i) * nblocks + b``.
    Every message, receive and step of every schedule is read once into a table
    (one row each), and NumPy does the rest: the send of row i is matched to a
    receive by sorting both tables by (round, sender, receiver), stably, so that
    messages between one pair in one round match in listed order.  The first
    rule a round breaks is kept in ``error``, and ``rounds`` stops before that
    round, so that a run still finds the data errors of the earlier rounds first.
    """

    def __init__(self, schedules: Sequence[Schedule]):
        # The collector paused throughout: millions of small acyclic tuples (see run_lockstep), and a
        # full pass over them whenever NumPy makes objects (it imports numpy.ma on first use) takes seconds.
        with gc_paused():
            self._read(tuple(schedules))

    def _read(self, schedules: tuple[Schedule, ...]) -> None:
        self.schedules = schedules
        self.size = len(self.schedules)
        self.nblocks = self.schedules[0].nblocks if self.schedules else 0
        names = set(USER_BUFFERS).union(*(s.buffers() for s in self.schedules))
        self.buffers = (*USER_BUFFERS, *sorted(names.difference(USER_BUFFERS)))
        self.index = {name: i for i, name in enumerate(self.buffers)}
        self.nrounds = max((len(s.rounds) for s in self.schedules), default=0)
        self.sends, self.recvs, self.steps = tables.read([s.rank for s in self.schedules],
                                                         [s.rounds for s in self.schedules], self.index.__getitem__)
        self.source = Source(self.schedules, self.sends, self.recvs, self.steps)
        hazards = self._hazards()
        sends, recvs = self.sends, self.recvs
        # Match: the k-th send of (round, sender, receiver) in listed order goes with the k-th such receive
        by_send = np.argsort(self._pair(sends.t, sends.rank, sends.peer), kind="stable")
        by_recv = np.argsort(self._pair(recvs.t, recvs.peer, recvs.rank), kind="stable")
        self.error, last = self._check(by_send, by_recv)
        self.rounds: list[_Round] = []
        n = min(len(by_send), len(by_recv))
        rows = np.stack([by_send[:n], by_recv[:n]], axis=1)
        rows = rows[sends.t[rows[:, 0]] < last] if n else rows.reshape(0, 2)
        length = sends.hi[rows[:, 0]] - sends.lo[rows[:, 0]]
        src, owner = _spread(self._first(sends, rows[:, 0]), length)
        dst, _ = _spread(self._first(recvs, rows[:, 1]), length)
        bounds = np.searchsorted(sends.t[rows[:, 0]], np.arange(last + 1))
        cuts = np.searchsorted(owner, bounds)
        groups = self._groups(last)
        for t in range(last):
            m0, m1, b0, b1 = bounds[t], bounds[t + 1], cuts[t], cuts[t + 1]
            moves = Moves(self.source, t, rows[m0:m1], src[b0:b1], dst[b0:b1], owner[b0:b1] - m0)
            self.rounds.append(_Round(moves, groups.get(t, []), hazards.get(t, [])))

    def _pair(self, t: np.ndarray, sender: np.ndarray, receiver: np.ndarray) -> np.ndarray:
        """A number per (round, sender, receiver), in that order; a peer out of range (-1 or p and beyond)
        gets a number of its own, so that it cannot match a valid pair of another round."""
        base = self.size + 2
        return (t * base + np.clip(sender, -1, self.size) + 1) * base + np.clip(receiver, -1, self.size) + 1

    def cell(self, rank: int, buffer: str, block: int = 0) -> int:
        """The cell of block ``block`` of ``buffer`` at ``rank``."""
        return (rank * len(self.buffers) + self.index[buffer]) * self.nblocks + block

    def _hazards(self) -> dict[int, list[tuple[Schedule, Round]]]:
        """By round, the ranks' rounds in which a received block may overlap another block in flight under
        some aliasing of buffers: several receives, a receive into ``send``, or a send of overlapping blocks.
        :func:`run_lockstep` checks them (:func:`_check_hazards`) with the run's ``alias``."""
        sends, recvs = self.sends, self.recvs
        recv_key = recvs.rank * self.nrounds + recvs.t   # (rank, round), ascending as the tables are read
        send_key = sends.rank * self.nrounds + sends.t
        keys, first, count = np.unique(recv_key, return_index=True, return_counts=True)
        single, row = keys[count == 1], first[count == 1]
        at = np.minimum(np.searchsorted(single, send_key), max(len(single) - 1, 0))
        mine = np.flatnonzero(single[at] == send_key) if len(single) else np.zeros(0, dtype=np.int64)
        j = row[at[mine]]
        overlap = mine[(sends.lo[mine] < recvs.hi[j]) & (recvs.lo[j] < sends.hi[mine])]
        out: dict[int, list[tuple[Schedule, Round]]] = {}
        for key in np.union1d(np.union1d(keys[count > 1], recv_key[recvs.buf == 0]), send_key[overlap]):
            rank, t = divmod(int(key), self.nrounds)
            out.setdefault(t, []).append((self.schedules[rank], self.schedules[rank].rounds[t]))
        return out

    def _first(self, table: Table, rows: np.ndarray, which: str = "") -> np.ndarray:
        """The cells of the first block of the named block (``which``: "", "l" or "r") of ``rows``."""
        buf, lo = getattr(table, which + "buf")[rows], getattr(table, which + "lo")[rows]
        return (table.rank[rows] * len(self.buffers) + buf) * self.nblocks + lo

    def _check(self, by_send: np.ndarray, by_recv: np.ndarray) -> tuple[str | None, int]:
        """The first rule broken, and its round (``nrounds`` when none is)."""
        sends, recvs, steps, size, nblocks = self.sends, self.recvs, self.steps, self.size, self.nblocks
        found: list[tuple[int, int, str]] = []   # (round, precedence, message) of each kind of error

        def first(table: Table, bad: np.ndarray, precedence: int, message: Callable[[int], str]) -> None:
            rows = np.flatnonzero(bad)
            if len(rows):
                i = rows[np.argmin(table.t[rows])]
                t = int(table.t[i])
                found.append((t, precedence, f"{_where(self.schedules[table.rank[i]], t)}: {message(i)}"))

        def outside(table: Table, which: str = "") -> np.ndarray:
            lo, hi = getattr(table, which + "lo"), getattr(table, which + "hi")
            return (lo < 0) | (lo > hi) | (hi > nblocks)

        def block_range(table: Table, which: str = "") -> Callable[[int], str]:
            return lambda i: f"{_block(table, i, which)} is outside blocks 0..{nblocks - 1}"

        first(sends, (sends.peer < 0) | (sends.peer >= size) | (sends.peer == sends.rank), 0,
              lambda i: f"send of {sends.items[i]} to invalid peer {sends.peer[i]}")
        first(sends, outside(sends), 1, block_range(sends))
        first(recvs, outside(recvs), 1, block_range(recvs))
        for which in ("", "l", "r"):
            first(steps, outside(steps, which), 1, block_range(steps, which))
        first(steps, steps.buf == 0, 4, lambda i: f"step {steps.items[i]} writes the send buffer")
        first(steps, (steps.lhi - steps.llo != steps.hi - steps.lo) | (steps.rhi - steps.rlo != steps.hi - steps.lo),
              4, lambda i: f"step {steps.items[i]}: " + ("operands have different numbers of blocks"
                                                          if steps.reduces[i] else
                                                          "copies between blocks of different sizes"))
        skey = self._pair(sends.t, sends.rank, sends.peer)[by_send]
        rkey = self._pair(recvs.t, recvs.peer, recvs.rank)[by_recv]
        n = min(len(skey), len(rkey))
        differ = np.flatnonzero(skey[:n] != rkey[:n])
        at = int(differ[0]) if len(differ) else n
        if at < len(rkey) and (at == len(skey) or rkey[at] < skey[at]):   # a receive nobody sends to
            j = by_recv[at]
            first(recvs, np.arange(len(rkey)) == j, 2,
                  lambda j: f"receive into {recvs.items[j]} from {recvs.peer[j]} has no matching send")
        elif at < len(skey):                                               # a send nobody receives
            i = by_send[at]
            first(sends, np.arange(len(skey)) == i, 5,
                  lambda i: f"send of {sends.items[i]} to {sends.peer[i]} is never received")
        i, j = by_send[:at], by_recv[:at]
        wrong = np.zeros(len(recvs.t), dtype=bool)
        wrong[j[(sends.hi - sends.lo)[i] != (recvs.hi - recvs.lo)[j]]] = True
        partner = np.zeros(len(recvs.t), dtype=np.int64)
        partner[j] = i
        first(recvs, wrong, 3, lambda j: f"receives {recvs.items[j].nblocks} block(s) into {recvs.items[j]} "
              f"but rank {recvs.peer[j]} sends {sends.items[partner[j]].nblocks} ({sends.items[partner[j]]})")
        if not found:
            return None, self.nrounds
        t, _, message = min(found)
        return message, t

    def _groups(self, last: int) -> dict[int, list[Steps]]:
        """The steps of rounds before ``last`` by round: group k of a round holds the k-th reductions (or
        copies) of all ranks."""
        steps = self.steps
        keep = np.flatnonzero(steps.t < last)
        order = keep[np.lexsort((steps.reduces[keep], steps.k[keep], steps.t[keep]))]
        key = (steps.t[order] * (steps.k.max(initial=0) + 1) + steps.k[order]) * 2 + steps.reduces[order]
        edges = np.flatnonzero(np.diff(key)) + 1
        out: dict[int, list[Steps]] = {}
        for rows in np.split(order, edges) if len(order) else ():
            length = steps.hi[rows] - steps.lo[rows]
            cells = [_spread(self._first(steps, rows, which), length) for which in ("", "l", "r")]
            t = int(steps.t[rows[0]])
            out.setdefault(t, []).append(Steps(self.source, t, bool(steps.reduces[rows[0]]), rows, cells[0][0],
                                               cells[1][0], cells[2][0], cells[0][1]))
        return out


def _block(table: Table, i: int, which: str) -> Block:
    """The block ``which`` ("", "l", "r") of row i of a table."""
    obj = table.items[i]
    if isinstance(obj, Block):
        return obj
    return obj[{"": 0, "l": 1, "r": 2}[which]] if which != "r" or type(obj) is Reduce else obj[1]


def plan_of(schedules: Any) -> Plan:
    """The plan of a :class:`~mpicoll.ir.schedule.ScheduleSet` (made once and kept on it) or of schedules."""
    if isinstance(schedules, Plan):
        return schedules
    memo = getattr(schedules, "__dict__", None)
    if memo is None or "schedules" not in memo:   # a plain sequence of schedules
        return Plan(schedules)
    known = memo.get("_plan")
    if known is None:
        known = Plan(schedules.schedules)
        object.__setattr__(schedules, "_plan", known)   # frozen: a memo, as Schedule.buffers()
    return known


def run_lockstep(schedules: Any, domain: Domain | BatchDomain, alias: dict[str, str] | None = None,
                 after_round: Callable[[int], None] | None = None) -> None:
    """Execute every rank's schedule on ``domain``, round by round.

    ``schedules`` is a sequence of the ranks' schedules, a ScheduleSet or a :class:`Plan`.
    ``alias`` maps buffer names to the buffer they share memory with (in-place
    calls: ``{"send": "recv"}``), so that hazards between them are caught.
    ``after_round(t)``, when given, is called after each round.  The cyclic
    garbage collector is paused meanwhile: the run makes millions of small
    acyclic tuples at p = 1024, and the collector's repeated scans of the (large,
    cached) schedules would make it about ten times slower.
    """
    with gc_paused():
        plan = plan_of(schedules)
        _run(plan, domain, alias or {}, after_round)


def _run(plan: Plan, domain: Any, alias: dict[str, str], after_round: Callable[[int], None] | None) -> None:
    batch = hasattr(domain, "deliver")
    for t, rnd in enumerate(plan.rounds):
        for s, r in rnd.hazards:
            _check_hazards(s, t, r, alias)
        if batch:
            domain.deliver(rnd.moves)
            for group in rnd.steps:
                domain.apply(group)
        else:
            _one_at_a_time(domain, rnd)
        if after_round is not None:
            after_round(t)
    if plan.error is not None:
        raise ScheduleError(plan.error)


def _one_at_a_time(domain: Domain, rnd: _Round) -> None:
    """A round on a :class:`Domain`: every message read, then written; then the steps, in order."""
    messages = rnd.moves.messages
    payloads = [domain.read(src, block) for src, block, _, _ in messages]
    for (_, _, dst, block), payload in zip(messages, payloads):
        domain.write(dst, block, payload)
    for group in rnd.steps:
        run = domain.reduce if group.reduces else domain.copy
        for i, (rank, st) in enumerate(group.steps):
            try:
                run(rank, st)
            except ScheduleError as exc:
                raise group.error(i, str(exc)) from None


def _may_overlap(rnd: Round, alias: dict[str, str]) -> bool:
    """Cheap (n log n) test: False only when no received block can overlap another block in flight."""
    spans = sorted((alias.get(x.block.buf, x.block.buf), x.block.lo, x.block.hi, i < len(rnd.recvs))
                   for i, x in enumerate((*rnd.recvs, *rnd.sends)))
    buf, top_all, top_recv = None, 0, 0
    for name, lo, hi, is_recv in spans:
        if name != buf:
            buf, top_all, top_recv = name, lo, lo
        if (is_recv and top_all > lo) or top_recv > lo:
            return True
        top_all = max(top_all, hi)
        if is_recv:
            top_recv = max(top_recv, hi)
    return False


def _check_hazards(s: Schedule, t: int, rnd: Round, alias: dict[str, str]) -> None:
    """Blocks in flight in one round must not overlap a block being received."""
    recvs = rnd.recvs
    if len(recvs) + len(rnd.sends) > 8 and not any(r.block.buf == "send" for r in recvs) \
            and not _may_overlap(rnd, alias):
        recvs = ()  # rounds with many messages (linear algorithms): skip the quadratic search
    for i, r in enumerate(recvs):
        rb = r.block
        if rb.buf == "send":
            raise ScheduleError(f"{_where(s, t)}: receives into the send buffer ({rb})")
        mine = alias.get(rb.buf, rb.buf)
        for other in (*rnd.sends, *recvs[i + 1:]):
            ob = other.block
            if ob.lo < rb.hi and rb.lo < ob.hi and alias.get(ob.buf, ob.buf) == mine:
                raise ScheduleError(f"{_where(s, t)}: {rb} is received while {ob} is in flight")
