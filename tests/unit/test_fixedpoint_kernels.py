"""The compiled passes of the reproducible sums (``mpicoll.data._fixedpoint``) give the NumPy definitions' bits.

:mod:`mpicoll.data.fixedpoint` is the reference (its arithmetic is tested against exact rational sums in
``tests/unit/test_reproducible.py``); here :mod:`mpicoll.data.fixedpoint_kernels` with the extension is
compared with it bit for bit on values of every exponent, zeros of both signs, infinities, NaN (their
counts in a column of their own or in limb 0), sums that overflow, and tables of up to 600 rows (whose limb
sums pass ``2**53`` and are rounded in integers).  The extension is used here even under
``MPICOLL_NO_EXTENSIONS=1`` (that setting is tested to turn it off).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpicoll.data import fixedpoint as fp
from mpicoll.data import fixedpoint_kernels as fk

try:
    COMPILED = importlib.import_module("mpicoll.data._fixedpoint")
except ImportError:          # not built (no compiler): the definitions are all there is
    COMPILED = None

pytestmark = pytest.mark.skipif(COMPILED is None, reason="mpicoll.data._fixedpoint is not built")

DTYPES = [np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan]


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    monkeypatch.setattr(fk, "KERNELS", COMPILED)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def table(dtype: np.dtype, rows: int, count: int, seed: int, special: float, largest: bool) -> np.ndarray:
    """Random values of every exponent of ``dtype``; a share ``special`` of zeros, infinities and NaN;
    with ``largest``, some columns near the largest finite value (their sums overflow)."""
    rng = np.random.default_rng(seed)
    info = ml_dtypes.finfo(dtype)
    exponent = rng.integers(int(info.minexp) - int(info.nmant) - 1, int(info.maxexp), (rows, count))
    with np.errstate(over="ignore"):
        x = (rng.uniform(0.5, 1.0, (rows, count)) * np.exp2(exponent.astype(np.float64))
             * rng.choice([-1.0, 1.0], (rows, count))).astype(dtype)
    pick = rng.random((rows, count)) < special
    x[pick] = np.array(SPECIAL)[rng.integers(0, len(SPECIAL), int(pick.sum()))].astype(dtype)
    if largest and count:
        x[:, ::3] = np.array(float(info.max), np.float64).astype(dtype) * rng.choice([-1, 1, 1], (rows, 1))
    return x


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(DTYPES), rows=st.sampled_from([1, 2, 3, 5, 17]), count=st.integers(0, 40),
       seed=st.integers(0, 2**32 - 1), special=st.sampled_from([0.0, 0.1, 0.5]), largest=st.booleans())
@np.errstate(over="ignore")      # (the definitions' sums past the largest double: inf, as they say)
def test_every_pass_gives_the_definitions_bits(dtype, rows, count, seed, special, largest):
    x = table(dtype, rows, count, seed, special, largest)
    fmt = fp.format_of(dtype)
    assert bits(fk.sum_rows(x)) == bits(fp.sum_rows(x))
    work = np.asarray(x, fmt.work)
    codes = np.stack([fk.codes(row, fmt) for row in work])
    assert bits(codes) == bits(np.stack([fp.codes(row, fmt) for row in work]))
    agreed = codes.max(axis=0, initial=fp.NEG_ZERO)
    limbs = [fp.encode(row, agreed, fmt) for row in x]
    assert all(bits(fk.encode(row, agreed, fmt)) == bits(mine) for row, mine in zip(x, limbs))
    tallied = np.zeros((count, fmt.limbs + 1), np.int64)    # a request's limbs: always a tally column
    fk.encode(x[0], agreed, fmt, out=tallied)
    assert bits(tallied[:, :limbs[0].shape[1]]) == bits(limbs[0]) and not tallied[:, limbs[0].shape[1]:].any()
    summed = sum(limbs)
    expected = fp.decode(summed, agreed, fmt, rows)
    assert bits(fk.decode(summed, agreed, fmt, rows)) == bits(expected)
    inline = [fp.encode(row, agreed, fmt, column=False) for row in x]    # a sum of every term: counts in limb 0
    assert all(mine.shape[1] == fmt.limbs for mine in inline)
    assert all(bits(fk.encode(row, agreed, fmt, column=False)) == bits(mine) for row, mine in zip(x, inline))
    assert bits(fp.decode(sum(inline), agreed, fmt, rows)) == bits(expected)
    assert bits(fk.decode(sum(inline), agreed, fmt, rows)) == bits(expected)
    with np.errstate(over="ignore"):
        out = np.full(count, 7, dtype)
        fk.decode(summed, agreed, fmt, rows, out=out)
        assert bits(out) == bits(expected.astype(dtype))
        again = np.zeros(count, dtype)
        fk.decode(tallied * rows, agreed, fmt, rows, out=again)   # (rows equal terms, the tally column too)
        assert bits(again) == bits(fp.decode(tallied * rows, agreed, fmt, rows).astype(dtype))


@pytest.mark.parametrize("dtype", DTYPES[:2])
def test_many_terms_whose_limb_sums_pass_two_to_the_53(dtype):
    """600 rows of large equal-signed values: limb sums past 2**53, rounded in integers (flagged)."""
    x = np.abs(table(dtype, 600, 64, 5, 0.0, True))
    fmt = fp.format_of(dtype)
    with np.errstate(over="ignore"):       # (the definitions' sums past the largest double: inf, as they say)
        assert bits(fk.sum_rows(x)) == bits(fp.sum_rows(x))
        code = np.stack([fp.codes(row, fmt) for row in np.asarray(x, fmt.work)]).max(axis=0)
        summed = sum(fp.encode(row, code, fmt) for row in x)
        assert bits(fk.decode(summed, code, fmt, 600)) == bits(fp.decode(summed, code, fmt, 600))


def ordinary_table(dtype: np.dtype, rows: int, count: int, seed: int) -> np.ndarray:
    """Values of a few binades around 1 (the columns the kernel sums four at a time, in vector registers where
    the processor has them), with, at random places, columns it must leave to the one-column code: -0.0 only,
    zeros and subnormals, an infinity or NaN, a value below 2**-934 (whose limbs' units are subnormal; float64),
    and a value near the largest (a window above HIGHEST, whose limbs are prescaled)."""
    rng = np.random.default_rng(seed)
    info = ml_dtypes.finfo(dtype)
    x = (rng.standard_normal((rows, count)) * np.exp2(rng.integers(-8, 8, (rows, count)))).astype(dtype)
    tiny = float(info.smallest_subnormal)
    odd = [lambda c: x.__setitem__((slice(None), c), -0.0),
           lambda c: x.__setitem__((slice(None), c), np.array([0.0, -0.0, tiny, -tiny])[rng.integers(0, 4, rows)]),
           lambda c: x.__setitem__((rng.integers(0, rows), c), rng.choice([np.inf, -np.inf, np.nan])),
           lambda c: x.__setitem__((slice(None), c), x[:, c] * np.array(2.0 ** -980 if dtype.itemsize == 8 else 1.0,
                                                                     dtype)),
           lambda c: x.__setitem__((rng.integers(0, rows), c), np.array(float(info.max) / 3, dtype))]
    for c in rng.choice(count, min(count, 12), replace=False):
        odd[rng.integers(0, len(odd))](c)
    return x


@pytest.mark.parametrize("dtype", DTYPES[:3])
@pytest.mark.parametrize("rows", [1, 2, 3, 127, 128])
@np.errstate(over="ignore")
def test_ordinary_columns_give_the_definitions_bits(dtype, rows):
    for seed in range(3):
        x = ordinary_table(dtype, rows, 203, seed)
        assert bits(fk.sum_rows(x)) == bits(fp.sum_rows(x))
        assert bits(fk.sum_rows(x[:, 5:])) == bits(fp.sum_rows(x[:, 5:]))      # (columns not 32-byte aligned)
        wide = np.concatenate([x, np.ones((rows, 3), dtype)], axis=1)          # a gathered table's row stride
        out = np.empty(203, dtype)
        assert fk.sum_rows(wide, 203, out=out) is out and bits(out) == bits(fp.sum_rows(x))


def test_the_gathered_hit_checks_what_it_reads_of_the_kept_stages():
    """The compiled hit of a small reproducible Allreduce reads the kept stages' ``hit`` tuple: one not of its
    shape, or a row too short for the contribution and its flag bytes, raises (before any message); a result
    of another length goes to the Python definition, which runs nothing (False)."""
    from mpi4py import MPI

    import mpicoll
    from mpicoll.comm import reproducible_allreduce as ra

    comm = mpicoll.Comm(MPI.COMM_SELF)
    params = fk.params(fp.format_of(np.dtype(np.float64)))
    row, table = np.zeros(5 * 8 + 8, np.uint8), np.zeros((1, 5 * 8 + 8), np.uint8)

    class Stages:
        hit = (row, table, 5, params)

    comm._state.reproducible_plans[("d", 5)] = stages = Stages()
    x = np.arange(5.0)
    assert ra.run_planned(comm, "auto", False, x, np.empty(5), MPI.SUM) is False     # (not in the mode)
    assert ra.run_planned(comm, "auto", True, x, np.empty(4), MPI.SUM) is False
    for bad, error in [((row, table), TypeError), ((row[:5 * 8], table, 5, params), ValueError),
                       ((row, table[:, :-8], 5, params), ValueError), ((row, table, 0, params), ValueError)]:
        stages.hit = bad
        with pytest.raises(error):
            ra.run_planned(comm, "auto", True, x, np.empty(5), MPI.SUM)
    assert bits(row) == bits(np.zeros(5 * 8 + 8, np.uint8))      # (nothing was written)


def test_a_gathered_table_sums_its_first_columns_only():
    x = table(np.dtype(np.float64), 3, 9, 1, 0.1, False)
    wide = np.concatenate([x, np.full((3, 4), np.nan)], axis=1)
    out = np.empty(9)
    assert fk.sum_rows(wide, 9, out=out) is out and bits(out) == bits(fp.sum_rows(x))


def test_the_kernels_refuse_wrong_buffers():
    fmt = fp.format_of(np.dtype(np.float64))
    params = (fmt.floor, fmt.ceiling, fmt.step, fmt.emax, fmt.limbs)
    with pytest.raises(TypeError, match="format"):
        COMPILED.codes(np.ones(3, np.int32), np.empty(3, np.int8), params)
    with pytest.raises(ValueError, match="one int8 per element"):
        COMPILED.codes(np.ones(3), np.empty(2, np.int8), params)
    with pytest.raises(ValueError, match="limbs"):
        COMPILED.encode(np.ones(3), np.zeros(3, np.int8), np.empty((3, 5), np.int64), params, False)
    with pytest.raises(ValueError, match="power-of-two step"):
        COMPILED.codes(np.ones(3), np.empty(3, np.int8), params[:2] + (3,) + params[3:])


def _kernels_in_a_new_process(value: str) -> subprocess.CompletedProcess:
    code = "import mpicoll.data.fixedpoint_kernels as k; print(k.KERNELS is None)"
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, MPICOLL_NO_EXTENSIONS=value),
                          capture_output=True, text=True)


def test_no_extensions_gives_the_definitions():
    assert _kernels_in_a_new_process("1").stdout.split() == ["True"]
    assert _kernels_in_a_new_process("0").stdout.split() == ["False"]


@pytest.mark.parametrize("dtype", [np.dtype(np.float64), np.dtype(np.float32)])
def test_sum_rows_into_the_other_byte_order(dtype):
    x = table(dtype, 3, 9, 1, 0.1, False)
    swapped = dtype.newbyteorder()
    out = np.empty(9, swapped)
    assert fk.sum_rows(x.astype(swapped), out=out) is out and np.array_equal(out, fp.sum_rows(x))
