"""The object collectives' slot codec: the compiled functions (``mpicoll.calls.objects._codec``) do what the
definitions in :mod:`mpicoll.calls.objects.codec` do, byte for byte and error for error."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

from mpicoll.calls.objects import codec

try:
    COMPILED = importlib.import_module("mpicoll.calls.objects._codec")
except ImportError:
    COMPILED = None

SLOT, INLINE = 64, 56
DEFINED = (codec._put, codec._put_many, codec._load)
IMPLEMENTATIONS = [pytest.param(DEFINED, id="python"),
                   pytest.param((COMPILED.put, COMPILED.put_many, COMPILED.load) if COMPILED else DEFINED, id="c",
                                marks=pytest.mark.skipif(COMPILED is None, reason="the codec is not built"))]
OBJECTS = [None, 0, -7, 2**70, 1.5, "é", b"", b"x" * INLINE, (1, (2, 3)), {"a": [1, 2]}, b"y" * 300]


def unpicklable():
    return lambda: 0


def name(obj) -> str:
    """A test id that is the same in every process (a lambda's repr holds its address)."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(obj))


def run(impl, fn, *args):
    """``fn`` of ``impl`` on a fresh buffer: (the buffer's bytes, the result with errors as their type)."""
    put, put_many, load = impl
    buf = np.full(SLOT * 4, 0xAB, np.uint8)
    result = {"put": put, "put_many": put_many, "load": load}[fn](memoryview(buf), *args)
    if isinstance(result, tuple):
        result = tuple(type(x) if isinstance(x, BaseException) else x for x in result)
    return buf.tobytes(), result


@pytest.mark.parametrize("obj", OBJECTS + [unpicklable()], ids=name)
def test_put_is_the_definition(obj):
    if COMPILED is None:
        pytest.skip("the codec is not built")
    impl = (COMPILED.put, COMPILED.put_many, COMPILED.load)
    assert run(impl, "put", obj, 3, INLINE) == run(DEFINED, "put", obj, 3, INLINE)


@pytest.mark.parametrize("objects", [[1, "a", None], [b"y" * 300, 2], [1, unpicklable(), 3], [], (4, 5)], ids=name)
def test_put_many_is_the_definition(objects):
    if COMPILED is None:
        pytest.skip("the codec is not built")
    impl = (COMPILED.put, COMPILED.put_many, COMPILED.load)
    assert run(impl, "put_many", objects, 2, SLOT, INLINE) == run(DEFINED, "put_many", objects, 2, SLOT, INLINE)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_what_is_put_loads_back_and_what_does_not_fit_or_failed_does_not(impl):
    put, put_many, load = impl
    buf = np.zeros(SLOT * 4, np.uint8)
    view = memoryview(buf)
    fits = [None, 0, "é", (1, (2, 3)), {"a": [1, 2]}]
    pickles, longest, error = put_many(view, fits[:4], 0, SLOT, INLINE)
    assert error is None and longest == max(len(p) for p in pickles)
    assert load(view, 4, SLOT, INLINE) == fits[:4]
    assert load(view, 0, SLOT, INLINE) == []
    data, length, error = put(view, b"y" * 300, 0, INLINE)
    assert error is None and length == len(data) > INLINE
    assert load(view, 1, SLOT, INLINE) is None             # did not fit: the caller's slow path
    data, length, error = put(view, unpicklable(), 5, INLINE)
    assert data is None and length == codec.FAILED - 5 and isinstance(error, Exception)
    assert load(view, 1, SLOT, INLINE) is None             # failed
    pickles, longest, error = put_many(view, [1, unpicklable()], 5, SLOT, INLINE)
    assert pickles == [None, None] and longest == codec.FAILED - 5 and error is not None
    assert np.frombuffer(buf, np.int64)[[0, SLOT // 8]].tolist() == [codec.FAILED - 5] * 2


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_an_interrupt_is_not_taken_for_a_failed_object(impl):
    """Only an ``Exception`` while pickling fails the object (the call goes on and raises it after); anything
    else (``KeyboardInterrupt``) propagates at once."""
    put, put_many, _ = impl

    class Interrupting:
        def __reduce__(self):
            raise KeyboardInterrupt

    buf = memoryview(np.zeros(SLOT * 2, np.uint8))
    with pytest.raises(KeyboardInterrupt):
        put(buf, Interrupting(), 0, INLINE)
    with pytest.raises(KeyboardInterrupt):
        put_many(buf, [1, Interrupting()], 0, SLOT, INLINE)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_no_memory_kept_across_calls(impl):
    """Every path (fits, too long, fails; one object, a sequence, loads) called many times keeps no memory:
    what the compiled functions make they hand back or release."""
    import gc
    import tracemalloc

    put, put_many, load = impl
    buf = memoryview(np.zeros(SLOT * 4, np.uint8))
    bad = unpicklable()

    def once():
        put(buf, (1, "two"), 0, INLINE)
        load(buf, 1, SLOT, INLINE)
        put(buf, b"y" * 300, 0, INLINE)
        put(buf, bad, 1, INLINE)
        put_many(buf, [1, "a", b"y" * 300], 0, SLOT, INLINE)
        put_many(buf, [1, bad, 3], 2, SLOT, INLINE)
        put_many(buf, ["x", (2,), None], 0, SLOT, INLINE)
        load(buf, 3, SLOT, INLINE)

    for _ in range(200):
        once()
    gc.collect()
    tracemalloc.start()
    try:
        first = tracemalloc.get_traced_memory()[0]
        for _ in range(3000):
            once()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - first
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept after 3000 rounds"
