"""The schedule IR: what one rank does in one collective, as data.

An algorithm returns, for one rank, a :class:`Schedule`: a tuple of
:class:`Round`.  In a round the rank first exchanges messages (every
:class:`Send` and :class:`Recv` of the round is in flight at once), then runs the
round's local steps (:class:`Reduce`, :class:`Copy`) in order.

Rounds are *global time steps*: a message sent by rank a in round t is received
by its peer in round t.  This makes every schedule deadlock-free when each rank
completes its rounds in order, and it lets the simulator, the checker, the cost
model and the drawings treat the p schedules of a collective as one picture.
Messages between the same two ranks in the same round and direction are
matched in the order they are listed (MPI's non-overtaking rule).

Blocks are symbolic: ``Block("recv", 2, 4)`` names blocks 2 and 3 of the receive
buffer.  All buffers of a call share one block index space (``nblocks`` blocks);
a :mod:`mpicoll.ir.layout` turns a block range into elements only when the
schedule is bound to real buffers.  Buffer names are ``send``, ``recv`` and the
scratch buffers the algorithm declares when it is registered: each a
:class:`Scratch` with its role and the buffer whose block layout (and so size)
it takes.  A name that is neither is an error wherever the schedule is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple, Union

__all__ = [
    "Block", "Send", "Recv", "Reduce", "Copy", "Round", "Schedule", "ScheduleSet",
    "ScheduleError", "EMPTY_ROUND", "Timeline", "Scratch", "USER_BUFFERS", "BLOCKS",
]

USER_BUFFERS = ("send", "recv")   # the caller's buffers; every other name is declared scratch


class ScheduleError(RuntimeError):
    """A schedule breaks a rule: an unmatched message, a wrong result, ..."""


class Scratch(NamedTuple):
    """A scratch buffer an algorithm declares: what it holds, and whose block layout it has.

    ``like`` names the layout, and so the size: ``"recv"`` or ``"send"`` (the
    caller's buffer of that name; ``send`` has ``recv``'s layout when the call
    gives it none), or ``"own"``: the call gives a layout under the scratch
    buffer's own name (a binomial gather's ``subtree`` holds only the blocks
    of the rank's subtree).  The buffer has as many elements as that layout
    spans (the end of its last block).
    """

    role: str
    like: str = "recv"


class Block(NamedTuple):
    """Blocks ``lo`` to ``hi - 1`` of buffer ``buf``."""

    buf: str
    lo: int
    hi: int

    def __str__(self) -> str:
        if self.hi == self.lo + 1:
            return f"{self.buf}[{self.lo}]"
        return f"{self.buf}[{self.lo}:{self.hi}]"

    @property
    def nblocks(self) -> int:
        return self.hi - self.lo


class Send(NamedTuple):
    """Send ``block`` to rank ``peer``."""

    peer: int
    block: Block

    def __str__(self) -> str:
        return f"{self.block}->{self.peer}"


class Recv(NamedTuple):
    """Receive from rank ``peer`` into ``block``."""

    peer: int
    block: Block

    def __str__(self) -> str:
        return f"{self.block}<-{self.peer}"


class Reduce(NamedTuple):
    """``out = left (op) right``; ``left`` holds the lower ranks' contributions.

    This is MPI's convention for ``op(invec, inoutvec)``: ``inoutvec`` becomes
    ``invec o inoutvec`` with ``invec`` the left operand.
    """

    out: Block
    left: Block
    right: Block

    def __str__(self) -> str:
        return f"{self.out}={self.left}+{self.right}"


class Copy(NamedTuple):
    """``out = src`` (local copy)."""

    out: Block
    src: Block

    def __str__(self) -> str:
        return f"{self.out}={self.src}"


Step = Union[Reduce, Copy]


class Round(NamedTuple):
    """One time step: messages in flight together, then local steps in order."""

    sends: tuple[Send, ...] = ()
    recvs: tuple[Recv, ...] = ()
    steps: tuple[Step, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.sends or self.recvs or self.steps)

    def __str__(self) -> str:
        return " ".join(str(x) for x in (*self.sends, *self.recvs, *self.steps)) or "."


EMPTY_ROUND = Round()


@dataclass(frozen=True)
class Schedule:
    """What one rank does in one collective."""

    collective: str
    algorithm: str
    rank: int
    size: int
    nblocks: int
    rounds: tuple[Round, ...]
    params: tuple[tuple[str, object], ...] = field(default=())
    declared: Mapping[str, Scratch] = field(default_factory=dict, compare=False, repr=False)

    def buffers(self) -> frozenset[str]:
        """Names of every buffer the schedule touches (worked out once per schedule)."""
        known = self.__dict__.get("_buffers")
        if known is None:
            known = self._walk_buffers()
            object.__setattr__(self, "_buffers", known)   # frozen: a memo, not a field
        return known

    def _walk_buffers(self) -> frozenset[str]:
        # chained maps (loops in C): this walks every round of a large p
        messages = chain.from_iterable(chain.from_iterable(map(itemgetter(0, 1), self.rounds)))
        blocks = chain(map(itemgetter(1), messages),   # a message is (peer, block)
                       chain.from_iterable(chain.from_iterable(map(itemgetter(2), self.rounds))))  # a step: blocks
        return frozenset(map(itemgetter(0), blocks))

    def scratch(self) -> Mapping[str, Scratch]:
        """The declared scratch buffers this rank's schedule uses, in declaration order (worked out once).

        Raises
        ------
        ScheduleError
            The schedule names a buffer that is neither ``send``, ``recv`` nor declared.
        """
        known = self.__dict__.get("_scratch")
        if known is not None:
            return known
        used = self.buffers()
        undeclared = sorted(used.difference(USER_BUFFERS, self.declared))
        if undeclared:
            raise ScheduleError(f"{self.collective}/{self.algorithm} rank {self.rank} of {self.size} uses buffer(s) "
                                f"{', '.join(undeclared)} it does not declare (declared scratch: "
                                f"{', '.join(self.declared) or 'none'}); declare them in register(scratch=...)")
        known = {name: decl for name, decl in self.declared.items() if name in used}   # read, never changed
        object.__setattr__(self, "_scratch", known)   # a memo, as in buffers()
        return known

    def layouts(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The layout of every buffer this rank uses, from the call's ``given`` layouts.

        ``recv`` must be given; ``send`` is ``given["send"]``, else ``recv``'s; a
        scratch buffer's is the one its declaration names (:class:`Scratch`).

        Raises
        ------
        ScheduleError
            An undeclared buffer name, or a scratch buffer declared ``like="own"`` whose
            layout ``given`` lacks.
        """
        out = dict(given)
        out.setdefault("send", given["recv"])
        for name, decl in self.scratch().items():
            key = name if decl.like == "own" else decl.like
            if key not in out:
                raise ScheduleError(f"{self.collective}/{self.algorithm}: scratch buffer {name!r} takes the layout "
                                    f"{key!r}, which the call does not give")
            out[name] = out[key]
        return out

    def __str__(self) -> str:
        head = (f"{self.collective}/{self.algorithm} rank {self.rank} of {self.size}, {self.nblocks} "
                f"block{'' if self.nblocks == 1 else 's'}")
        lines = [head] + [f"  round {t}: {rnd}" for t, rnd in enumerate(self.rounds) if rnd]
        return "\n".join(lines)


@dataclass(frozen=True)
class ScheduleSet:
    """The schedules of all ranks of one collective; prints as a rounds x ranks table."""

    schedules: tuple[Schedule, ...]

    @property
    def size(self) -> int:
        return len(self.schedules)

    @property
    def nrounds(self) -> int:
        return max((len(s.rounds) for s in self.schedules), default=0)

    def __getitem__(self, rank: int) -> Schedule:
        return self.schedules[rank]

    def scratch(self, ranks: list[int] | None = None) -> dict[str, Scratch]:
        """The declared scratch buffers that any of ``ranks`` (default: all) uses, in declaration order."""
        used: set[str] = set()
        for r in range(self.size) if ranks is None else ranks:
            used.update(self.schedules[r].scratch())
        declared = self.schedules[0].declared if self.schedules else {}
        return {name: decl for name, decl in declared.items() if name in used}

    def __iter__(self):
        return iter(self.schedules)

    def table(self, ranks: list[int] | None = None) -> str:
        """A text table: one row per round, one column per rank."""
        ranks = list(range(self.size)) if ranks is None else ranks
        rows = [["round"] + [f"rank {r}" for r in ranks]]
        for t in range(self.nrounds):
            cells = []
            for r in ranks:
                rounds = self.schedules[r].rounds
                cells.append(_cell(rounds[t]) if t < len(rounds) else "")
            rows.append([str(t)] + cells)
        widths = [max(len(line) for row in rows for line in row[c].split("\n")) for c in range(len(rows[0]))]
        out = []
        s0 = self.schedules[0] if self.schedules else None
        if s0 is not None:
            out.append(f"{s0.collective} / {s0.algorithm}: p = {self.size}, {s0.nblocks} "
                       f"block{'' if s0.nblocks == 1 else 's'}  (x -> r: block x sent to rank r; x <- r: received "
                       "from rank r)")
            for name, decl in self.scratch(ranks).items():
                shape = "its own layout" if decl.like == "own" else f"laid out as {decl.like}"
                out.append(f"scratch {name} ({shape}): {decl.role}")
        for i, row in enumerate(rows):
            height = max(len(c.split("\n")) for c in row)
            for k in range(height):
                parts = []
                for c, cell in enumerate(row):
                    lines = cell.split("\n")
                    parts.append((lines[k] if k < len(lines) else "").ljust(widths[c]))
                out.append(" | ".join(parts).rstrip())
            if i == 0:
                out.append("-+-".join("-" * w for w in widths))
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()


def _cell(rnd: Round) -> str:
    """One rank's round as lines: sends, receives, then local steps."""
    parts = [f"{x.block} -> {x.peer}" for x in rnd.sends]      # not "send send[3] to 1"
    parts += [f"{x.block} <- {x.peer}" for x in rnd.recvs]
    for st in rnd.steps:
        if isinstance(st, Reduce):
            parts.append(f"{st.out} = {st.left} + {st.right}")
        else:
            parts.append(f"{st.out} = {st.src}")
    return "\n".join(parts) or "."


_new = tuple.__new__   # _new(Send, (peer, block)) is Send(peer, block), made without a Python call


class _Blocks(dict):
    """Block objects by ``(buf, lo, hi)``, each made once: ``BLOCKS["recv", 2, 3] == Block("recv", 2, 3)``.

    The schedules of a large p name the same few blocks millions of times (every rank of a
    ring at p = 1024 sends each of 1024 blocks 2046 times over); one shared object per block
    makes them faster to build and to free, and a third smaller.  The cache is cleared when
    it holds :attr:`LIMIT` blocks.
    """

    LIMIT = 1 << 18   # about 40 MB of blocks

    def __missing__(self, key: tuple[str, int, int]) -> Block:
        if len(self) >= self.LIMIT:
            self.clear()
        block = self[key] = _new(Block, key)
        return block


BLOCKS = _Blocks()


class _Slots(dict):
    """Round index -> (sends, receives, steps) lists, made on first use.

    ``whole`` holds the rounds :meth:`Timeline.exchange` made whole, as long as nothing else
    is added to them; a slot made for such a round starts with its messages and steps.
    """

    def __init__(self) -> None:
        super().__init__()
        self.whole: dict[int, Round] = {}

    def __missing__(self, t: int) -> tuple[list[Send], list[Recv], list[Step]]:
        rnd = self.whole.pop(t, EMPTY_ROUND)
        slot = self[t] = (list(rnd.sends), list(rnd.recvs), list(rnd.steps))
        return slot


class Timeline:
    """Builds a rank's rounds by global round index (handy for pipelines).

    >>> tl = Timeline()
    >>> tl.send(0, 1, Block("send", 0, 1)); tl.recv(1, 1, Block("recv", 0, 1))
    >>> len(tl.rounds())
    2
    """

    def __init__(self) -> None:
        self._at = _Slots()

    def _slot(self, t: int) -> tuple[list[Send], list[Recv], list[Step]]:
        return self._at[t]

    # The methods below index self._at directly (a round's slot is made on first use) and make their
    # tuples with tuple.__new__ (the same objects as Send(peer, block), without the Python-level __new__
    # of a NamedTuple): they run millions of times when a large p is built.
    def send(self, t: int, peer: int, block: Block) -> None:
        self._at[t][0].append(_new(Send, (peer, block)))

    def recv(self, t: int, peer: int, block: Block) -> None:
        self._at[t][1].append(_new(Recv, (peer, block)))

    def step(self, t: int, step: Step) -> None:
        self._at[t][2].append(step)

    def reduce(self, t: int, out: Block, left: Block, right: Block) -> None:
        self._at[t][2].append(_new(Reduce, (out, left, right)))

    def copy(self, t: int, out: Block, src: Block) -> None:
        self._at[t][2].append(_new(Copy, (out, src)))

    def exchange(self, t: int, to: int, sent: Block, frm: int, received: Block, *steps: Step) -> None:
        """Send ``sent`` to ``to`` and receive ``received`` from ``frm`` in round t, then run ``steps``.

        The step of a ring or of a pairwise exchange in one call: where round t is still
        empty it is made whole at once (the commonest round, millions of times at large p).
        """
        at = self._at
        if t in at or t in at.whole:
            sends, recvs, more = at[t]
            sends.append(_new(Send, (to, sent)))
            recvs.append(_new(Recv, (frm, received)))
            more.extend(steps)
        else:
            at.whole[t] = _new(Round, ((_new(Send, (to, sent)),), (_new(Recv, (frm, received)),), steps))

    def extend(self, offset: int, rounds: tuple[Round, ...]) -> None:
        """Append another schedule's rounds, shifted to start at round ``offset``."""
        for t, rnd in enumerate(rounds):
            if rnd:
                sends, recvs, steps = self._slot(offset + t)
                sends.extend(rnd.sends)
                recvs.extend(rnd.recvs)
                steps.extend(rnd.steps)

    def rounds(self, nrounds: int | None = None) -> tuple[Round, ...]:
        """The rounds so far; ``nrounds`` pads with empty rounds."""
        whole = self._at.whole
        last = max(max(self._at, default=-1), max(whole, default=-1))
        n = last + 1 if nrounds is None else max(nrounds, last + 1)
        out = [EMPTY_ROUND] * n
        for t, (sends, recvs, steps) in self._at.items():
            if sends or recvs or steps:
                out[t] = _new(Round, (tuple(sends), tuple(recvs), tuple(steps)))
        for t, rnd in whole.items():
            out[t] = rnd
        return tuple(out)
