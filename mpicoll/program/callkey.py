"""The plan cache's key of a call: what determines its binding, built on every blocking call.

The key (:func:`call_key`) is built from:

- each buffer's *memory*: its address, extent and writability, and how the
  call reads it (a NumPy array's dtype; another object's type and element
  format);
- the counts, displacements and (predefined) datatypes of ``[buf, ...]`` specs;
- the op, the root, the algorithm asked for, and the configuration's generation
  (:func:`mpicoll.config.reload` makes every plan be prepared anew).

It is compiled when it can be (``mpicoll/program/_callkey.c``, an optional C
extension whose keys, bytes, are equal exactly where those of the Python
definition, :func:`_call_key`, are; it hands that function the forms it does
not handle itself).  The same extension runs the whole hit of a blocking call
(:func:`mpicoll.comm.dispatch.run_blocking`).  A call's *shape*
(:func:`shape_key`) is its key without the buffers' addresses.  Calls the key
cannot describe (derived datatypes, user objects of unknown kind) get None:
they are not cached.  A DLPack tensor with a ``data_ptr()`` (torch) is keyed
by identity and where its data lie, with no export.
"""

from __future__ import annotations

import array
import mmap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import gpu as backends
from mpicoll.compiled import extension
from mpicoll.config import GENERATION
from mpicoll.data.ops import Op

__all__ = ["call_key", "shape_key", "held"]

_PLAIN = (int, str, float, bool, type(None))
_BUFFERS = frozenset((bytearray, bytes, memoryview, mmap.mmap, array.array, MPI.buffer))   # MPI.memory too
_IN_PLACE = MPI.IN_PLACE
_buffer = MPI.buffer
# mpi4py's predefined datatypes and reduction ops are module-level objects alive for the whole run:
# recognised by identity (cheaper than Datatype.is_predefined or Op.__eq__) and keyed by handle
# (their key parts are made once: ``("dt", handle)``, ``("op", handle)``)
_PREDEFINED_TYPES = {id(v): ("dt", v.handle) for v in vars(MPI).values()
                     if type(v) is MPI.Datatype and v != MPI.DATATYPE_NULL}
_PREDEFINED_OPS = {id(v): ("op", v.handle) for v in vars(MPI).values() if type(v) is MPI.Op and v != MPI.OP_NULL}


class _Uncacheable(Exception):
    """Raised inside the key builder for an argument the key cannot describe."""


def _element(obj: Any, t: type) -> str:
    """The element format a bytes-like object is read as (NumPy reads a buffer in its own format)."""
    if t is array.array:
        return obj.typecode
    if t is memoryview:
        return obj.format
    return "B"


def _address(buf: Any, spans: list | None) -> int | None:
    """``buf``'s address for a call's key; for its shape's key (``spans`` given), None, and the span noted."""
    if spans is None:
        return buf.address
    spans.append((buf.address, buf.nbytes))
    return None


def _memory(obj: Any, spans: list | None = None) -> tuple:
    """What identifies the memory of one buffer object: address, extent, writability, element format."""
    t = type(obj)
    if t in _BUFFERS or isinstance(obj, np.ndarray):
        try:
            buf = _buffer(obj)   # raises for a non-contiguous array (not cached; prepare explains)
        except Exception:
            raise _Uncacheable from None
        element = obj.dtype if isinstance(obj, np.ndarray) else (t, _element(obj, t))
        return (_address(buf, spans), buf.nbytes, buf.readonly, element)
    if backends.on_device(obj):     # a GPU array: keyed by identity, kept alive by the entry (see held)
        return ("device", id(obj), obj.shape, obj.strides, obj.dtype, type(obj))
    if _keyed_by_identity(t):
        # a DLPack tensor that says where its data lie (torch): keyed by identity (kept alive by the entry, see
        # held), data pointer, shape and strides, so that a tensor given other storage or shape misses; a hit
        # exports nothing (a DLPack export costs more than the whole call)
        return ("dlpack", id(obj), t, obj.data_ptr(), tuple(obj.shape), obj.stride(), obj.dtype)
    raise _Uncacheable


def _value(obj: Any) -> Any:
    """A hashable stand-in for counts, displacements, datatypes and other plain arguments."""
    t = type(obj)
    if t in _PLAIN:
        return obj
    if t is list or t is tuple:
        return (t, *map(_value, obj))
    if isinstance(obj, MPI.Datatype):
        if not obj.is_predefined:   # a derived datatype may be freed and its handle reused
            raise _Uncacheable
        return ("dt", obj.handle)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "iu" or obj.size > 4096:
            raise _Uncacheable
        return ("ints", obj.tobytes(), obj.dtype.str, obj.shape)
    if t is array.array and obj.typecode in "bBhHiIlLqQ" and len(obj) <= 4096:   # counts as array("i", ...)
        return ("array", obj.typecode, obj.tobytes())
    if isinstance(obj, np.integer):
        return int(obj)
    raise _Uncacheable


def _spec(spec: Any, key: list, spans: list | None) -> None:
    """Append the key of a ``[buf, count, displ, datatype]``-style spec (the common forms inline)."""
    if not spec:
        raise _Uncacheable
    obj = spec[0]
    t = type(obj)
    key.append((type(spec), len(spec)))
    if t in _BUFFERS:
        buf = _buffer(obj)
        key += (_address(buf, spans), buf.nbytes, buf.readonly, t, _element(obj, t))
    else:
        key.append(_memory(obj, spans))
    for item in spec[1:]:
        predefined = _PREDEFINED_TYPES.get(id(item))
        if predefined is not None:
            key.append(predefined)
        elif type(item) is int:
            key.append(item)
        else:
            key.append(_value(item))


def _call_key(method: str, args: Sequence[Any], algorithm: Any, values: tuple[int, ...] = (),
              spans: list | None = None) -> tuple | None:
    """The plan cache's key for a blocking call, or None: the call must not be cached.

    This is the definition; :func:`call_key` is the compiled builder
    (``mpicoll/program/_callkey.c``: bytes keys that decide as these tuples do) when
    that was built, and this function otherwise.

    ``values`` are the positions of arguments that are counts, not buffers
    (``Reduce_scatter``'s ``recvcounts``).  This runs on every blocking call, so
    the common arguments (NumPy arrays, bytes-like objects in ``[buf, count,
    datatype]`` specs, ints, predefined datatypes and ops) are handled inline.

    A NumPy array is keyed by address, extent, writability and dtype: it is
    contiguous (``MPI.buffer`` refuses it otherwise) and bound in memory order,
    so its shape and strides do not change the binding.  What the entry must
    keep alive come from :func:`held`, computed only when a plan is stored.

    With a list ``spans``, the key leaves every buffer's address out (it is the
    key of the call's *shape*, see :func:`shape_key`) and the buffers' ``(address,
    nbytes)`` are appended to ``spans`` instead, in the order of the arguments.
    """
    if type(algorithm) is not str:
        return None
    key: list = [method, algorithm, GENERATION[0]]
    try:
        for i, a in enumerate(args):
            t = type(a)
            if values and i in values:    # counts by value, even in a NumPy array (its contents may change)
                key.append(_value(a))
            elif t is np.ndarray:
                buf = _buffer(a)
                key += (_address(buf, spans), buf.nbytes, buf.readonly, a.dtype)
            elif t is int or a is None:
                key.append(a)
            elif t is list or t is tuple:
                _spec(a, key, spans)
            elif t is MPI.Op and id(a) in _PREDEFINED_OPS:
                key.append(_PREDEFINED_OPS[id(a)])
            elif a is _IN_PLACE:
                key.append("IN_PLACE")
            elif isinstance(a, (MPI.Op, Op)):   # kept alive by the entry (see held): its id is not reused meanwhile
                key.append(("op", id(a), a.handle if isinstance(a, MPI.Op) else 0))
            else:
                key.append(_memory(a, spans))
    except Exception:   # _Uncacheable, or e.g. MPI.buffer refused a non-contiguous array: prepare explains
        return None
    return tuple(key)


def _compiled_call_key() -> Callable[..., tuple | None]:
    """The compiled key builder bound to this module's tables, or this module's own where it is not built."""
    _callkey = extension("_callkey")
    if _callkey is None:
        return _call_key
    _callkey.init(_call_key, GENERATION, np.ndarray, _BUFFERS, _PREDEFINED_TYPES, _PREDEFINED_OPS,
                  MPI.Op, _IN_PLACE)
    return _callkey.call_key


#: ``call_key(method, args, algorithm, values=())``: what every blocking call runs (see :func:`_call_key`)
call_key = _compiled_call_key()


def shape_key(method: str, args: Sequence[Any], algorithm: Any,
              values: tuple[int, ...] = ()) -> tuple[tuple | None, list]:
    """The key of a call's *shape*, its cache key without the buffers' addresses; and its buffers' spans.

    The spans are the host buffers' ``(address, nbytes)``, in the order of the
    arguments: the memory a plan may view by address (:meth:`Plan.detach`).  Two
    calls of one shape differ only in where their buffers lie, so the plan of one,
    moved (:meth:`Plan.rebased`), is the plan of the other, provided that in
    neither call two buffers overlap (:meth:`PlanCache.rebased` checks that).
    The key is None where the call's is (the call is not cached).
    """
    spans: list = []
    return _call_key(method, args, algorithm, values, spans), spans


def _keyed_by_identity(t: type) -> bool:
    """A DLPack tensor type that says where its data lie (torch's ``data_ptr()``); NumPy arrays are not."""
    return getattr(t, "__dlpack__", None) is not None and getattr(t, "data_ptr", None) is not None


def held(args: Sequence[Any], values: tuple[int, ...] = ()) -> list:
    """The objects the cache entry of a cacheable call keeps alive.

    User-defined ops, GPU arrays, DLPack tensors and NumPy arrays' dtypes: the key names them by identity.
    """
    refs: list = []
    for i, a in enumerate(args):
        if i in values or a is None or a is _IN_PLACE or type(a) is int:
            continue
        obj = a[0] if (type(a) is list or type(a) is tuple) and a else a
        if isinstance(obj, (MPI.Op, Op)):
            if id(obj) not in _PREDEFINED_OPS:
                refs.append(obj)
        elif backends.on_device(obj) or _keyed_by_identity(type(obj)):
            refs.append(obj)
        elif isinstance(obj, np.ndarray):
            refs.append(obj.dtype)   # the compiled key names a dtype by identity (small; no user memory)
    return refs
