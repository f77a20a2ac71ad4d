"""``mpicoll.ReproducibleSum``: a local sum whose bits depend only on the multiset of what was added.

A program that sums N vectors split over p ranks (each rank adds its share, then the ranks combine
their partial sums) gets bits that depend on p and the split when it adds floats.  This accumulator
holds each element as integers on a *fixed* grid of exponent bins (ReproBLAS's idea): bin ``b`` holds
the bits of a value in ``[2**(q + W*b), 2**(q + W*(b+1)))`` (``q``: the dtype's smallest subnormal
exponent, ``W = BIN_BITS``), each value's digit of each bin is fixed by the value alone, and the
accumulator keeps the sums of the digits of the ``K`` bins below the highest bin any added value
reached.  Adding a larger value later only drops bins that the final window drops anyway, so the
state after any sequence of adds, merges and :meth:`ReproducibleSum.allreduce` is the same function
of the multiset of added values; :meth:`ReproducibleSum.value` rounds it once.

The accuracy (proved in ``docs/reproducible.md``): with ``n`` values added, ``S`` their exact sum and
``u`` the dtype's unit roundoff, ``|value - S| <= u*|S| + n * 2**(1 - W*(K-1)) * max|x_i|``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicoll.data import fixedpoint as fp

__all__ = ["ReproducibleSum", "BIN_BITS", "MAX_ADDS"]

#: bits per bin (and per limb); 63 - BIN_BITS bits of headroom
BIN_BITS = 32
#: the most values one element may sum, over every rank (2**30)
MAX_ADDS = 1 << 30
_BINS = {"float64": 3}     # limbs kept (K); 2 for the narrower types
EMPTY, NEG_ZERO = -2, -1   # codes below the bins: nothing added, only -0.0 added
INF, NAN = 1 << 20, (1 << 20) + 1


class ReproducibleSum:
    """An array of sums whose result depends only on the multiset of the added values.

    Parameters
    ----------
    shape : int or tuple of int
        The shape of the values added (each :meth:`add` broadcasts to it).
    dtype : dtype-like, default float64
        float64, float32, float16, ``ml_dtypes.bfloat16`` or complex64/complex128 (componentwise).

    Examples
    --------
    >>> import numpy as np
    >>> acc = ReproducibleSum(3)
    >>> for v in ([1e16, 1.0, -1.0], [1.0, 2.0, 1.0], [-1e16, 0.0, 0.0]):
    ...     acc.add(np.array(v))
    >>> acc.value()
    array([1., 3., 0.])

    With MPI, every rank adds its share, then ``acc.allreduce(comm)`` (collective) leaves every rank
    the sum of all shares: the same bits for every number of ranks and every split.
    """

    def __init__(self, shape: int | tuple[int, ...], dtype: Any = np.float64) -> None:
        self.dtype = np.dtype(dtype)
        self.shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        real = self.dtype
        if self.dtype.kind == "c":
            real = np.dtype(self.dtype.char.lower()) if self.dtype.char in "FD" else None
        fmt = None if real is None else fp.format_of(real)
        if fmt is None:
            raise TypeError(f"ReproducibleSum sums float16, bfloat16, float32, float64 and complex, "
                            f"not {self.dtype}")
        self._fmt = fmt
        self._real = real
        self._k = _BINS.get(fmt.name, 2)
        inner = self.shape + ((2,) if self.dtype.kind == "c" else ())
        self._code = np.full(inner, EMPTY, np.int32)
        self._limbs = np.zeros(inner + (self._k,), np.int64)
        self.count = 0   # values added to each element (over every rank, after allreduce)

    # -- adding ----------------------------------------------------------------------------------------

    def add(self, values: Any) -> ReproducibleSum:
        """Add ``values`` (converted to the dtype first, broadcast to the shape) to every element."""
        self._check_room(1)
        v = np.broadcast_to(np.asarray(values).astype(self.dtype, copy=False), self.shape)
        if self.dtype.kind == "c":
            v = np.stack([v.real, v.imag], axis=-1)
        w = np.ascontiguousarray(v, dtype=self._fmt.work)
        code, limbs = self._of_values(w)
        self._merge_state(code, limbs)
        self.count += 1
        return self

    def merge(self, other: ReproducibleSum) -> ReproducibleSum:
        """Add ``other``'s values (same shape and dtype) to this accumulator's."""
        if other.shape != self.shape or other.dtype != self.dtype:
            raise ValueError(f"cannot merge a {other.dtype}{other.shape} sum into a {self.dtype}{self.shape} one")
        self._check_room(other.count)
        self._merge_state(other._code, other._limbs)
        self.count += other.count
        return self

    def allreduce(self, comm: Any) -> ReproducibleSum:
        """Merge the accumulators of every rank of ``comm`` (collective); every rank holds the total.

        Two ``Allreduce`` calls of ``comm`` (an ``mpicoll.Comm`` or any mpi4py intracommunicator): a MAX of
        the bins (int32, one per element) and a SUM of the limbs (int64, ``K`` per element).  Raises
        OverflowError on every rank, after the first, if the ranks together may have added more than
        :data:`MAX_ADDS` values.
        """
        from mpi4py import MPI

        head = np.empty(self._code.size + 1, np.int32)
        head[:-1] = self._code.reshape(-1)
        head[-1] = min(self.count, MAX_ADDS + 1)
        comm.Allreduce(MPI.IN_PLACE, head, op=MPI.MAX)
        if int(head[-1]) * comm.Get_size() > MAX_ADDS:
            raise OverflowError(f"more than {MAX_ADDS} values per element over the ranks: the limbs could overflow")
        code = head[:-1].reshape(self._code.shape)
        body = np.empty(self._limbs.size + 1, np.int64)
        body[:-1] = self._aligned(self._code, self._limbs, code).reshape(-1)
        body[-1] = self.count
        comm.Allreduce(MPI.IN_PLACE, body, op=MPI.SUM)
        self._code = code
        self._limbs = body[:-1].reshape(self._limbs.shape)
        self.count = int(body[-1])
        return self

    # -- the result ------------------------------------------------------------------------------------

    def value(self) -> np.ndarray:
        """The sum, rounded once to nearest (ties to even) in the dtype; a new array of ``shape``.

        Zeros: ``-0.0`` where every value added was ``-0.0``, else ``+0.0`` (as IEEE addition gives).
        Non-finite: NaN where a NaN, or both ``+inf`` and ``-inf``, were added; else ``±inf`` where an
        infinity was added or the sum overflows.
        """
        code, limbs, fmt = self._code, self._limbs, self._fmt
        top = self._top(np.where(code >= INF, 0, code))
        out = fp.combine(limbs, top, BIN_BITS, fmt)
        out[code == NEG_ZERO] = -0.0
        out[code == EMPTY] = 0.0
        if (code >= INF).any():
            pos, neg = limbs[..., 0] & 0xFFFFFFFF, limbs[..., 0] >> 32
            inf = code == INF
            out[inf] = np.where(pos > 0, np.where(neg > 0, np.nan, np.inf), -np.inf)[inf]
            out[code == NAN] = np.nan
        with np.errstate(over="ignore"):
            if self.dtype.kind != "c":
                return out.astype(self.dtype)
            result = np.empty(self.shape, self.dtype)
            result.real, result.imag = out[..., 0], out[..., 1]   # each exact: a value of the real dtype
        return result

    # -- the representation ----------------------------------------------------------------------------

    def _check_room(self, more: int) -> None:
        if self.count + more > MAX_ADDS:
            raise OverflowError(f"a ReproducibleSum adds at most {MAX_ADDS} values per element")

    def _of_values(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The codes and limbs of one value per element (each in its own window)."""
        fmt, k = self._fmt, self._k
        raw = fp.exponents(w)
        code = np.maximum((raw - 1 - fmt.qexp) // BIN_BITS, k - 1).astype(np.int32)
        special = raw > fmt.emax
        finite = w
        if special.any():
            code[special] = np.where(np.isnan(w[special]), NAN, INF)
            finite = np.where(special, 0.0, w).astype(fmt.work)
        bits = w.view(np.int64 if w.dtype == np.float64 else np.int32)
        code[bits == (np.array(1, bits.dtype) << (8 * bits.dtype.itemsize - 1))] = NEG_ZERO
        limbs = fp.split(finite, self._top(np.where(code >= INF, 0, code)), BIN_BITS, k)
        if special.any():
            limbs[..., 0] = np.where(code == INF, (w == np.inf) + ((w == -np.inf).astype(np.int64) << 32),
                                     limbs[..., 0])
        return code, limbs

    def _top(self, code: np.ndarray) -> np.ndarray:
        """The window top (exponent) of finite codes; the codes below the bins take the lowest window."""
        return self._fmt.qexp + BIN_BITS * (np.maximum(code, self._k - 1).astype(np.int64) + 1)

    def _aligned(self, code: np.ndarray, limbs: np.ndarray, new: np.ndarray) -> np.ndarray:
        """``limbs`` (of windows ``code``) in the windows ``new >= code``: the lower bins dropped."""
        k = self._k
        finite = (code >= 0) & (code < INF) & (new < INF)
        shift = np.where(finite, new - code, k)
        index = np.arange(k) - shift[..., None]
        moved = np.take_along_axis(limbs, np.clip(index, 0, k - 1), axis=-1)
        moved[index < 0] = 0
        keep_inf = (code == INF) & (new == INF)
        if keep_inf.any():
            moved[keep_inf] = limbs[keep_inf]
        return moved

    def _merge_state(self, code: np.ndarray, limbs: np.ndarray) -> None:
        new = np.maximum(self._code, code)
        self._limbs = self._aligned(self._code, self._limbs, new) + self._aligned(code, limbs, new)
        self._code = new

    def __repr__(self) -> str:
        return f"ReproducibleSum(shape={self.shape}, dtype={self.dtype}, count={self.count})"
