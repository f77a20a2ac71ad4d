"""Floats as signed integer limbs on a shared exponent, and back with one correct rounding (no MPI needed).

The reproducible sums (:mod:`mpicoll.comm.reproducible`, :mod:`mpicoll.data.accumulator`) turn
each float ``x`` into ``K`` int64 *limbs*: limb ``k`` holds the bits of ``x`` in
``[2**(top - (k+1)*L), 2**(top - k*L))``, with the sign of ``x``, where ``top`` is an exponent that
every contributor agrees on (``|x| < 2**top``); the bits below the last limb are rounded to nearest
(:func:`rounded_limbs`, the collectives) or truncated toward zero (:func:`split`, the accumulator,
whose digits must not depend on the window).  Integer addition is exact and associative, so the
limbs of any number of floats add up to the same integers in every order; :func:`combine` and
:func:`decode` turn the sums back into floats, rounded once to nearest (ties to even), subnormals and
overflow included.

Everything is vectorised over the elements; the only Python loops run over the ``K`` limbs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LIMB_BITS", "MAX_TERMS", "Format", "format_of", "exponents", "codes", "top_of", "split",
           "combine", "encode", "decode", "rounded_limbs", "sum_rows", "NEG_ZERO", "INF", "NAN"]

#: bits of a float each int64 limb holds; 63 - LIMB_BITS bits are headroom for the sum's carries
LIMB_BITS = 44
#: elements handled at a time (their temporaries stay in cache)
CHUNK = 1 << 14
#: the most terms an element may sum (2**19 - 1): ``MAX_TERMS * 2**LIMB_BITS < 2**63``
MAX_TERMS = (1 << (63 - LIMB_BITS)) - 1

# the one-byte codes of the exponent exchange (:func:`codes`); finite values take -127 .. 106
NEG_ZERO = -128   # every contribution is -0.0: the sum is -0.0 (IEEE: -0 + -0 = -0)
INF = 126         # some contribution is infinite (its limbs then count +inf and -inf)
NAN = 127         # some contribution is NaN
_FINITE0 = -127   # the code of the lowest window
# the extra limb of an element some term holds inf or NaN in: counts of +inf, -inf and NaN, 20 bits each
_COUNT_BITS = 20


@dataclass(frozen=True)
class Format:
    """How the floats of one dtype become limbs.

    ``precision``, ``qexp`` (exponent of the smallest subnormal) and ``emax`` (``|x| < 2**emax`` for
    every finite ``x``) describe the dtype; the arithmetic runs in ``work`` (float64 for float64,
    float32 for the narrower types, which convert to it exactly).  ``limbs`` of ``LIMB_BITS`` each;
    the window's top is a multiple of ``step`` above ``floor`` (one byte must name it).
    """

    name: str
    work: type
    precision: int
    qexp: int
    emax: int
    limbs: int
    step: int

    @property
    def floor(self) -> int:
        """The lowest window top: its lowest limb's unit is the dtype's smallest subnormal, so every value
        whose exponent is below it is held exactly."""
        return self.qexp + self.limbs * LIMB_BITS

    @property
    def ceiling(self) -> int:
        return max(self.floor, self.emax)


FORMATS = {
    "float64": Format("float64", np.float64, 53, -1074, 1024, 2, 16),
    "float32": Format("float32", np.float32, 24, -149, 128, 1, 1),
    "float16": Format("float16", np.float32, 11, -24, 16, 1, 1),
    "bfloat16": Format("bfloat16", np.float32, 8, -133, 128, 1, 1),
}


_BY_DTYPE: dict = {}


def format_of(dtype: np.dtype) -> Format | None:
    """The format of a real float dtype (float64, float32, float16, ml_dtypes' bfloat16); None for others."""
    try:
        return _BY_DTYPE[dtype]
    except (KeyError, TypeError):
        fmt = FORMATS.get(np.dtype(dtype).name)
        if isinstance(dtype, np.dtype):
            _BY_DTYPE[dtype] = fmt
        return fmt


def exponents(x: np.ndarray) -> np.ndarray:
    """``e`` with ``|x| < 2**e`` for normal ``x`` (read from the bits; subnormals and zeros give the
    lowest normal's, inf and NaN one more than the largest).  ``x``: float64 or float32."""
    if x.dtype == np.float64:
        return ((x.view(np.int64) >> 52) & 0x7FF).astype(np.int32) - 1022
    return ((x.view(np.int32) >> 23) & 0xFF) - 126


def codes(x: np.ndarray, fmt: Format) -> np.ndarray:
    """One int8 per element naming the lowest window that holds ``x`` (see :func:`top_of`), or
    :data:`NEG_ZERO`, :data:`INF`, :data:`NAN`; the MAX of the codes of the terms names their window.
    ``x``: 1-D, float64 or float32."""
    if x.shape[0] <= CHUNK:
        return _codes(x, fmt)
    out = np.empty(x.shape[0], np.int8)
    for lo in range(0, x.shape[0], CHUNK):
        out[lo:lo + CHUNK] = _codes(x[lo:lo + CHUNK], fmt)
    return out


def _codes(x: np.ndarray, fmt: Format) -> np.ndarray:
    raw = exponents(x)
    e = np.maximum(raw, fmt.floor)
    np.minimum(e, fmt.ceiling, out=e)
    e -= fmt.floor
    if fmt.step > 1:                                   # ceil(e / step), step a power of two
        e += fmt.step - 1
        e >>= fmt.step.bit_length() - 1
    e += _FINITE0
    out = e.astype(np.int8)
    bits = x.view(np.int64 if x.dtype == np.float64 else np.int32)
    sign = np.array(1, bits.dtype) << (8 * bits.dtype.itemsize - 1)
    special = raw > fmt.emax                           # inf or NaN (their exponent field is all ones)
    if special.any():
        out[special] = np.where(np.isnan(x[special]), NAN, INF)
    negzero = bits == sign
    if negzero.any():
        out[negzero] = NEG_ZERO
    return out


def top_of(code: np.ndarray, fmt: Format) -> np.ndarray:
    """The window top (an exponent, int32) that a finite code names."""
    top = code.astype(np.int32)
    top -= _FINITE0
    top *= fmt.step
    top += fmt.floor
    return top


def split(x: np.ndarray, top: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The ``count`` limbs of ``bits`` bits of each finite ``x`` below ``2**top`` (``|x| < 2**top``):
    shape ``x.shape + (count,)``, int64, most significant first.

    Limb ``k`` is ``trunc(x / 2**(top-(k+1)*bits))`` less ``2**bits`` times the one above it; their
    sum is ``x`` truncated toward zero to a multiple of ``2**(top - count*bits)``.  Each step is exact
    in floating point: a power-of-two scaling, a truncation, and a subtraction whose exact result is
    representable.
    """
    out = np.empty(x.shape + (count,), np.int64)
    rest = x
    top = np.asarray(top, np.int32)
    for k in range(count):
        shift = top - (k + 1) * bits
        scaled = np.ldexp(rest, -shift)
        if k == count - 1:
            out[..., k] = scaled            # float -> int64 truncates toward zero
        else:
            whole = np.trunc(scaled)
            out[..., k] = whole
            rest = rest - np.ldexp(whole, shift)
    return out


def _carry(limbs: list[np.ndarray], bits: int) -> None:
    """Move each lower limb's excess into the one above, leaving it in ``[0, 2**bits)`` (in place)."""
    for k in range(len(limbs) - 1, 0, -1):
        carry = limbs[k] >> bits
        limbs[k] -= carry << bits
        limbs[k - 1] += carry


def bit_length(m: np.ndarray) -> np.ndarray:
    """``int.bit_length`` of each non-negative int64."""
    e = np.frexp(m.astype(np.float64))[1].astype(np.int64)   # float(m) may round up to a power of two
    low = (m >> np.maximum(e - 1, 0)) == 0
    return e - (low & (m > 0))


def combine(limbs: np.ndarray, top: np.ndarray, bits: int, fmt: Format) -> np.ndarray:
    """The float64 nearest (ties to even) in ``fmt``'s precision and range to
    ``sum(limbs[..., k] * 2**(top - (k+1)*bits))``, for limbs that are sums of :func:`split`'s.

    The sum is carried into a sign and a magnitude, whose leading 62 bits (and a sticky bit for the rest)
    are rounded once in integer arithmetic to ``fmt.precision`` bits.  ``top - limbs*bits >= fmt.qexp``
    (the windows start at ``fmt.floor``), so a subnormal result is exact and the float64 result is a
    value of ``fmt``'s dtype, or beyond its largest finite value (the cast to the dtype then gives inf).
    """
    count = limbs.shape[-1]
    parts = [limbs[..., k].astype(np.int64, copy=True) for k in range(count)]
    _carry(parts, bits)
    negative = parts[0] < 0
    if negative.any():
        parts = [np.where(negative, -p, p) for p in parts]
        _carry(parts, bits)
    m = parts[0]
    unit = np.asarray(top, np.int64) - bits       # m's unit is 2**unit
    sticky = np.zeros(m.shape, bool)
    for low in parts[1:]:
        room = np.clip(62 - bit_length(m), 0, bits)
        m = (m << room) | (low >> (bits - room))
        sticky |= (low & ((np.int64(1) << (bits - room)) - 1)) != 0
        unit = unit - room
    drop = np.maximum(bit_length(m) - fmt.precision, 0)
    kept = m >> drop
    rest = m - (kept << drop)
    half = (np.int64(1) << drop) >> 1
    up = (rest > half) | ((rest == half) & (drop > 0) & (sticky | ((kept & 1) == 1)))
    with np.errstate(over="ignore"):   # beyond float64's range: inf, the correctly rounded result
        value = np.ldexp((kept + up).astype(np.float64), (unit + drop).astype(np.int32))
    return np.where(negative, -value, value)


# -- the terms of one element and their sum, with the special values -----------------------------------

def _windows(code: np.ndarray, fmt: Format) -> np.ndarray:
    """The window tops of agreed codes: -0.0 takes the lowest window, inf and NaN the highest (where
    the finite terms of such an element are held, for the prefixes of a scan that reach no inf)."""
    if code.shape[0] and code.min() > NEG_ZERO and code.max() < INF:
        return top_of(code, fmt)
    ceiling = -((fmt.floor - fmt.ceiling) // fmt.step) + _FINITE0
    window = np.where(code == NEG_ZERO, _FINITE0, np.where(code >= INF, ceiling, code))
    return top_of(window, fmt)


def encode(values: np.ndarray, code: np.ndarray, fmt: Format, column: bool = True) -> np.ndarray:
    """One term per element (``values``, 1-D, any float dtype) as limbs in the agreed windows ``code``
    (the MAX of every term's :func:`codes`): ``(elements, fmt.limbs)`` int64, with one more column
    when some element's code is inf or NaN, counting this term's ``+inf``, ``-inf`` and NaN.

    ``column=False`` (for sums of every term, not a scan's prefixes): no such column; an element whose
    code is inf or NaN has its count in limb 0 and zeros after it instead (some term of it is inf or
    NaN, so its finite terms cannot change its sum).  :func:`decode` tells the two apart by the width.

    The limbs of ``x`` sum to ``x`` rounded to nearest (ties to even) on the grid ``2**(top - F)``
    (``F = fmt.limbs * LIMB_BITS``), see :func:`rounded_limbs`.
    """
    special = bool((code >= INF).any())
    if special and not column:
        out = encode(values, code, fmt)
        inline = code >= INF
        out[inline, 0] = out[inline, -1]
        out[inline, 1:] = 0
        return np.ascontiguousarray(out[:, :-1])
    out = np.zeros((values.shape[0], fmt.limbs + special), np.int64)
    for lo in range(0, values.shape[0], CHUNK):
        part = np.asarray(values[lo:lo + CHUNK], np.float64)
        chunk = code[lo:lo + CHUNK]
        if not special and chunk.shape[0] and chunk.min() > NEG_ZERO and chunk.max() <= _highest_code(fmt):
            magic = chunk.astype(np.int64)           # the magic numbers straight from the codes (top_of)
            magic *= fmt.step << 52
            magic += _wrapped(((fmt.floor - _FINITE0 * fmt.step + 1023 + 52 - LIMB_BITS) << 52) | (1 << 51))
            _magic_limbs(part, magic, fmt.limbs, out[lo:lo + CHUNK])
            continue
        top = _windows(chunk, fmt)
        if not special:
            rounded_limbs(part, top, fmt.limbs, out[lo:lo + CHUNK])
            continue
        finite = np.where(np.isfinite(part), part, 0.0)
        rounded_limbs(finite, top, fmt.limbs, out[lo:lo + CHUNK, :-1])
        out[lo:lo + CHUNK, -1] = ((part == np.inf) + ((part == -np.inf).astype(np.int64) << _COUNT_BITS)
                                  + (np.isnan(part).astype(np.int64) << 2 * _COUNT_BITS))
    return out


_HIGHEST = 1015      # the highest top whose magic number 1.5 * 2**(top + 8) is a float64
_ONE_HALF = np.int64(1 << 51)


def rounded_limbs(x: np.ndarray, top: np.ndarray, count: int, out: np.ndarray) -> None:
    """``out[:, k]``: the limbs of float64 ``x`` (``|x| < 2**top``) of ``LIMB_BITS`` each, rounded to nearest.

    Limb 0 is ``x`` rounded to a multiple of ``2**(top - LIMB_BITS)``, read from the bits of ``x + M``
    with ``M = 1.5 * 2**(top - LIMB_BITS + 52)`` (the sum's unit in the last place is that multiple, so
    the addition rounds there, once, and the integer is the sum's mantissa less ``M``'s); the exact
    remainder ``x - (limb 0)`` gives the next limb the same way.  No division, no truncation: one
    addition and one integer subtraction per limb.
    """
    top = np.asarray(top, np.int64)
    if top.shape[0] and top.max() > _HIGHEST:   # scale the highest windows down: exact at their unit
        high = top > _HIGHEST
        x = np.where(high, x * 2.0 ** -64, x)
        top = np.where(high, top - 64, top)
    magic = top + (1023 + 52 - LIMB_BITS)
    magic <<= 52
    magic |= _ONE_HALF
    _magic_limbs(x, magic, count, out)


def _wrapped(value: int) -> np.int64:
    """``value`` modulo 2**64 as an int64: added to an int64 array it wraps, and the sum is in range."""
    value &= (1 << 64) - 1
    return np.int64(value - (1 << 64) if value >= 1 << 63 else value)


def _highest_code(fmt: Format) -> int:
    """The highest code whose window top is at most ``_HIGHEST``."""
    return (_HIGHEST - fmt.floor) // fmt.step + _FINITE0


def _magic_limbs(x: np.ndarray, magic: np.ndarray, count: int, out: np.ndarray) -> None:
    """:func:`rounded_limbs` from the bits of the first magic numbers (int64, consumed)."""
    rest = x
    for k in range(count):
        m = magic.view(np.float64)
        y = rest + m
        np.subtract(y.view(np.int64), magic, out=out[:, k])
        if k + 1 < count:
            y -= m
            rest = rest - y
            magic -= np.int64(LIMB_BITS) << 52


def decode(summed: np.ndarray, code: np.ndarray, fmt: Format, terms: int | None = None) -> np.ndarray:
    """The sums of limbs that are sums of :func:`encode`'s in the windows ``code``, as float64 whose cast
    to ``fmt``'s dtype is the sum rounded once to nearest (ties to even; inf beyond the largest value).

    -0.0 where the code says every term is -0.0; NaN where a term is NaN or terms are ``+inf`` and
    ``-inf``; ``±inf`` where a term is, or where the rounded sum overflows.  ``terms``: how many terms
    were summed, if known (fewer than 512 skip a check).
    """
    if summed.shape[0] <= CHUNK:
        return _decode(summed, code, fmt, terms)
    out = np.empty(summed.shape[0], np.float64)
    for lo in range(0, summed.shape[0], CHUNK):
        out[lo:lo + CHUNK] = _decode(summed[lo:lo + CHUNK], code[lo:lo + CHUNK], fmt, terms)
    return out


_EXACT = float(1 << 53)


_FEW = 1 << (53 - LIMB_BITS)     # fewer terms than this: every limb sum is exactly a float64


def _decode(summed: np.ndarray, code: np.ndarray, fmt: Format, terms: int | None) -> np.ndarray:
    if summed.shape[0] == 0:
        return np.empty(0, np.float64)
    k = fmt.limbs
    tally = summed[:, k] if summed.shape[1] > k else None
    if tally is None and code.max() >= INF:      # the counts in limb 0 (encode's column=False)
        inline = code >= INF
        tally = np.where(inline, summed[:, 0], 0)
        summed = np.where(inline[:, None], 0, summed)
    top = _windows(code, fmt)
    limbs = summed[:, :k]
    if fmt.name == "bfloat16":     # ml_dtypes rounds float64 to bfloat16 through float32: twice
        out = combine(limbs, top, LIMB_BITS, fmt)
    else:
        # each limb is a float64 exactly (|limb| < 2**53), so is each scaled by its unit: their float64
        # sum is rounded once; float32 and float16 then round that exact float64 once more, their only time
        floats = limbs.astype(np.float64)
        out = np.ldexp(floats[:, 0], top - LIMB_BITS)
        for j in range(1, k):
            out += np.ldexp(floats[:, j], top - (j + 1) * LIMB_BITS)
        if terms is None or terms >= _FEW:
            good = np.abs(floats[:, 0]) < _EXACT
            for j in range(1, k):
                good &= np.abs(floats[:, j]) < _EXACT
        else:                  # each limb is at most 2**44 in magnitude: fewer than 512 terms stay below 2**53
            good = None
        if k > 1 and top.max() > _HIGHEST:    # inf: a high limb beyond float64 that the lower ones may bring back
            good = np.isfinite(out) if good is None else good & np.isfinite(out)
        if good is not None and not good.all():
            bad = ~good
            out[bad] = combine(limbs[bad], top[bad], LIMB_BITS, fmt)
    if code.min() == NEG_ZERO:
        out[code == NEG_ZERO] = -0.0
    if tally is not None:
        mask = (1 << _COUNT_BITS) - 1
        pos, neg, nan = tally & mask, (tally >> _COUNT_BITS) & mask, tally >> 2 * _COUNT_BITS
        out = np.where(pos > 0, np.inf, out)
        out = np.where(neg > 0, np.where(pos > 0, np.nan, -np.inf), out)
        out = np.where(nan > 0, np.nan, out)
    return out


def sum_rows(rows: np.ndarray) -> np.ndarray:
    """In one process, what a reproducible Allreduce gives when rank ``i`` contributes ``rows[i]``
    (a 2-D array of float16, bfloat16, float32 or float64): the reference of the tests and examples."""
    fmt = format_of(rows.dtype)
    if fmt is None:
        raise TypeError(f"sum_rows sums float16, bfloat16, float32 or float64, not {rows.dtype}")
    work = np.asarray(rows, fmt.work)
    if work.size == 0:
        return np.zeros(work.shape[1], rows.dtype)
    plain = _plain_sum(work, fmt)
    if plain is not None:
        with np.errstate(over="ignore"):
            return plain.astype(rows.dtype)
    code = codes(work.reshape(-1), fmt).reshape(work.shape).max(axis=0, initial=NEG_ZERO)
    terms, count = work.shape
    limbs = encode(work.reshape(-1), np.broadcast_to(code, work.shape).reshape(-1), fmt)
    total = limbs.reshape(terms, count, -1).sum(axis=0)
    with np.errstate(over="ignore"):
        return decode(total, code, fmt, terms).astype(rows.dtype)


def _plain_sum(work: np.ndarray, fmt: Format) -> np.ndarray | None:
    """:func:`sum_rows` in a third of the NumPy calls, for the usual small table (no inf, NaN or -0.0,
    no window above ``_HIGHEST``, fewer than 512 rows, not bfloat16): the same windows, limbs and
    rounding, written out for a 2-D table; None where the table is not such a one."""
    terms = work.shape[0]
    if fmt.name == "bfloat16" or terms >= _FEW:
        return None
    raw = exponents(work)
    bits = work.view(np.int64 if work.dtype == np.float64 else np.int32)
    if raw.max() > fmt.emax or (bits == (np.array(1, bits.dtype) << (8 * bits.dtype.itemsize - 1))).any():
        return None
    e = np.maximum(raw.max(axis=0), fmt.floor).astype(np.int64)
    np.minimum(e, fmt.ceiling, out=e)
    top = fmt.floor + -((fmt.floor - e) // fmt.step) * fmt.step      # top_of(codes(...).max(axis=0))
    if fmt.limbs > 1 and top.max() > _HIGHEST:
        return None
    x = work.astype(np.float64)
    magic = ((top + (1023 + 52 - LIMB_BITS)) << 52) | _ONE_HALF
    y = x + magic.view(np.float64)
    out = np.ldexp((y.view(np.int64) - magic).sum(axis=0).astype(np.float64), (top - LIMB_BITS).astype(np.int32))
    if fmt.limbs > 1:
        y -= magic.view(np.float64)
        magic -= np.int64(LIMB_BITS) << 52
        z = (x - y) + magic.view(np.float64)
        out += np.ldexp((z.view(np.int64) - magic).sum(axis=0).astype(np.float64),
                        (top - 2 * LIMB_BITS).astype(np.int32))
    return out
