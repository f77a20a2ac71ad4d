"""The compiled reduction step (``mpicoll/engine/_steps.c``) gives the same bits as the NumPy ufunc it replaces.

``mpicoll.engine.blocking`` binds a reduction of small NumPy blocks as ``_direct.Reduce`` where C's
arithmetic is NumPy's (+ and * of floats, every integer op it maps); these check that claim on values chosen
to break it (NaN, infinities, signed zeros, subnormals, wrapping integers), in place and not, and that every
other case keeps the ufunc.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mpicoll.engine import blocking

pytestmark = pytest.mark.skipif(blocking._REDUCE is None, reason="mpicoll.engine._direct is not built")

FLOAT_UFUNCS = [np.add, np.multiply]
INT_UFUNCS = [np.add, np.multiply, np.minimum, np.maximum, np.bitwise_and, np.bitwise_or, np.bitwise_xor]
INT_TYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]


def _same(ufunc, a, b, in_place: str) -> None:
    want = ufunc(a, b)
    a, b = a.copy(), b.copy()
    out = {"no": np.empty_like(a), "left": a, "right": b}[in_place]
    step = blocking._compiled_step(ufunc, a, b, out)
    assert type(step) is blocking._REDUCE
    step()
    assert out.tobytes() == want.tobytes(), (ufunc.__name__, a.dtype, in_place)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["f4", "f8"]), ufunc=st.sampled_from(FLOAT_UFUNCS),
       in_place=st.sampled_from(["no", "left", "right"]))
def test_float_steps_are_numpys_bits(data, dtype, ufunc, in_place):
    n = data.draw(st.integers(1, 40))
    elements = st.floats(width=int(dtype[1]) * 8, allow_nan=True, allow_infinity=True, allow_subnormal=True)
    a = data.draw(hnp.arrays(dtype, n, elements=elements))
    b = data.draw(hnp.arrays(dtype, n, elements=elements))
    with np.errstate(all="ignore"):
        _same(ufunc, a, b, in_place)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(INT_TYPES), ufunc=st.sampled_from(INT_UFUNCS),
       in_place=st.sampled_from(["no", "left", "right"]))
def test_integer_steps_are_numpys_bits(data, dtype, ufunc, in_place):
    n = data.draw(st.integers(1, 40))
    a = data.draw(hnp.arrays(dtype, n))
    b = data.draw(hnp.arrays(dtype, n))
    _same(ufunc, a, b, in_place)


def test_other_cases_keep_the_ufunc():
    x = np.zeros(4096)
    assert blocking._compiled_step(np.maximum, x[:4], x[4:8], x[8:12]) is None        # float maximum: NumPy's rules
    assert blocking._compiled_step(np.add, x[1:5], x[2:6], x[0:4]) is None            # partly overlapping
    assert blocking._compiled_step(np.add, x, x, x) is None                           # large: NumPy's loops
    assert blocking._compiled_step(np.add, x[:4].astype(">f8"), x[:4], x[:4]) is None  # not native
    assert blocking._compiled_step(np.add, x[:4].astype("f2"), x[:4].astype("f2"), x[:4].astype("f2")) is None
    raw = np.zeros(40, np.uint8)
    unaligned = np.frombuffer(raw.data[1:33], np.float64)
    assert blocking._compiled_step(np.add, unaligned, unaligned, np.zeros(4)) is None   # unaligned


def test_copies_are_memcpy_where_they_can_be():
    x = np.arange(12.0)
    step = blocking._copy(x[6:10], x[0:4], np)
    assert type(step) is blocking._REDUCE
    step()
    assert x[6:10].tolist() == [0.0, 1.0, 2.0, 3.0]
    pairs = np.zeros(3, dtype=[("v", "f8"), ("i", "i4")])     # any dtype: its bytes are copied
    blocking._copy(pairs, np.array([(1.5, 2)] * 3, dtype=pairs.dtype), np)()
    assert pairs.tolist() == [(1.5, 2)] * 3
    assert type(blocking._copy(x[1:5], x[0:4], np)) is not blocking._REDUCE     # partly overlapping: NumPy
    assert type(blocking._copy(x[::2], x[:6], np)) is not blocking._REDUCE      # not contiguous: NumPy
    objects = np.array([None, "a"], dtype=object)
    assert type(blocking._copy(objects, objects[::-1].copy(), np)) is not blocking._REDUCE
