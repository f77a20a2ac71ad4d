"""Which bytes of which buffer each step of a schedule reads and writes, in the order the executors run them.

The staging transport needs three answers from a schedule, all computed once
per plan:

- what to copy device-to-host before the collective reads it: the bytes of a
  user buffer read before anything wrote them (:attr:`Access.stage_in`, in the
  order they are first needed, cut into segments);
- which of those segments each read waits for (:attr:`Op.need`);
- what to copy host-to-device after each write: the bytes of an output buffer
  that no later step writes again (:attr:`Op.final`), so that a block goes back
  to the device as soon as it is final, while later rounds still run.

The executors run one round as: every receive and send at once (sends read,
receives write), then the local steps in order (each reads, then writes).  The
walk below follows that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Block, Reduce, Schedule

__all__ = ["Span", "Op", "RoundAccess", "Access", "analyse", "subtract", "cut"]

Span = tuple[int, int]     # a half-open byte range [lo, hi)


def subtract(span: Span, covered: list[Span]) -> list[Span]:
    """The parts of ``span`` outside every range of ``covered``, in order."""
    parts = [span]
    for lo, hi in covered:
        nxt: list[Span] = []
        for a, b in parts:
            if hi <= a or b <= lo:
                nxt.append((a, b))
                continue
            if a < lo:
                nxt.append((a, lo))
            if hi < b:
                nxt.append((hi, b))
        parts = nxt
    return [(a, b) for a, b in parts if a < b]


def cut(span: Span, segment: int) -> list[Span]:
    """``span`` cut into pieces of at most ``segment`` bytes, from its start (a zero-length span stays whole)."""
    lo, hi = span
    if hi - lo <= segment:
        return [span]
    return [(a, min(a + segment, hi)) for a in range(lo, hi, segment)]


@dataclass
class Op:
    """One message piece or local step: the buffer bytes it reads and writes."""

    buf: str                          # for messages: the buffer; for steps: the written buffer
    span: Span                        # bytes written (receive, step) or read (send)
    peer: int = -1                    # messages only
    step: Any = None                  # local steps only: the schedule's Reduce or Copy
    reads: list[tuple[str, Span]] = field(default_factory=list)
    need: int = -1                    # the last stage-in segment this op reads (-1: none)
    final: list[tuple[str, Span]] = field(default_factory=list)   # bytes that are final once it ran


@dataclass
class RoundAccess:
    sends: list[Op]
    recvs: list[Op]
    steps: list[Op]


@dataclass
class Access:
    rounds: list[RoundAccess]
    stage_in: list[tuple[str, Span]]      # segments to copy device-to-host, in the order they are needed
    written: dict[str, list[Span]]        # every byte range of an output buffer the schedule writes (merged)


def analyse(schedule: Schedule, layouts: dict[str, Layout], itemsize: dict[str, int], canonical: dict[str, str],
            inputs: set[str], outputs: set[str], segment: int) -> Access:
    """Walk ``schedule`` and find its stage-in segments, each op's need and each write's final bytes.

    ``canonical`` maps a buffer name to the name of the memory it is (an
    in-place call maps ``send`` to ``recv``); ``inputs`` and ``outputs`` are the
    canonical names of the user's device buffers (scratch is neither);
    messages longer than ``segment`` bytes are cut into pieces of ``segment``.
    """
    def span(block: Block) -> tuple[str, Span]:
        start, stop = layouts[block.buf].span(block.lo, block.hi)
        k = itemsize[block.buf]
        return canonical.get(block.buf, block.buf), (start * k, stop * k)

    rounds: list[RoundAccess] = []
    for rnd in schedule.rounds:
        if not rnd:
            continue
        sends = [Op(b, piece, x.peer, reads=[(b, piece)]) for x in rnd.sends
                 for b, s in [span(x.block)] for piece in cut(s, segment)]
        recvs = [Op(b, piece, x.peer) for x in rnd.recvs for b, s in [span(x.block)] for piece in cut(s, segment)]
        steps = []
        for st in rnd.steps:
            out = span(st.out)
            reads = [span(st.left), span(st.right)] if isinstance(st, Reduce) else [span(st.src)]
            steps.append(Op(out[0], out[1], step=st, reads=reads))
        rounds.append(RoundAccess(sends, recvs, steps))

    ordered = [op for r in rounds for group in (r.sends, r.recvs, r.steps) for op in group]
    stage_in = _stage_in(ordered, inputs, segment)
    written = _finals(ordered, outputs)
    return Access(rounds, stage_in, written)


def _writes(op: Op) -> bool:
    return op.peer < 0 or op.reads == []   # a receive or a local step writes; a send only reads


def _stage_in(ordered: list[Op], inputs: set[str], segment: int) -> list[tuple[str, Span]]:
    """Set each op's ``need`` and return the stage-in segments in the order they are first read."""
    segments: list[tuple[str, Span]] = []
    written: dict[str, list[Span]] = {}
    staged: dict[str, list[tuple[Span, int]]] = {}
    for op in ordered:
        for buf, rng in op.reads:
            if buf not in inputs or rng[0] == rng[1]:
                continue
            for lo, hi in subtract(rng, written.get(buf, []) + [s for s, _ in staged.get(buf, [])]):
                for piece in cut((lo, hi), segment):
                    staged.setdefault(buf, []).append((piece, len(segments)))
                    segments.append((buf, piece))
            for (lo, hi), index in staged.get(buf, []):
                if lo < rng[1] and rng[0] < hi:
                    op.need = max(op.need, index)
        if _writes(op):
            written.setdefault(op.buf, []).append(op.span)
    return segments


def _finals(ordered: list[Op], outputs: set[str]) -> dict[str, list[Span]]:
    """Set each write's ``final`` bytes (walking backwards) and return every written range of the outputs."""
    later: dict[str, list[Span]] = {}
    for op in reversed(ordered):
        if not _writes(op) or op.buf not in outputs or op.span[0] == op.span[1]:
            continue
        op.final = [(op.buf, s) for s in subtract(op.span, later.get(op.buf, []))]
        later.setdefault(op.buf, []).append(op.span)
    return {buf: _merge(spans) for buf, spans in later.items()}


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged
