"""The reproducible sums' local passes: the compiled kernels where built, else the NumPy definitions.

:mod:`mpicoll.data.fixedpoint` defines the arithmetic (codes, limbs, rounding back) in NumPy, about
13 ns per element in some 35 array passes; ``mpicoll.data._fixedpoint`` (``_fixedpoint.c``) runs
each function as one loop over the elements, with the same bits.  The functions here take and return
what :mod:`~mpicoll.data.fixedpoint`'s do, and call the extension when it is built and not disabled
by ``MPICOLL_NO_EXTENSIONS=1`` (read once, at import, as for the other extensions); the rare elements
the kernel cannot round in double arithmetic (limbs past ``2**53``, a double sum that overflows in the
highest windows) it flags, and :func:`~mpicoll.data.fixedpoint.combine` rounds them.
"""

from __future__ import annotations

import numpy as np

from mpicoll.compiled import extension
from mpicoll.data import fixedpoint as fp

__all__ = ["KERNELS", "params", "codes", "encode", "decode", "sum_rows", "sum_rows_into"]

#: the compiled module, or None (not built, or ``MPICOLL_NO_EXTENSIONS=1``)
KERNELS = extension("_fixedpoint")

_PARAMS: dict = {}


def params(fmt: fp.Format) -> tuple[int, int, int, int, int]:
    """``fmt`` as the kernels take it: floor, ceiling, step, emax, limbs."""
    try:
        return _PARAMS[fmt.name]
    except KeyError:
        _PARAMS[fmt.name] = value = (fmt.floor, fmt.ceiling, fmt.step, fmt.emax, fmt.limbs)
        return value


#: the formats whose values the kernels read and write as they are
_DIRECT = {"float64": np.dtype(np.float64), "float32": np.dtype(np.float32)}


def _work(values: np.ndarray, fmt: fp.Format) -> np.ndarray:
    """``values`` (1-D or 2-D) as a contiguous array the kernels read: float64, or float32 for the others."""
    if _DIRECT.get(fmt.name) is values.dtype and values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values, np.float64 if fmt.work is np.float64 else np.float32)


def codes(x: np.ndarray, fmt: fp.Format, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`mpicoll.data.fixedpoint.codes` of ``x`` (any float dtype), into ``out`` (int8) where given."""
    if KERNELS is None:
        value = fp.codes(np.asarray(x, fmt.work), fmt)
        if out is None:
            return value
        out[...] = value
        return out
    out = np.empty(x.shape[0], np.int8) if out is None else out
    KERNELS.codes(_work(x, fmt), out, params(fmt))
    return out


def encode(values: np.ndarray, code: np.ndarray, fmt: fp.Format, out: np.ndarray | None = None,
           column: bool = True) -> np.ndarray:
    """:func:`mpicoll.data.fixedpoint.encode` (``column`` as there), into ``out`` where given (C-contiguous
    int64 of ``fmt.limbs`` columns, or one more for the counts of inf and NaN: a request's limbs are bound
    before the codes are known, and an all-zero count changes no sum)."""
    special = code.shape[0] > 0 and int(code.max()) >= fp.INF
    if out is None:
        out = np.empty((values.shape[0], fmt.limbs + (special and column)), np.int64)
    inline = special and out.shape[1] == fmt.limbs
    if KERNELS is None:
        value = fp.encode(values, code, fmt, column=not inline)
        out[:, :value.shape[1]] = value
        out[:, value.shape[1]:] = 0
        return out
    KERNELS.encode(_work(values, fmt), np.ascontiguousarray(code), out, params(fmt), inline)
    return out


def decode(summed: np.ndarray, code: np.ndarray, fmt: fp.Format, terms: int | None = None,
           out: np.ndarray | None = None) -> np.ndarray:
    """:func:`mpicoll.data.fixedpoint.decode`, cast to ``out``'s dtype into ``out`` where given (then
    returned); without ``out``, float64 as the definition returns."""
    if KERNELS is None or fmt.name == "bfloat16":   # bfloat16 rounds in integers (fixedpoint._decode)
        value = fp.decode(summed, code, fmt, terms)
        return value if out is None else _cast_into(value, out)
    direct = out is not None and out.dtype in (np.float64, np.float32) and out.flags.c_contiguous
    target = out if direct else np.empty(code.shape[0], np.float64)
    flags = np.empty(code.shape[0], np.uint8)
    check = terms is None or terms >= fp._FEW
    if KERNELS.decode(np.ascontiguousarray(summed), np.ascontiguousarray(code), target, params(fmt), check, flags):
        bad = flags.view(bool)
        value = fp.combine(summed[bad, :fmt.limbs], fp._windows(code[bad], fmt), fp.LIMB_BITS, fmt)
        with np.errstate(over="ignore"):
            target[bad] = value
    if out is None or direct:
        return target
    return _cast_into(target, out)


def _cast_into(value: np.ndarray, out: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):    # beyond the dtype's largest finite value: inf, correctly rounded
        out[...] = value.astype(out.dtype)
    return out


def sum_rows(rows: np.ndarray, count: int | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`mpicoll.data.fixedpoint.sum_rows` of ``rows[:, :count]`` (default: every column), into
    ``out`` where given (then returned); ``rows`` may be a gathered table that carries more after each
    contribution."""
    count = rows.shape[1] if count is None else count
    fmt = fp.format_of(rows.dtype)
    if KERNELS is None or fmt is None or fmt.name == "bfloat16" or rows.shape[0] == 0:
        value = fp.sum_rows(rows[:, :count])
        return value if out is None else _cast_into(value, out)
    direct = fmt.name in _DIRECT
    if direct and out is not None and out.dtype is rows.dtype and out.dtype.isnative and out.flags.c_contiguous:
        target = out
    else:     # float16's sums are rounded from float64 by the cast (the kernel writes native byte order)
        target = np.empty(count, _DIRECT[fmt.name] if direct else np.float64)
    work = _work(rows, fmt)
    if KERNELS.sum_rows(work, work.shape[0], target, params(fmt), None):     # some column needs combine
        flags = np.empty(count, np.uint8)
        KERNELS.sum_rows(work, work.shape[0], target, params(fmt), flags)
        bad = flags.view(bool)
        with np.errstate(over="ignore"):
            target[bad] = fp.sum_rows(np.ascontiguousarray(rows[:, :count][:, bad])).astype(target.dtype)
    if target is out:
        return out
    if out is None:
        return target if direct else _cast_into(target, np.empty(count, rows.dtype))
    return _cast_into(target, out)


def sum_rows_into(rows: np.ndarray, out: np.ndarray, fmt: fp.Format) -> None:
    """:func:`sum_rows` of ``rows[:, :len(out)]`` into ``out``, in one kernel call where nothing needs more
    (a small Allreduce's usual case: both C-contiguous, of ``fmt``'s dtype, float64 or float32)."""
    if KERNELS is None or KERNELS.sum_rows(rows, rows.shape[0], out, params(fmt), None):
        sum_rows(rows, out.shape[0], out)
