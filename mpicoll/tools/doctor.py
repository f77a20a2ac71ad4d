"""``python -m mpicoll doctor DIR``: what the ranks' flight records say happened, in plain words.

Every rank of a job run with ``MPICOLL_TRACE=DIR`` writes ``DIR/rank-R.json`` (:mod:`mpicoll.engine.recorder`)
when a call times out or meets a failed process, on ``SIGUSR1`` and at exit.  :func:`explain` merges them: the
records of one communicator are the ones with the same members and ordinal, each rank's calls numbered by
their tag's sequence (the same on every rank of a correct program), so that call ``#k`` of one rank is call
``#k`` of the others.  An intercommunicator's calls are recorded with its groups merged, its ranks numbered
so (the heading says which are which).  For each communicator in which a call was made it reports, oldest
first:

- a *mismatch*: ranks whose call ``#k`` differs (collective, algorithm or size);
- the first call some rank did not finish: which ranks never entered it, which wait in it (round, algorithm,
  the peers waited for, as the error said), which stopped because a process died;
- ranks of whom there is no record (a process that died writes none).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["load", "explain", "main"]


def load(folder: str) -> dict[int, dict]:
    """The records in ``folder``, by world rank (ValueError if there are none, or one cannot be read)."""
    records: dict[int, dict] = {}
    for path in sorted(glob.glob(os.path.join(folder, "rank-*.json"))):
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a flight record ({exc})") from None
        records[int(record["rank"])] = record
    if not records:
        raise ValueError(f"{folder}: no flight records (rank-R.json) there; run the job with MPICOLL_TRACE={folder}")
    return records


def ranks_text(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 0, 2``, ``ranks 0-3``, ``ranks 0-2, 5``."""
    ranks = sorted(set(ranks))
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ranks[i]}-{ranks[j]}")
        else:
            parts.extend(str(r) for r in ranks[i:j + 1])
        i = j + 1
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def _name(call: dict) -> str:
    """A call's MPI name: ``Allreduce``, ``Iallreduce``, ``Allreduce_init``."""
    collective = call["collective"]
    name = collective[:1].upper() + collective[1:]
    return {"nonblocking": "I" + collective, "persistent": name + "_init"}.get(call["kind"], name)


def _label(call: dict) -> str:
    """``Allreduce #12`` (``Allreduce_init #3, start 2`` for a persistent request's second start)."""
    seq = str(call["seq"])
    if call["kind"] == "persistent" and "." in seq:
        number, start = seq.split(".")
        return f"{_name(call)} #{number}, start {start}"
    return f"{_name(call)} #{seq}"


def _order(seq: Any) -> tuple[int, int]:
    number, _, start = str(seq).partition(".")
    return int(number), int(start or 0)


def _finished(call: dict) -> bool:
    return call.get("end") is not None and "error" not in call


def _comms(records: dict[int, dict]) -> list[tuple[tuple[int, ...], dict[int, dict[tuple, dict]], list | None]]:
    """Each communicator's members, its calls by rank (in it), keyed ``(kind, seq)``, and its groups' sizes
    where it is an intercommunicator, in a stable order; communicators in which no rank made a call are left
    out (the private ones an intercommunicator or ``Split`` makes, ...)."""
    merged: dict[tuple, dict[int, dict[tuple, dict]]] = {}
    groups: dict[tuple, list | None] = {}
    for record in records.values():
        for comm in record["comms"]:
            calls = {(call["kind"], str(call["seq"])): call for call in comm["calls"]}
            key = (tuple(comm["members"]), comm["ordinal"])
            merged.setdefault(key, {})[comm["rank"]] = calls
            groups[key] = groups.get(key) or comm.get("groups")
    order = sorted((key for key, by_rank in merged.items() if any(by_rank.values())),
                   key=lambda key: (-len(key[0]), key[0], key[1]))
    return [(key[0], merged[key], groups[key]) for key in order]


def _heading(number: int, members: tuple[int, ...], world: int, groups: list | None) -> str:
    """``comm 2 (4 ranks, world ranks 4-7):``; an intercommunicator's ranks are those of its groups merged
    (the records number them so), each group's given with their world ranks."""
    if groups:
        cut = groups[0]
        here = " | ".join(ranks_text(part) for part in (range(cut), range(cut, len(members))))
        there = " | ".join(", ".join(map(str, part)) for part in (members[:cut], members[cut:]))
        return f"comm {number} (intercommunicator of groups {here}; world ranks {there}):"
    where = "" if list(members) == list(range(world)) else f", world {ranks_text(members)}"
    return f"comm {number} ({len(members)} rank{'s' if len(members) != 1 else ''}{where}):"


def explain(records: dict[int, dict]) -> list[str]:
    """What ``records`` (world rank -> record, as :func:`load` reads them) say happened, one finding a line."""
    lines = [f"{len(records)} record{'s' if len(records) != 1 else ''} ({ranks_text(records)}), written on " +
             "; ".join(f"{reason} ({ranks_text(r for r in records if records[r]['reason'] == reason)})"
                       for reason in sorted({rec["reason"] for rec in records.values()}))]
    world = max((len(comm["members"]) for record in records.values() for comm in record["comms"]), default=0)
    for number, (members, by_rank, groups) in enumerate(_comms(records), 1):
        comm = f"comm {number}"
        lines.append(_heading(number, members, world, groups))
        findings = _findings(comm, len(members), by_rank)
        lines += ["  " + line for line in findings]
        silent = [r for r in range(len(members)) if r not in by_rank]
        if silent:
            lines.append(f"  {ranks_text(silent)}: no record (a process that died writes none; one stuck outside "
                         "mpicoll writes on SIGUSR1 or at exit)")
    return lines


def _findings(comm: str, size: int, by_rank: dict[int, dict[tuple, dict]]) -> list[str]:
    lines: list[str] = []
    for kind in ("blocking", "nonblocking", "persistent"):
        calls = {rank: {key[1]: call for key, call in made.items() if key[0] == kind} for rank, made in by_rank.items()}
        calls = {rank: made for rank, made in calls.items() if made}
        if calls:
            lines += _mismatch(calls) + _stuck(comm, calls, by_rank)
    return lines or [f"every call completed on every rank with a record ({ranks_text(by_rank)})"]


def _mismatch(calls: dict[int, dict[str, dict]]) -> list[str]:
    """The first call number at which the ranks' calls differ: one line, or none."""
    for seq in sorted({seq for made in calls.values() for seq in made}, key=_order):
        here = {rank: made[seq] for rank, made in calls.items() if seq in made}
        for field in ("collective", "algorithm", "bytes", "signature"):
            values = {_name(c) if field == "collective" else c.get(field, "") for c in here.values()}
            values.discard("")
            values.discard(-1)
            if len(values) < 2:
                continue
            groups: dict[Any, list[int]] = {}
            for rank, call in sorted(here.items()):
                groups.setdefault(_name(call) if field == "collective" else call.get(field, ""), []).append(rank)
            running = not any(_finished(c) for c in here.values())
            verbs = {key: ("is in" if len(r) == 1 else "are in") if running else "called" for key, r in groups.items()}
            if field == "collective":
                parts = [f"{ranks_text(r)} {verbs[name]} {name} #{seq}" for name, r in groups.items()]
            else:
                unit = " bytes" if field == "bytes" else ""
                parts = [f"{ranks_text(r)} {verbs[value]} {_label(here[r[0]])} with {value}{unit}"
                         for value, r in groups.items() if value not in ("", -1)]
            return [", ".join(parts[:-1]) + f", {parts[-1]} (a mismatch)" if len(parts) > 1 else parts[0]]
    return []


def _stuck(comm: str, calls: dict[int, dict[str, dict]], by_rank: dict) -> list[str]:
    """The first call some rank did not finish: who never entered it, who waits in it and for whom."""
    unfinished = [seq for made in calls.values() for seq, call in made.items() if not _finished(call)]
    if not unfinished:
        return []
    seq = min(unfinished, key=_order)
    here = {rank: made[seq] for rank, made in calls.items() if seq in made}
    some = next(iter(here.values()))
    what = f"{_name(some)} on {comm}"
    lines = []
    for rank in sorted(by_rank):
        if rank in here:
            continue
        before = [s for s in calls.get(rank, {}) if _order(s) < _order(seq)]
        last = calls[rank][max(before, key=_order)] if before else None
        lines.append(f"{ranks_text([rank])} never entered call {seq} ({what}); " +
                     (f"its last call there was {_label(last)} ({'completed' if _finished(last) else 'unfinished'})"
                      if last else "it made no call there before"))
    died = sorted({r for call in here.values() for r in call.get("failed", [])})
    if died:
        learned = [rank for rank, call in here.items() if call.get("error") == "ProcFailedError"]
        lines.append(f"{ranks_text(died)} died; {ranks_text(learned)} learned it in call {seq} ({what})")
    groups: dict[tuple, list[int]] = {}
    for rank, call in sorted(here.items()):
        if not _finished(call):
            groups.setdefault(_state(call), []).append(rank)
    for state, ranks in groups.items():
        verb = state[0].replace("{s}", "s" if len(ranks) == 1 else "")
        lines.append(f"{ranks_text(ranks)} {verb}{state[1]}")
    return lines


def _state(call: dict) -> tuple[str, str]:
    """How a rank stands in an unfinished call: (verb, the rest of the sentence)."""
    rnd, algorithm = call.get("round", -1), call.get("algorithm", "")
    known = rnd is not None and rnd >= 0
    where = (f" in round {rnd}" if known else "") + (f" of {algorithm}" if known and algorithm else "") + \
        (f" in {algorithm}" if algorithm and not known else "")
    peers = call.get("peers") or []
    error = call.get("error")
    if error is None:
        return "wait{s}", f"{where} (still running when the record was written)"
    if error == "CollectiveTimeout":
        return "wait{s}", f"{where} for {ranks_text(peers)}" if peers else f"{where} (timed out)"
    if error == "ProcFailedError":
        return "stopped", f"{where} (ProcFailedError)"
    return "raised", f" {error}{where}" + (f" on a message from {ranks_text(peers)}" if peers else "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mpicoll doctor", description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="the folder MPICOLL_TRACE named (it holds rank-R.json files)")
    ns = parser.parse_args(argv)
    try:
        records = load(ns.folder)
    except ValueError as exc:
        print(f"mpicoll doctor: {exc}", file=sys.stderr)
        return 2
    print("\n".join(explain(records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
