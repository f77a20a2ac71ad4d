"""Debug mode (``MPICOLL_DEBUG``): the ranks agree on a call before any message, and calls are logged.

``MPICOLL_DEBUG=1``: before a collective sends anything, every rank tells every
other (one ``allgather`` of mpi4py) what it was called with, as labelled fields
(collective, count in elements, dtype, op, root, algorithm), and whether its own
argument checks passed.  Then every rank reaches the same verdict:

- a rank's arguments were rejected: every rank raises :class:`ArgumentError`
  naming the rank(s) and their errors (the rank at fault chains its own error);
- the ranks disagree: every rank raises :class:`MismatchError` listing, for each
  field that differs, which ranks passed which value.

``MPICOLL_DEBUG=2`` does the same and also logs every call to stderr, one line
per rank, like ``NCCL_DEBUG=INFO``: algorithm, sizes and time taken.

Received messages are also size-checked in debug mode (see
:mod:`mpicoll.engine.watchdog`).
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.errors import ArgumentError, MismatchError

__all__ = ["agree", "log", "FIELDS"]

# the labelled fields of a call's signature, in the order messages list them
FIELDS = ("collective", "count", "counts", "dtype", "op", "root", "algorithm")


def agree(comm: Any, collective: str, prepare: Callable[[], Any], timeout: float | None = None) -> Any:
    """Run ``prepare()`` (which checks the arguments), then make every rank agree on the outcome.

    ``comm`` is the call's :class:`~mpicoll.program.state.Preparation`, whose
    ``signature`` ``prepare()`` fills (:func:`mpicoll.calls.debug_check`).
    Returns ``prepare()``'s result when every rank's arguments passed and match;
    otherwise every rank raises the same :class:`ArgumentError` or :class:`MismatchError`.
    """
    error: BaseException | None = None
    try:
        result = prepare()
    except Exception as exc:      # the verdict below re-raises it, on every rank
        result, error = None, exc
    mine = (comm.signature, None if error is None else f"{type(error).__name__}: {error}")
    _verdict(collective, _allgather(comm.private, mine, collective, timeout), error)
    return result


def _allgather(comm: Any, obj: Any, collective: str, timeout: float | None) -> list:
    """mpi4py's ``allgather`` of a Python object; with a timeout, nonblocking and watched."""
    if timeout is None:
        return comm.allgather(obj)
    from mpicoll.engine.watchdog import wait_mpi  # only with a timeout: the watchdog stays out of the default path

    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    p, rank = comm.Get_size(), comm.Get_rank()
    others = [r for r in range(p) if r != rank]
    sizes = np.zeros(p, np.int64)
    what = f"{collective} (debug: exchanging the call's arguments)"
    wait_mpi(comm.Iallgather(np.array([data.size], np.int64), sizes), what, timeout, others, rank)
    displs = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    out = np.empty(int(sizes.sum()), np.uint8)
    wait_mpi(comm.Iallgatherv(data, [out, (sizes, displs), MPI.BYTE]), what, timeout, others, rank)
    return [pickle.loads(out[d:d + n].tobytes()) for d, n in zip(displs, sizes)]


def _verdict(collective: str, everyone: list, error: BaseException | None) -> None:
    failed = {rank: text for rank, (_, text) in enumerate(everyone) if text is not None}
    if failed:
        ranks = sorted(failed)
        text = "; ".join(f"rank {r}: {failed[r]}" for r in ranks)
        raise ArgumentError(f"{collective}: rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} "
                            f"rejected {'their' if len(ranks) > 1 else 'its'} arguments, so no rank ran the call "
                            f"({text})", collective, failed) from error
    signatures = [sig or {} for sig, _ in everyone]
    if all(sig == signatures[0] for sig in signatures):
        return
    fields: dict[str, dict[Any, list[int]]] = {}
    for name in FIELDS + tuple(sorted({k for sig in signatures for k in sig} - set(FIELDS))):
        values: dict[Any, list[int]] = {}
        for rank, sig in enumerate(signatures):
            values.setdefault(sig.get(name, "-"), []).append(rank)
        if len(values) > 1:
            fields[name] = values
    parts = []
    for name, values in fields.items():
        label = {"count": "count (elements)", "counts": "counts (elements)"}.get(name, name)
        parts.append(f"{label}: " + ", ".join(f"{_ranks(r)} {v}" for v, r in values.items()))
    raise MismatchError(f"{collective}: the ranks disagree on the call's arguments: " + "; ".join(parts),
                        collective, fields)


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {','.join(map(str, ranks))}"


def log(comm: Any, plan: Any, collective: str, seconds: float) -> None:
    """``MPICOLL_DEBUG=2``: one line per rank per call: algorithm, sizes and time."""
    if plan is None:
        what = "nothing to do (count 0)"
    else:
        sched = plan.schedule
        data = plan.arrays.get("recv", plan.arrays.get("send"))
        scratch = plan.scratch_bytes
        what = (f"algorithm={sched.algorithm} rounds={len(sched.rounds)} "
                f"dtype={getattr(data, 'dtype', '?')} elements={getattr(data, 'size', '?')} "
                f"bytes={getattr(data, 'nbytes', '?')} scratch={scratch}B")
    sys.stderr.write(f"mpicoll INFO rank {comm.rank}/{comm.size}: {collective} {what} "
                     f"time={seconds * 1e6:.1f}us\n")
