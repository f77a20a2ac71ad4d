"""The reproducible ``Allreduce``'s two shorter paths, and the kept stages that run its usual calls without parsing.

:mod:`mpicoll.comm.reproducible` sums most calls in two steps (the codes' MAX, then the limbs' sum). An
``Allreduce`` has two shorter paths with the same arithmetic, so the same bits, each composed once for
every form by :class:`mpicoll.comm.reproducible_requests.RequestStages`:

- **gathered** (all contributions together at most ``GATHER_BYTES``): one ``Allgather`` of every rank's
  *row* (its contribution, then a byte saying whether its arguments failed) into a *table*, then every
  rank sums the table itself (:func:`sum_table`);
- **scattered** (larger, ``algorithm="auto"``): a byte's MAX, an ``Alltoallv`` of the floats' blocks
  (:func:`blocks`), each rank sums its block's table, an ``Allgatherv`` of the results.

A blocking gathered call with the usual arguments (two C-contiguous NumPy arrays of one float dtype and
length, the result writable, this rank's arguments accepted) keeps its stages in the communicator's state
(``CommState.reproducible``, bounded, with the request forms' stages), under :func:`gathered_key`: their row
and table serve every later such call (:func:`run_gathered`: the contribution copied into the row, the
``Allgather``, whose plan is cached as its buffers are the same, and the sum), which ``Comm.Allreduce`` finds
before parsing anything (:data:`run_planned`).  A larger call's composed plan is kept for its arrays
(:func:`kept_key`) and found the same way.  Where the kernels are compiled, the gathered hit runs from C
(``run_planned`` in ``mpicoll/data/_gathered.c``: the lookup, the copy and the sum, around the same blocking
``Allgather``; :func:`_run_planned` is its definition).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.comm.dispatch import run_blocking
from mpicoll.comm.reproducible_mode import DEFAULT
from mpicoll.data import fixedpoint_kernels as kernels
from mpicoll.program.callkey import call_key
from mpicoll.program.state import CommState

__all__ = ["GATHER_BYTES", "FLAG_BYTES", "PLAN_BYTES", "gathers", "sum_table", "sum_gathered", "gathered_key",
           "run_gathered", "run_planned", "raise_any", "scratch", "blocks", "keep", "kept_key", "borrow"]

#: an Allreduce whose contributions together take at most this many bytes gathers them and sums locally (at
#: 2 processes of 16 KiB, the gathered call took 10.5 us against the scattered one's 14.0; of 32 KiB, 19.1 us
#: against 17.1: the gathered call sums every rank's table, p times the scattered one's block)
GATHER_BYTES = 32768


def gathers(nbytes: int, p: int) -> bool:
    """Whether an Allreduce of ``nbytes`` of contribution on ``p`` ranks gathers every row (else the larger
    paths: scattered, or the two steps)."""
    return nbytes * p <= GATHER_BYTES


#: a gathered row's tail: its first byte says whether the rank's arguments failed (8 keep the rows aligned)
FLAG_BYTES = 8
#: a scattered call's composed plan is kept (by its arrays' addresses) up to this many bytes of contribution (a
#: larger call's Python is a small part of its time: it is composed every time)
PLAN_BYTES = 1 << 20


def raise_any(method: str, failure: Exception | None, flagged: Any) -> None:
    """After the first step: this rank's own error, or ArgumentError where another rank's arguments failed."""
    if failure is not None:
        raise failure
    if flagged:
        raise errors.ArgumentError(f"{method}(reproducible=True): another rank's arguments were rejected",
                                   method)


def sum_table(table: np.ndarray, nbytes: int, out: np.ndarray, flagged: bool | None = None) -> None:
    """A gathered call's ``table`` (``p`` rows of ``nbytes`` of contribution and ``FLAG_BYTES``) summed per
    column into ``out`` (1-D, the contribution's dtype) by :func:`kernels.sum_rows`, which rounds the columns
    the compiled pass flags with :func:`mpicoll.data.fixedpoint.combine`; every rank raises
    :class:`~mpicoll.errors.ArgumentError` where some rank's flag byte is set (``flagged``: whether one is,
    where the caller read them)."""
    if flagged is None:
        flagged = any(table[:, nbytes].tobytes())
    raise_any("Allreduce", None, flagged)
    if nbytes:
        kernels.sum_rows(table.view(out.dtype), out.shape[0], out=out)


def sum_gathered(stages: Any, out: np.ndarray) -> None:
    """:func:`sum_table` of gathered ``stages`` into ``out``: by the compiled kernel (``sum_hit``) where the
    stages have a hit (a call with the usual arguments) and the kernels are built."""
    if stages.hit is not None and kernels.KERNELS is not None:
        kernels.KERNELS.sum_hit(stages.hit, out)
    else:
        sum_table(stages.table, stages.nbytes, out)


def gathered_key(dtype: np.dtype, n: int) -> tuple[str, int]:
    """The key a blocking gathered call's stages are kept under: its contribution's dtype and length (what the
    compiled hit builds from the buffer's format: ``"d"`` or ``"f"``)."""
    return dtype.char, n


def run_gathered(comm: Any, stages: Any, send: np.ndarray | None, recv: np.ndarray | None) -> None:
    """A small Allreduce's blocking form on gathered ``stages``
    (:class:`~mpicoll.comm.reproducible_requests.RequestStages`), ``send`` and ``recv`` 1-D of its dtype and
    length: the contribution copied into the stages' row, the rows gathered (``comm.Allgather``, mpicoll's own
    blocking call: the same row and table every time, so a kept call's plan is a cache hit), the table summed
    into ``recv``.  ``send`` and ``recv`` None: this rank's arguments failed, its row says so and it sums
    nothing (the caller raises its error; every other rank raises at its sum).  The compiled ``run_planned``
    runs these three steps in C."""
    stages.put(send)
    run_blocking(comm, "Allgather", "auto", stages.row, stages.table)     # (comm.Allgather, one frame less)
    if recv is not None:
        sum_gathered(stages, recv)


def blocks(n: int, p: int) -> tuple[list[int], list[int]]:
    """The counts and displacements of the ``p`` blocks of ``n`` elements: block ``j`` holds ``n // p``, one
    more for ``j < n % p``, so that they cover the ``n`` elements once, in order."""
    counts = [n // p + (j < n % p) for j in range(p)]
    displs = [0] * p
    for j in range(1, p):
        displs[j] = displs[j - 1] + counts[j - 1]
    return counts, displs


def kept_key(method: str, args: tuple, algorithm: str) -> tuple:
    """The key a larger call's composed plan is kept under for its arrays (``key[1]`` None: a call the key
    cannot describe): :class:`mpicoll.comm.reproducible_requests.RequestStages`, kept by its ``_stages``."""
    return ("composed", call_key(method, args, algorithm, ()))


def borrow(plans: dict, key: Any) -> Any:
    """The composed stages kept under ``key``, their plan marked lent (the cached plans' one rule: a plan serves
    one call at a time), or None where there are none or their plan is lent already."""
    stages = plans.get(key)
    if stages is None or stages.plan().lent:
        return None
    stages.plan().lent = True
    return stages


def _run_kept(plans: dict, send: Any, recv: Any, op: Any, algorithm: str) -> bool:
    """A larger call's composed plan kept for these arrays, run blocking (its ``run``), where no request holds
    it; False (nothing done) where there is none."""
    key = kept_key("Allreduce", (send, recv, op), algorithm)
    stages = borrow(plans, key) if key[1] is not None else None
    if stages is None:
        return False
    stages.run()
    return True


def _run_planned(comm: Any, algorithm: str, reproducible: bool | None, send: Any, recv: Any, op: Any) -> bool:
    """Run ``comm.Allreduce(send, recv, op, algorithm=algorithm, reproducible=reproducible)`` (``comm``'s method
    calls this first in the reproducible mode) by the gathered stages kept by an earlier call of the same
    communicator, dtype and length (:func:`run_gathered`); False (nothing done) where there are none, the
    arguments are not the usual ones, or ``reproducible`` is None and ``MPICOLL_REPRODUCIBLE`` not yet read
    (then :func:`mpicoll.comm.reproducible_requests.run` takes it; an intercommunicator's state has none).  A
    larger call runs the composed plan kept for its arrays where there is one (:func:`_run_kept`).  ``send``
    ``MPI.IN_PLACE``: the contribution is ``recv``."""
    given = send
    if send is MPI.IN_PLACE:
        send = recv
    if not (DEFAULT[0] is True if reproducible is None else reproducible) or type(send) is not np.ndarray \
            or type(recv) is not np.ndarray or op is not MPI.SUM:
        return False
    plans = getattr(comm._state, "reproducible_plans", None)
    if plans is None:
        return False
    stages = plans.get(gathered_key(send.dtype, send.size))
    if stages is None:
        return _run_kept(plans, given, recv, op, algorithm)
    if recv.dtype != send.dtype or not send.dtype.isnative or recv.size != send.size \
            or not send.flags.c_contiguous:
        return False
    flags = recv.flags
    if not (flags.c_contiguous and flags.writeable):
        return False
    run_gathered(comm, stages, send if send.ndim == 1 else send.reshape(-1),
                 recv if recv.ndim == 1 else recv.reshape(-1))
    return True


def _compiled_run_planned() -> Any:
    """``_fixedpoint.run_planned`` where the kernels are compiled (it runs a gathered call's hit itself and hands
    every other call to :func:`_run_planned`), else :func:`_run_planned`."""
    compiled = kernels.KERNELS
    if compiled is None:
        return _run_planned
    compiled.init_planned(run_blocking, sum_table, _run_planned, np.ndarray, MPI.SUM, MPI.IN_PLACE, CommState, DEFAULT)
    return compiled.run_planned


#: ``run_planned(comm, algorithm, reproducible, send, recv, op)``: what ``comm.Allreduce`` calls first in the
#: reproducible mode
run_planned = _compiled_run_planned()


def keep(comm: Any, key: Any, plan: Any) -> None:
    """Keep ``plan`` under ``key`` in ``comm``'s reproducible plans (``CommState.reproducible``: the newest
    ``REPRODUCIBLE_PLANS``); an intercommunicator's state keeps none."""
    plans = getattr(comm._state, "reproducible", None)
    if plans is not None:
        plans.keep(key, plan)


#: per communicator (its state): the scratch of its blocking reproducible calls (codes, limbs, summed limbs),
#: grown to the largest call up to SCRATCH_BYTES and reused, so that the limbs' collectives find their plans
#: cached (the same buffers) and the memory is not faulted in again on every call; larger calls get their own
SCRATCH_BYTES = 1 << 28
_SCRATCH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def scratch(comm: Any, nbytes: int) -> np.ndarray:
    """``nbytes`` of scratch (uint8, 64-byte aligned) for a blocking call of ``comm``."""
    state = comm._state
    space = _SCRATCH.get(state)
    if space is not None and space.shape[0] >= nbytes:
        return space[:nbytes]
    raw = np.empty(nbytes + 64, np.uint8)
    space = raw[-raw.ctypes.data % 64:][:nbytes]
    if nbytes <= SCRATCH_BYTES:
        _SCRATCH[state] = space
    return space
