"""The reproducible mode of the summing collectives: the same bits whatever the algorithm, size or placement.

``comm.Allreduce(x, y, op=MPI.SUM, reproducible=True)`` (and ``Reduce``, ``Reduce_scatter``,
``Reduce_scatter_block``, ``Scan``, ``Exscan``; ``MPICOLL_REPRODUCIBLE=1`` for every such call) on
floats runs as two ordinary collectives of the same communicator (see ``docs/reproducible.md``; an
intercommunicator's calls are :mod:`mpicoll.comm.reproducible_inter`'s):

1. an ``Allreduce`` MAX of one int8 per element (:func:`mpicoll.data.fixedpoint.codes`): every rank
   learns the window (the exponent of the largest term, rounded up to the format's step) and which
   elements hold -0.0 only, an infinity or a NaN; one more byte says whether a rank's arguments failed;
2. the collective itself with ``MPI.SUM`` on int64 limbs (:func:`~mpicoll.data.fixedpoint.split`):
   integer addition is exact and associative, so every algorithm, segmentation and order of the ranks
   gives the same integers, which :func:`~mpicoll.data.fixedpoint.combine` rounds once.

A small ``Allreduce`` gathers every contribution and sums them locally; a larger one with ``algorithm="auto"``
exchanges the floats' blocks and sums each block locally (:mod:`mpicoll.comm.reproducible_allreduce`; both are
composed once for every form by :mod:`mpicoll.comm.reproducible_requests`): the same arithmetic, so the same
bits.  Other ops and element
types are exact already (or not sums): the call goes the ordinary way.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.comm.reproducible_allreduce import FLAG_BYTES, GATHER_BYTES, raise_any, scratch
from mpicoll.comm.reproducible_mode import DEFAULT, wanted
from mpicoll.data import fixedpoint as fp
from mpicoll.data import fixedpoint_kernels as kernels
from mpicoll.data.buffers import Buffer, is_in_place, parse

__all__ = ["DEFAULT", "wanted", "run", "always", "METHODS", "GATHER_BYTES", "FLAG_BYTES", "raise_any"]

#: method -> position of ``op`` in its arguments
METHODS = {"Allreduce": 2, "Reduce": 2, "Reduce_scatter_block": 2, "Reduce_scatter": 3, "Scan": 2, "Exscan": 2}


#: the summing methods with their ``I*`` and ``*_init`` forms
SUMMING = frozenset(name for method in METHODS for name in (method, "I" + method[0].lower() + method[1:],
                                                            method + "_init"))


class _Always:
    """``comm`` whose summing collectives default to ``reproducible=True`` (see :func:`always`)."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._comm, name)
        if name in SUMMING:
            return functools.partial(attr, reproducible=True)
        return attr


def always(comm: Any) -> Any:
    """A view of ``comm`` (an ``mpicoll.Comm``) whose ``Allreduce``, ``Reduce``, ``Reduce_scatter(_block)``,
    ``Scan`` and ``Exscan``, and their ``I*`` and ``*_init`` forms, default to ``reproducible=True``; every
    other attribute is ``comm``'s own (the torch backend's ``Options(reproducible=True)``)."""
    return _Always(comm)


@dataclass(slots=True)
class _Call:
    """One rank's side of a reproducible call, from its arguments."""

    values: np.ndarray          # the contribution, as a 1-D real array (complex: real and imaginary parts)
    fmt: fp.Format
    out: np.ndarray | None      # where the result goes (real view), or None where this rank gets none
    first: int                  # the result is elements first .. first + len(out) of the reduced vector
    counts: list[int] | None    # Reduce_scatter(_block): the real elements of each rank's block
    plain: bool = False         # values and out view the caller's arrays (no copy was made)


def accept(comm: Any, method: str, reproducible: bool | None,
           args: tuple) -> tuple[_Call | None, Exception | None] | None:
    """Whether the call ``method(*args)`` of ``comm`` runs in the reproducible mode, and this rank's side of it.

    None where it goes the ordinary way (``reproducible`` false, or None with ``MPICOLL_REPRODUCIBLE`` unset;
    an op other than ``MPI.SUM``; elements that are not float16, bfloat16, float32, float64 or complex: their
    result is exact or not a sum).  Else ``(call, None)``, or ``(None, error)`` where this rank's arguments
    failed a check: it still takes the first step, whose flag makes every rank raise.

    Raises
    ------
    mpicoll.errors.ArgError
        ``reproducible=True`` on more than ``MAX_TERMS`` ranks.
    mpicoll.errors.DatatypeError
        A buffer with a non-contiguous MPI datatype.
    """
    if not wanted(reproducible) or args[METHODS[method]] != MPI.SUM:
        return None
    call = _plain(method, args)
    if call is None:
        try:
            floats = _floats(method, args)
        except RuntimeError:     # buffers.parse packs a non-contiguous datatype only inside an ordinary call
            raise errors.DatatypeError(f"{method}(reproducible=True): a buffer with a non-contiguous MPI "
                                       "datatype is not supported") from None
        if not floats:
            return None
    if comm.Get_size() > fp.MAX_TERMS:
        raise errors.ArgError(f"reproducible=True sums at most {fp.MAX_TERMS} ranks' terms, "
                              f"the communicator has {comm.Get_size()}")
    if call is not None:
        return call, None
    try:
        return _local(comm, method, args), None
    except (ValueError, TypeError) as exc:
        return None, exc


def run(comm: Any, method: str, algorithm: str, args: tuple, call: _Call | None, failure: Exception | None) -> None:
    """Run the blocking collective ``method(*args)`` of ``comm`` (an ``mpicoll.Comm``) in the reproducible mode,
    as :func:`accept` took it (``call``, ``failure``), in the two steps (a small ``Allreduce``, and a larger one
    with ``algorithm="auto"``, are :func:`mpicoll.comm.reproducible_requests.run`'s)."""
    size = elements(args)[0] if call is None else call.values.shape[0]
    rows = None if call is None else summed_rows(method, call, comm.Get_rank())
    most = 0 if call is None else 8 * (call.fmt.limbs + 1) * (size + (rows or 0))   # the limbs, and a tally
    arena = scratch(comm, _align(size + 1) + most)
    head = arena[:size + 1].view(np.int8)
    if call is not None:
        kernels.codes(call.values, call.fmt, out=head[:size])
    head[size] = failure is not None
    comm.Allreduce(MPI.IN_PLACE, head, op=MPI.MAX, algorithm=algorithm if method == "Allreduce" else "auto",
                   reproducible=False)
    raise_any(method, failure, head[size])
    code = head[:size]
    cols = call.fmt.limbs + (method in PREFIXES and size > 0 and int(code.max()) >= fp.INF)
    limbs, summed = carve(arena[_align(size + 1):], size, rows, cols)
    kernels.encode(call.values, code, call.fmt, out=limbs)
    getattr(comm, method)(*sum_args(method, args, call, limbs, summed), algorithm=algorithm, reproducible=False)
    if summed is not None and call.out is not None:
        part = slice(call.first, call.first + call.out.shape[0])
        kernels.decode(summed, code[part], call.fmt, comm.Get_size(), out=call.out)


def _align(nbytes: int) -> int:
    """``nbytes`` rounded up to a cache line (the next buffer of an arena starts there)."""
    return -(-nbytes // 64) * 64


#: the methods whose results are sums of some terms only (prefixes): the counts of inf and NaN need a column
#: of their own there (fixedpoint.encode); a sum of every term keeps them in limb 0 of the elements that have any
PREFIXES = ("Scan", "Exscan")


def summed_rows(method: str, call: _Call, rank: int) -> int | None:
    """How many elements' summed limbs this rank receives in a buffer of its own (besides its limbs); None
    where it receives none (a Reduce off the root)."""
    if method == "Reduce" and call.out is None:
        return None
    if method in ("Reduce_scatter_block", "Reduce_scatter"):
        return call.counts[rank]
    return call.values.shape[0]      # (Exscan's rank 0 too: a receive buffer it leaves untouched)


def carve(space: np.ndarray, size: int, rows: int | None, cols: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The limbs (``size`` rows of ``cols``) and the summed limbs (``rows`` of them, None where this rank gets no
    result) as int64 views of ``space`` (bytes, 8-aligned).  An Allreduce too sums into a buffer of its own:
    on the development machine, out of place ran faster than in place (2.1 against 9.4 ms for 16 MiB)."""
    limbs = space[:8 * size * cols].view(np.int64).reshape(size, cols)
    if rows is None:
        return limbs, None
    summed = space[8 * size * cols:8 * (size + rows) * cols].view(np.int64).reshape(rows, cols)
    return limbs, summed


def sum_args(method: str, args: tuple, call: _Call, limbs: np.ndarray, summed: np.ndarray | None) -> tuple:
    """The arguments of the ordinary collective ``method`` that sums the limbs (``MPI.SUM`` on int64)."""
    flat = limbs.reshape(-1)
    if method == "Reduce":
        return flat, summed, MPI.SUM, args[3]
    if method == "Reduce_scatter":
        return flat, summed, [c * limbs.shape[1] for c in call.counts], MPI.SUM
    return flat, summed, MPI.SUM


def _plain(method: str, args: tuple) -> _Call | None:
    """The usual ``Allreduce(x, y)``'s call without parsing: two C-contiguous NumPy arrays of one real float
    dtype and length, ``y`` writable (or ``x`` ``MPI.IN_PLACE``: then ``y`` is the contribution too); None for
    any other arguments (:func:`_local` parses and checks them)."""
    if method != "Allreduce":
        return None
    send, recv = args[0], args[1]
    if send is MPI.IN_PLACE:
        send = recv
    if type(send) is not np.ndarray or type(recv) is not np.ndarray or send.dtype != recv.dtype \
            or not send.dtype.isnative or send.size != recv.size \
            or not (send.flags.c_contiguous and recv.flags.c_contiguous and recv.flags.writeable):
        return None
    fmt = fp.format_of(send.dtype)
    if fmt is None:
        return None
    return _Call(send if send.ndim == 1 else send.reshape(-1), fmt, recv if recv.ndim == 1 else recv.reshape(-1), 0,
                 None, True)


def elements(args: tuple) -> tuple[int, int]:
    """The real elements of a contribution and their size, for a rank whose arguments failed a check
    (raises where the contribution itself cannot be read: then no rank can know its length)."""
    buf = parse(args[1] if is_in_place(args[0]) else args[0], "sendbuf")
    complex_ = buf.dtype.kind == "c"
    return buf.count * (2 if complex_ else 1), buf.dtype.itemsize // (2 if complex_ else 1)


def _floats(method: str, args: tuple) -> bool:
    """Whether the call's elements are floats the mode sums (read from a buffer that must be there)."""
    spec = args[1] if is_in_place(args[0]) else args[0]
    try:
        dtype = parse(spec, "sendbuf").dtype
    except (ValueError, TypeError):
        return method in ("Allreduce", "Scan", "Exscan", "Reduce_scatter_block", "Reduce_scatter") and \
            _floats_of(args[1])
    return real_format(dtype) is not None


def _floats_of(spec: Any) -> bool:
    try:
        return real_format(parse(spec, "recvbuf").dtype) is not None
    except (ValueError, TypeError):
        return False


def real_format(dtype: np.dtype) -> fp.Format | None:
    if dtype.kind == "c":
        return fp.format_of(np.dtype(dtype.char.lower())) if dtype.char in "FD" else None
    return fp.format_of(dtype)


def _real(buf: Buffer) -> np.ndarray:
    """A host buffer's elements as a 1-D real array (a view)."""
    if buf.xp is not np:
        raise errors.BufferTypeError("reproducible=True needs host (NumPy) buffers")
    array = buf.array
    if array.dtype.kind == "c":
        array = array.view(np.dtype(array.dtype.char.lower()))
    return array


def _local(comm: Any, method: str, args: tuple) -> _Call:
    """Parse and check this rank's arguments (no message)."""
    sendbuf, recvbuf = args[0], args[1]
    rank, p = comm.Get_rank(), comm.Get_size()
    in_place = is_in_place(sendbuf)
    root = args[3] if method == "Reduce" else None
    receives = method != "Reduce" or rank == root
    recv = parse(recvbuf, "recvbuf", writable=True) if receives else None
    if recv is not None and not recv.writable:
        raise errors.BufferValueError(f"{method}: recvbuf is read-only")
    send = recv if in_place else parse(sendbuf, "sendbuf")
    if in_place and not receives:
        raise errors.BufferValueError(f"{method}: MPI.IN_PLACE is for the root only")
    fmt = real_format(send.dtype)
    if fmt is None or (recv is not None and recv.dtype != send.dtype):
        raise errors.TypeMismatchError(f"{method}: sendbuf holds {send.dtype}, recvbuf "
                                       f"{None if recv is None else recv.dtype}")
    if not send.dtype.isnative:      # (the rows travel as bytes; mpi4py refuses such buffers too)
        raise errors.BufferTypeError(f"{method}(reproducible=True): {send.dtype} is not in native byte order")
    values = _real(send)
    factor = 2 if send.dtype.kind == "c" else 1
    out = None if recv is None else _real(recv)
    counts = None
    if method in ("Reduce_scatter_block", "Reduce_scatter"):
        if method == "Reduce_scatter_block":
            block = (recv.count // p) if in_place else recv.count
            counts = [block] * p
        else:
            recvcounts = args[2]
            if recvcounts is None:
                raise errors.CountTypeError("recvcounts: Reduce_scatter(reproducible=True) needs explicit recvcounts")
            counts = [int(c) for c in recvcounts]
        counts = [c * factor for c in counts]
        if sum(counts) != values.shape[0]:
            raise errors.CountError(f"{method}: sendbuf has {values.shape[0] // factor} elements, the blocks "
                                    f"{sum(counts) // factor}")
        first = sum(counts[:rank])
        out = out[:counts[rank]]
        return _Call(values, fmt, out, first, counts)
    if out is not None and out.shape[0] < values.shape[0]:
        raise errors.TruncateError(f"{method}: recvbuf has {out.shape[0] // factor} elements, "
                                   f"the result {values.shape[0] // factor}")
    if method == "Exscan" and rank == 0:
        out = None      # MPI leaves rank 0's recvbuf undefined: untouched
    return _Call(values, fmt, None if out is None else out[:values.shape[0]], 0, None)
