"""Property tests of the reproducible sums' arithmetic (no MPI): limbs, one rounding, and the accumulator.

Exact references are rational (``fractions.Fraction``).  What is tested:

- :func:`fixedpoint.sum_rows` (what a reproducible Allreduce gives) is the correctly rounded exact sum
  of the terms rounded to the agreed window's grid, the same bits in every order of the terms and with zero
  terms added, within the error bound of ``docs/reproducible.md``;
- :class:`ReproducibleSum` gives the same bits for every split of the values into accumulators, every
  order of adds and merges, within its bound;
- zeros of both signs, infinities and NaN give what the documentation says.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpicoll.data import fixedpoint as fp
from mpicoll.data.accumulator import BIN_BITS, ReproducibleSum

DTYPES = {"float64": np.dtype(np.float64), "float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
          "bfloat16": np.dtype(ml_dtypes.bfloat16)}
WIDTH = {"float64": 64, "float32": 32, "float16": 16, "bfloat16": 32}


def nearest(value: Fraction, fmt: fp.Format) -> float:
    """``value`` rounded to nearest, ties to even, in ``fmt``'s precision and range (as a float64)."""
    if value == 0:
        return 0.0
    a = abs(value)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e += (Fraction(2) ** (e + 1) <= a) - (Fraction(2) ** e > a)   # 2**e <= a < 2**(e+1)
    quantum = max(e - fmt.precision + 1, fmt.qexp)
    rounded = round(a / Fraction(2) ** quantum) * Fraction(2) ** quantum
    sign = 1.0 if value > 0 else -1.0
    return sign * (math.inf if rounded >= Fraction(2) ** fmt.emax else float(rounded))


def on_grid(x: float, exponent: int) -> Fraction:
    """``x`` rounded to nearest (ties to even) to a multiple of ``2**exponent`` (Python's round())."""
    unit = Fraction(2) ** exponent
    return round(Fraction(x) / unit) * unit


def floats(name: str) -> st.SearchStrategy:
    """Finite values of the dtype, any exponent (bfloat16: float32 values rounded to it)."""
    return st.floats(width=WIDTH[name], allow_nan=False, allow_infinity=False).map(
        lambda v: float(np.array(v).astype(DTYPES[name]).astype(np.float64))).filter(math.isfinite)


def rows_of(name: str, values: list[float]) -> np.ndarray:
    return np.array(values, np.float64).astype(DTYPES[name]).reshape(-1, 1)


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


@pytest.mark.parametrize("name", list(DTYPES))
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_sum_rows_is_the_rounded_sum_of_the_terms_on_the_window_grid_in_every_order(name, data):
    values = data.draw(st.lists(floats(name), min_size=1, max_size=12))
    fmt = fp.format_of(DTYPES[name])
    rows = rows_of(name, values)
    got = fp.sum_rows(rows)
    order = data.draw(st.permutations(range(len(values))))
    zeros = np.full((data.draw(st.integers(0, 3)), 1), -0.0, rows.dtype)   # x + -0.0 is x, -0.0 included
    assert bits(fp.sum_rows(np.concatenate([rows[list(order)], zeros]))) == bits(got)
    code = fp.codes(rows.astype(fmt.work).reshape(-1), fmt).max()
    top = int(fp.top_of(np.array([code]), fmt)[0])
    on_the_grid = sum(on_grid(float(v), top - fp.LIMB_BITS * fmt.limbs) for v in rows[:, 0].astype(np.float64))
    assert float(got[0].astype(np.float64)) == nearest(on_the_grid, fmt)


@pytest.mark.parametrize("name", list(DTYPES))
@settings(max_examples=80, deadline=None)
@given(values=st.data())
def test_sum_rows_error_bound(name, values):
    """|r - S| <= u|S| + (1+u) n 2**(step - F - 1) max|x| (F = limbs * LIMB_BITS), and exact with one term."""
    terms = values.draw(st.lists(floats(name), min_size=1, max_size=12))
    fmt = fp.format_of(DTYPES[name])
    got = float(fp.sum_rows(rows_of(name, terms))[0].astype(np.float64))
    exact = sum(Fraction(v) for v in terms)
    if math.isinf(got):          # only where the rounded exact sum overflows too
        assert math.isinf(nearest(exact, fmt))
        return
    u = Fraction(1, 2 ** fmt.precision)
    big = max(abs(Fraction(v)) for v in terms)
    bound = u * abs(exact) + (1 + u) * len(terms) * Fraction(2) ** (fmt.step - 1 - fmt.limbs * fp.LIMB_BITS) * big
    assert abs(Fraction(got) - exact) <= bound
    if len(terms) == 1:
        assert got == terms[0]


@pytest.mark.parametrize("name", ["float64", "float32", "float16"])
def test_sum_rows_short_path_gives_the_bits_of_the_general_one(name):
    """sum_rows' short path for small plain tables against codes/encode/decode, the collectives' path."""
    rng = np.random.default_rng(7)
    fmt = fp.format_of(DTYPES[name])
    spread = 8 if name == "float16" else 60
    for _ in range(100):
        shape = (int(rng.integers(1, 6)), int(rng.integers(1, 40)))
        rows = (rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread, shape))).astype(DTYPES[name])
        work = np.asarray(rows, fmt.work)
        code = fp.codes(work.reshape(-1), fmt).reshape(work.shape).max(axis=0)
        limbs = fp.encode(work.reshape(-1), np.broadcast_to(code, work.shape).reshape(-1), fmt)
        total = limbs.reshape(shape[0], shape[1], -1).sum(axis=0)
        general = fp.decode(total, code, fmt, shape[0]).astype(rows.dtype)
        assert bits(fp.sum_rows(rows)) == bits(general)


def test_sum_rows_special_values():
    rows = np.array([[-0.0, -0.0, 0.0, np.inf, np.inf, np.nan, 1e308, 1.0],
                     [-0.0, 0.0, -0.0, 1.0, -np.inf, 1.0, 1e308, -1.0]])
    got = fp.sum_rows(rows)
    assert bits(got[:3]) == bits(np.array([-0.0, 0.0, 0.0]))
    assert got[3] == np.inf and np.isnan(got[4]) and np.isnan(got[5]) and got[6] == np.inf
    assert bits(got[7:]) == bits(np.array([0.0]))        # exact cancellation: +0.0, as IEEE gives


def test_float16_sums_are_exact_then_rounded_once():
    """float16's whole range fits one limb: the result is the correctly rounded exact sum."""
    rng = np.random.default_rng(0)
    rows = (rng.standard_normal((9, 200)) * 100).astype(np.float16)
    got = fp.sum_rows(rows)
    fmt = fp.format_of(np.float16)
    exact = [nearest(sum(Fraction(float(v)) for v in col), fmt) for col in rows.T.astype(np.float64)]
    assert bits(got.astype(np.float64)) == bits(np.array(exact))


# -- the accumulator -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(DTYPES))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_accumulator_same_bits_for_every_split_and_order(name, data):
    dtype = DTYPES[name]
    values = data.draw(st.lists(floats(name), min_size=1, max_size=16))
    one = ReproducibleSum(1, dtype)
    for v in values:
        one.add(np.array([v]).astype(dtype))
    order = data.draw(st.permutations(range(len(values))))
    parts = data.draw(st.integers(1, 4))
    accs = [ReproducibleSum(1, dtype) for _ in range(parts)]
    for j, i in enumerate(order):
        accs[j % parts].add(np.array([values[i]]).astype(dtype))
    total = accs[-1]
    for acc in reversed(accs[:-1]):
        total.merge(acc)
    assert bits(total.value()) == bits(one.value()) and total.count == len(values)
    fmt = fp.format_of(dtype)
    k = 3 if name == "float64" else 2
    got = float(one.value()[0].astype(np.float64))
    exact = sum(Fraction(v) for v in values)
    if math.isinf(got):
        assert math.isinf(nearest(exact, fmt))
        return
    u = Fraction(1, 2 ** fmt.precision)
    big = max(abs(Fraction(v)) for v in values)
    truncation = len(values) * Fraction(2) ** (-BIN_BITS * (k - 1)) * big
    assert abs(Fraction(got) - exact) <= u * abs(exact) + (1 + u) * truncation


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e308]), min_size=1, max_size=6))
def test_accumulator_special_values(values):
    acc = ReproducibleSum(1)
    for v in values:
        acc.add(v)
    got = acc.value()[0]
    has = set(map(repr, values))
    if "nan" in has or ("inf" in has and "-inf" in has):
        assert np.isnan(got)
    elif "inf" in has or "-inf" in has:
        assert got == (np.inf if "inf" in has else -np.inf)
    elif all(v == 0 and math.copysign(1, v) < 0 for v in values):
        assert bits(np.array(got)) == bits(np.array(-0.0))
    else:
        assert got == nearest(sum(Fraction(v) for v in values), fp.format_of(np.float64))


def test_accumulator_complex_and_shapes():
    acc = ReproducibleSum((2, 3), np.complex64)
    acc.add(np.full((2, 3), 1 + 2j, np.complex64)).add(1j)
    assert acc.value().dtype == np.complex64 and np.all(acc.value() == 1 + 3j)
    with pytest.raises(TypeError):
        ReproducibleSum(3, np.int64)
    with pytest.raises(ValueError):
        acc.merge(ReproducibleSum(3, np.complex64))


# -- the mode's switches -------------------------------------------------------------------------------

def test_always_view_adds_the_keyword_to_the_summing_methods_only():
    from mpicoll.comm import reproducible

    class Recorder:
        def Allreduce(self, *args, **kwargs):   # noqa: N802 - mpi4py's name
            return kwargs

        def Bcast(self, *args, **kwargs):   # noqa: N802 - mpi4py's name
            return kwargs

    view = reproducible.always(Recorder())
    assert view.Allreduce(1, 2, algorithm="ring") == {"algorithm": "ring", "reproducible": True}
    assert view.Bcast(1) == {}


def test_the_environment_default_follows_reload(monkeypatch):
    """(This suite's monkeypatch reloads the configuration after each change of the environment.)"""
    from mpicoll.comm import reproducible

    monkeypatch.setenv("MPICOLL_REPRODUCIBLE", "1")
    assert reproducible.DEFAULT[0] and reproducible.wanted(None) is True and reproducible.DEFAULT[0] is True
    assert reproducible.wanted(False) is False
    monkeypatch.setenv("MPICOLL_REPRODUCIBLE", "0")
    assert reproducible.DEFAULT[0]                    # unread again: true until the next call reads it
    assert reproducible.wanted(None) is False and reproducible.DEFAULT[0] is False
    assert reproducible.wanted(True) is True
