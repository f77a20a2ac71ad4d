"""The blocking reproducible ``Allreduce``'s own paths, and the plans that run its usual calls without parsing.

:mod:`mpicoll.comm.reproducible` sums most calls in two steps (the codes' MAX, then the limbs' sum). An
``Allreduce`` has two shorter paths with the same arithmetic, so the same bits:

- **gathered** (all contributions together at most ``GATHER_BYTES``): one ``Allgather`` of every rank's
  contribution with a byte saying whether its arguments failed, then every rank sums the table itself
  (:func:`gathered`);
- **scattered** (larger, ``algorithm="auto"``): a byte's MAX, an ``Alltoallv`` of the floats' blocks, each
  rank sums its block's table, an ``Allgatherv`` of the results (composed once for every form:
  :class:`mpicoll.comm.reproducible_requests.RequestStages`, whose :func:`blocks` are these).

A gathered call with the usual arguments (two C-contiguous NumPy arrays of float64 or float32 of one length,
the result writable, this rank's arguments accepted) makes a *plan* for its communicator, dtype and length:
the row and table the exchange takes, reused by every later such call (:func:`run_planned`), so that it
runs with no parsing and no allocation, and the exchange finds its own plan cached (the same buffers).
The plans are kept in the communicator's state (``CommState.reproducible_plans``, with the request forms'
stages: :mod:`mpicoll.comm.reproducible_requests`); a gathered call's hit runs from C where the kernels are
built (``Gathered`` and ``run_planned``, ``mpicoll/data/_gathered.c``; :class:`_Gathered` is their definition).
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

__all__ = ["GATHER_BYTES", "FLAG_BYTES", "PLAN_BYTES", "gathers", "gathered", "gathered_plan", "run_planned",
           "raise_any", "scratch", "blocks", "keep", "kept_key", "borrow"]

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
_PLANNED = (np.dtype(np.float64), np.dtype(np.float32))     # the dtypes whose calls make plans


def raise_any(method: str, failure: Exception | None, flagged: Any) -> None:
    """After the first step: this rank's own error, or ArgumentError where another rank's arguments failed."""
    if failure is not None:
        raise failure
    if flagged:
        raise errors.ArgumentError(f"{method}(reproducible=True): another rank's arguments were rejected",
                                   method)


class _Gathered:
    """A small Allreduce's plan: this rank's row (the contribution, then its flag bytes: 0 unless :meth:`fail`)
    and the table of every rank's row; :meth:`run` is :meth:`fill`, the ``Allgather`` of the rows, :meth:`sum`.
    The definition of the compiled ``Gathered`` (``_gathered.c``), and the plan of every call that one does not
    take (another dtype, a result not contiguous, a rank whose arguments failed: uint8 rows)."""

    __slots__ = ("p", "n", "row", "values", "table")

    def __init__(self, row: np.ndarray, table: np.ndarray, p: int, dtype: np.dtype, n: int) -> None:
        self.p, self.n, self.row, self.table = p, n, row, table
        self.values = row[:n * dtype.itemsize].view(dtype)

    def fill(self, send: np.ndarray) -> None:
        self.values[...] = send.reshape(-1)

    def fail(self) -> None:
        """This rank's arguments failed: its flag byte says so (every rank raises at :meth:`sum`)."""
        self.row[self.values.nbytes] = 1

    def sum(self, recv: np.ndarray) -> None:
        finish(self, recv, -1 if any(self.table[:, self.values.nbytes].tobytes()) else 1)

    def run(self, comm: Any, send: np.ndarray, recv: np.ndarray) -> None:
        self.fill(send)
        run_blocking(comm, "Allgather", "auto", self.row, self.table)     # (comm.Allgather, one frame less)
        self.sum(recv)


def finish(plan: Any, recv: np.ndarray, flagged: int) -> None:
    """A gathered plan's table summed the careful way: ``flagged`` -1 where a rank's arguments failed (its
    flag byte is set: every rank raises), else the columns summed by :func:`kernels.sum_rows`, which rounds those
    the compiled pass flagged with :func:`mpicoll.data.fixedpoint.combine`."""
    raise_any("Allreduce", None, flagged < 0)
    if plan.n:
        kernels.sum_rows(plan.table.view(recv.dtype), plan.n, out=recv.reshape(-1))


def gathered_plan(p: int, call: Any, nbytes: int, compiled: bool) -> Any:
    """The plan of a gathered call of ``p`` ranks whose contribution takes ``nbytes``: the compiled ``Gathered``
    where asked for and built (float64 or float32, at least one element: the caller checked that the result is
    a C-contiguous array of that dtype), else :class:`_Gathered` (uint8 rows where ``call`` is None)."""
    width = nbytes + FLAG_BYTES
    row, table = np.zeros(width, np.uint8), np.empty((p, width), np.uint8)
    if call is None:
        return _Gathered(row, table, p, np.dtype(np.uint8), nbytes)
    dtype, n = call.values.dtype, call.values.shape[0]
    if compiled and kernels.KERNELS is not None and dtype in _PLANNED and n:
        return kernels.KERNELS.Gathered(row, table, p, dtype.char, n, kernels.params(call.fmt))
    return _Gathered(row, table, p, dtype, n)


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
    calls this first in the reproducible mode) by a plan made by an earlier call of the same communicator, dtype
    and length; False (nothing done) where there is none, the arguments are not the usual ones, or
    ``reproducible`` is None and ``MPICOLL_REPRODUCIBLE`` not yet read (then
    :func:`mpicoll.comm.reproducible_requests.run` takes it; an intercommunicator's state has no plans).  A
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
    plan = plans.get((send.dtype.char, send.size))
    if plan is None:
        return _run_kept(plans, given, recv, op, algorithm)
    if send.dtype not in _PLANNED \
            or recv.dtype != send.dtype or recv.size != send.size or not send.flags.c_contiguous:
        return False
    flags = recv.flags
    if not (flags.c_contiguous and flags.writeable):
        return False
    plan.run(comm, send if send.ndim == 1 else send.reshape(-1), recv if recv.ndim == 1 else recv.reshape(-1))
    return True


def _compiled_run_planned() -> Any:
    """``_fixedpoint.run_planned`` where the kernels are compiled (it runs a Gathered plan's
    hit itself and hands every other call to :func:`_run_planned`), else :func:`_run_planned`."""
    compiled = kernels.KERNELS
    if compiled is None:
        return _run_planned
    compiled.init_planned(run_blocking, finish, _run_planned, np.ndarray, MPI.SUM, MPI.IN_PLACE, CommState, DEFAULT)
    return compiled.run_planned


#: ``run_planned(comm, algorithm, reproducible, send, recv, op)``: what ``comm.Allreduce`` calls first in the
#: reproducible mode
run_planned = _compiled_run_planned()


def _plan(comm: Any, call: Any, failure: Exception | None) -> Any:
    """The plan of this gathered call, made and kept, where it has the usual arguments; else None."""
    if failure is not None or call.values.dtype not in _PLANNED or call.out.dtype != call.values.dtype \
            or not call.out.flags.c_contiguous or call.values.shape[0] == 0:
        return None
    dtype, n = call.values.dtype, call.values.shape[0]
    plan = gathered_plan(comm.Get_size(), call, n * dtype.itemsize, True)
    keep(comm, (dtype.char, n), plan)
    return plan


def keep(comm: Any, key: Any, plan: Any) -> None:
    """Keep ``plan`` under ``key`` in ``comm``'s reproducible plans (``CommState.reproducible``: the newest
    ``REPRODUCIBLE_PLANS``); an intercommunicator's state keeps none."""
    plans = getattr(comm._state, "reproducible", None)
    if plans is not None:
        plans.keep(key, plan)


def gathered(comm: Any, call: Any, failure: Exception | None, nbytes: int) -> None:
    """A small Allreduce in one step: every rank gathers every contribution (and, in the ``FLAG_BYTES`` after
    it, a byte saying whether its arguments failed) and sums them itself with the same arithmetic
    (:func:`mpicoll.data.fixedpoint.sum_rows`), so the bits are those of the two steps, in one latency
    instead of two.  ``call``: this rank's side (:class:`mpicoll.comm.reproducible._Call`), None where its
    arguments failed (``failure``)."""
    plan = _plan(comm, call, failure) or gathered_plan(comm.Get_size(), call, nbytes, False)
    if failure is None:
        return plan.run(comm, call.values, call.out)
    plan.fail()
    run_blocking(comm, "Allgather", "auto", plan.row, plan.table)
    raise failure


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
