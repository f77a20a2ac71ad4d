"""The compiled key builder (mpicoll/program/_callkey.c) decides exactly as the Python definition, for every form.

The compiled key is bytes (every part of the Python key written in a prefix
code), or, for the forms it hands to the Python function, that function's tuple.
Two calls must get equal compiled keys exactly when they get equal Python keys:
an equal key reuses a plan.
"""

from __future__ import annotations

import array
import mmap

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll import Op, config
from mpicoll.program import callkey as plan
from mpicoll.program import plancache

compiled = pytest.mark.skipif(plan.call_key is plan._call_key, reason="mpicoll.program._callkey is not built")

_region = mmap.mmap(-1, 64)
_bytes = bytearray(64)
_x = np.arange(8, dtype=np.float64)
_y = np.zeros(8)
_user_op = MPI.Op.Create(lambda a, b, t: None, commute=True)


def _closed_mmap() -> mmap.mmap:
    region = mmap.mmap(-1, 16)
    region.close()
    return region


def _cases() -> dict[str, tuple]:
    readonly = np.arange(4.0)
    readonly.flags.writeable = False
    return {
        "arrays": (_x, _y, MPI.SUM),
        "in place": (MPI.IN_PLACE, _y, MPI.MAX),
        "root": (_x, _y, MPI.SUM, 1),
        "no args": (),
        "bcast mmap spec": ([_region, 1, MPI.BYTE], 0),
        "bytearray spec": ([_bytes, 8, MPI.DOUBLE], None),
        "tuple spec": ((_bytes, MPI.INT),),
        "ndarray spec": ([_x, MPI.DOUBLE], [_y, 4, MPI.DOUBLE]),
        "array spec": ([array.array("d", [1.0, 2.0]), MPI.DOUBLE],),
        "array int": (array.array("i", [1, 2, 3, 4]),),
        "memoryview double": ([memoryview(_bytes).cast("d"), MPI.DOUBLE],),
        "memoryview int": ([memoryview(_bytes).cast("i"), MPI.INT],),
        "bytes": ([b"abcd", MPI.BYTE],),
        "read-only array": (readonly, _y),
        "2-D Fortran array": (np.zeros((3, 4), order="F"), _y),
        "non-contiguous": (_x[::2], _y[:4]),     # MPI.buffer refuses it: no key
        "empty spec": ([], _y),
        "count and displacement": ([_bytes, (2, 1), MPI.INT], _y),
        "counts list": ([_bytes, [1, 2], [0, 1], MPI.INT], _y),
        "derived datatype": ([_bytes, 1, MPI.INT.Create_contiguous(2).Commit()], _y),
        "user op": (_x, _y, _user_op),
        "mpicoll op": (_x, _y, Op(lambda a, b: a + b, commute=True)),
        "float": (_x, 1.5),
        "bool": (_x, True),
        "numpy int": (_x, np.int64(3)),
        "list of arrays": ([_x, _y],),
        "alltoallv array counts": ([_bytes, array.array("i", [4, 4]), array.array("i", [0, 4]), MPI.BYTE],
                                   [_region, array.array("i", [4, 4]), array.array("i", [0, 4]), MPI.BYTE]),
        "osu alltoallv (counts, displs)": ([_bytes, (array.array("i", [4, 4]), array.array("i", [0, 4])), MPI.BYTE],
                                           [_region, ([4, 4], (0, 4)), MPI.BYTE]),
        "nested too deep": ([_bytes, ([[4], [4]], [0, 4]), MPI.BYTE],),
        "datatype in counts": ([_bytes, (2, MPI.INT), MPI.BYTE],),
        "gatherv list counts": (_x, [_y, [4, 4], [0, 4], MPI.DOUBLE], 0),
        "tuple counts": ([_y, (4, 4), (0, 4), MPI.DOUBLE],),
        "float array counts": ([_bytes, array.array("d", [1.0]), MPI.BYTE],),
        "long array counts": ([_bytes, array.array("i", range(5000)), MPI.BYTE],),
        "bool in counts": ([_bytes, [True, 2], MPI.BYTE],),
        "object": (object(),),
        "bytes-like alone": (_bytes, _region, memoryview(_bytes).cast("d"), b"xy", array.array("h", [1, 2])),
        "closed mmap": (_closed_mmap(),),
    }


def _same_decisions(keys: dict, python: dict) -> None:
    """Compiled keys are equal exactly where Python keys are, None exactly where those are, and a form the
    compiled builder handed on has the Python key itself."""
    for name in keys:
        assert (keys[name] is None) == (python[name] is None), name
        assert type(keys[name]) is bytes or keys[name] == python[name], name
    for a in keys:
        for b in keys:
            assert (keys[a] == keys[b]) == (python[a] == python[b]), (a, b)


@compiled
@pytest.mark.parametrize("algorithm", ["auto", "ring", None])
def test_compiled_key_decides_as_the_python_key(algorithm):
    cases = _cases()
    keys = {name: plan.call_key("Allreduce", args, algorithm) for name, args in cases.items()}
    python = {name: plan._call_key("Allreduce", args, algorithm) for name, args in cases.items()}
    _same_decisions(keys, python)
    if algorithm is not None:
        assert type(keys["arrays"]) is bytes and type(keys["bcast mmap spec"]) is bytes


@compiled
def test_compiled_key_tells_every_part_apart():
    """One call and variants of it that differ in one part each: every compiled key differs."""
    base = (_x, _y, MPI.SUM, 0)
    variants = {
        "base": base,
        "other send memory": (_x[1:], _y[1:], MPI.SUM, 0),
        "shorter": (_x[:4], _y, MPI.SUM, 0),
        "other dtype, same memory": (_x.view(np.int64), _y, MPI.SUM, 0),
        "other op": (_x, _y, MPI.MAX, 0),
        "other root": (_x, _y, MPI.SUM, 1),
        "in place": (MPI.IN_PLACE, _y, MPI.SUM, 0),
        "spec count": ([_x, 8, MPI.DOUBLE], _y, MPI.SUM, 0),
        "spec count 4": ([_x, 4, MPI.DOUBLE], _y, MPI.SUM, 0),
        "spec type": ([_x, 8, MPI.INT64_T], _y, MPI.SUM, 0),
        "tuple spec": ((_x, 8, MPI.DOUBLE), _y, MPI.SUM, 0),
        "mmap": ([_region, 8, MPI.DOUBLE], _y, MPI.SUM, 0),
        "bytearray": ([_bytes, 8, MPI.DOUBLE], _y, MPI.SUM, 0),
        "memoryview as int": ([memoryview(_bytes).cast("i"), MPI.DOUBLE], _y, MPI.SUM, 0),
        "memoryview as bytes": ([memoryview(_bytes), MPI.DOUBLE], _y, MPI.SUM, 0),
    }
    readonly = _x.copy()
    readonly.flags.writeable = False
    variants["read-only"] = (readonly, _y, MPI.SUM, 0)
    keys = {name: plan.call_key("Reduce", args, "auto") for name, args in variants.items()}
    assert all(type(k) is bytes for k in keys.values()), keys
    assert len(set(keys.values())) == len(keys)
    others = {("Allreduce", "auto"), ("Reduce", "ring"), ("Reduce", "rin"), ("Reduc", "auto")}
    assert len({plan.call_key(method, base, algorithm) for method, algorithm in others} | {keys["base"]}) == 5


@compiled
def test_compiled_key_follows_the_configuration_generation(monkeypatch):
    """Keys carry the configuration's generation: a reload (or a changed variable) makes every call miss."""
    args = (_x, _y, MPI.SUM)
    before = plan.call_key("Allreduce", args, "auto")
    assert plan.call_key("Allreduce", args, "auto") == before
    monkeypatch.setenv("MPICOLL_ALGO", "allreduce=ring")
    forced = plan.call_key("Allreduce", args, "auto")
    config.reload()
    assert len({before, forced, plan.call_key("Allreduce", args, "auto")}) == 3
    assert plan._call_key("Allreduce", args, "auto")[2] == config.generation()


@compiled
def test_compiled_key_of_counts_given_by_value():
    counts = [np.array([2, 2], dtype=np.int32), array.array("i", [2, 2]), [2, 2], (2, 2), 4, np.array([2.0, 2.0]),
              None, [1, 3], array.array("i", [1, 3]), array.array("l", [2, 2])]
    forms = {repr(c): c for c in counts}
    keys = {name: plan.call_key("Reduce_scatter", (_x[:4], _y[:2], c, MPI.SUM), "auto", (2,))
            for name, c in forms.items()}
    python = {name: plan._call_key("Reduce_scatter", (_x[:4], _y[:2], c, MPI.SUM), "auto", (2,))
              for name, c in forms.items()}
    _same_decisions(keys, python)


def test_counts_given_by_value_are_keyed_by_their_contents():
    counts = np.array([2, 2], dtype=np.int32)
    args = (_x[:4], _y[:2], counts, MPI.SUM)
    before = plan.call_key("Reduce_scatter", args, "auto", (2,))
    counts[:] = [1, 3]      # the same array object and memory, other contents: another call
    assert plan.call_key("Reduce_scatter", args, "auto", (2,)) != before


@compiled
def test_the_common_forms_never_reach_the_python_function():
    from mpicoll.program import _callkey

    reached = []
    _callkey.init(lambda *a: reached.append(a), config.GENERATION, np.ndarray, plan._BUFFERS,
                  plan._PREDEFINED_TYPES, plan._PREDEFINED_OPS, MPI.Op, MPI.IN_PLACE)
    try:
        common = ["arrays", "in place", "root", "no args", "bcast mmap spec", "bytearray spec", "ndarray spec",
                  "array spec", "memoryview int", "alltoallv array counts", "osu alltoallv (counts, displs)",
                  "gatherv list counts", "tuple counts",
                  "bytes-like alone"]
        for name in common:
            _callkey.call_key("Allreduce", _cases()[name], "auto")
        _callkey.call_key("Reduce_scatter", (_x[:4], _y[:2], [2, 2], MPI.SUM), "auto", (2,))
    finally:
        plan._compiled_call_key()   # bound to the real tables again
    assert reached == []


def test_element_formats_are_part_of_the_key():
    # the same memory read as doubles or as ints must never share a plan
    as_double = [memoryview(_bytes).cast("d"), MPI.DOUBLE]
    as_int = [memoryview(_bytes).cast("i"), MPI.DOUBLE]
    assert plan.call_key("Bcast", (as_double, 0), "auto") != plan.call_key("Bcast", (as_int, 0), "auto")
    doubles, ints = array.array("d", bytes(16)), array.array("i", bytes(16))
    assert plan._call_key("Bcast", (doubles, 0), "auto")[3:] != plan._call_key("Bcast", (ints, 0), "auto")[3:]


def _moved(obj):
    """A copy of a buffer object in new memory, of the same kind and format; anything else as it is."""
    if type(obj) is np.ndarray:
        new = obj.copy(order="K")
        new.flags.writeable = obj.flags.writeable
        return new
    if type(obj) is bytearray:
        return bytearray(obj)
    if type(obj) is bytes:
        return bytes(bytearray(obj))
    if type(obj) is array.array:
        return array.array(obj.typecode, obj)
    if type(obj) is memoryview:
        return memoryview(bytearray(obj.tobytes())).cast(obj.format)
    if type(obj) is mmap.mmap and not obj.closed:
        return mmap.mmap(-1, len(obj))
    if type(obj) in (list, tuple) and obj and type(obj[0]) is not int:
        return type(obj)((_moved(obj[0]), *obj[1:]))
    return obj


def test_a_shape_key_is_the_call_key_without_the_addresses():
    """A call and the same call on copies of its buffers: one shape, their own spans; different calls, other shapes."""
    shapes = {}
    for name, args in _cases().items():
        moved = tuple(_moved(a) for a in args)
        key = plan._call_key("Allreduce", args, "auto")
        shape, spans = plan.shape_key("Allreduce", args, "auto")
        moved_shape, moved_spans = plan.shape_key("Allreduce", moved, "auto")
        assert (shape is None) == (key is None), name
        if key is None:
            continue
        assert moved_shape == shape, name
        assert plan._call_key("Allreduce", moved, "auto") != key or not spans, name
        assert len(spans) == len(moved_spans) and all(n == m for (_, n), (_, m) in zip(spans, moved_spans)), name
        assert all(address != 0 for address, n in moved_spans if n), name
        shapes.setdefault(shape, []).append(name)
    assert all(len(names) == 1 for names in shapes.values()), [names for names in shapes.values() if len(names) > 1]


def test_overlapping_spans_are_told_apart():
    assert plancache._disjoint([(100, 8), (108, 8)]) and plancache._disjoint([(100, 8), (104, 0)])
    assert not plancache._disjoint([(100, 8), (104, 8)]) and not plancache._disjoint([(104, 8), (100, 8)])
    assert plancache._disjoint([(0, 4), (8, 4), (4, 4)]) and not plancache._disjoint([(0, 4), (8, 4), (2, 4)])
    assert plancache._disjoint([]) and plancache._disjoint([(5, 10)])


@compiled
def test_a_key_made_again_is_the_memo_s_object_and_only_an_equal_one():
    """The compiled builder hands back the key it made a moment ago for equal bytes (its hash is not computed
    again) and a new one otherwise: 40 calls of other memory, made twice in turn (more than its 16 slots hold),
    give 40 distinct keys equal to the first round's, and a call repeated at once gets the same object."""
    arrays = [np.zeros(4 + i % 3) for i in range(40)]
    first = [plan.call_key("Bcast", (a, 0), "auto") for a in arrays]
    again = [plan.call_key("Bcast", (a, 0), "auto") for a in arrays]
    assert first == again and len(set(first)) == len(arrays)
    key = plan.call_key("Allreduce", (_x, _y, MPI.SUM), "ring")
    assert plan.call_key("Allreduce", (_x, _y, MPI.SUM), "ring") is key
    assert plan.call_key("Allreduce", (_x, _y, MPI.MAX), "ring") != key
    assert plan.call_key("Allreduce", (_y, _x, MPI.SUM), "ring") != key
