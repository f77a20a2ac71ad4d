"""Parse the buffer arguments of mpi4py's uppercase collectives.

mpi4py accepts a buffer-like object alone or inside a list or tuple with a count,
displacement and MPI datatype (``[buf, datatype]``, ``[buf, count, datatype]``,
``[buf, (count, displ), datatype]``, ``[buf, count, displ, datatype]``).  Each form
becomes a :class:`Buffer`: a one-dimensional typed array covering exactly the
elements the call may touch, with the array namespace (NumPy or CuPy) it lives
in.  An explicit datatype wins over the object's own element type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.data import datatypes, memory

__all__ = ["Buffer", "VBuffer", "parse", "parse_v", "parse_blocks", "is_in_place", "as_count", "host_view"]


@dataclass(frozen=True)
class Buffer:
    """Exactly the ``count`` elements of ``dtype`` that a call may read or write."""

    array: Any        # one-dimensional, contiguous, numpy or cupy
    dtype: np.dtype
    count: int
    xp: Any           # the array namespace: numpy or cupy
    writable: bool
    unit: int = 1     # elements of ``dtype`` per element of the MPI datatype (never split)
    datatype: Any = None  # the explicit MPI datatype, if one was given

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    @property
    def on_gpu(self) -> bool:
        return self.xp is not np


def is_in_place(obj: Any) -> bool:
    """``MPI.IN_PLACE`` or ``None``: mpi4py treats both as 'in place' for a send buffer."""
    return obj is None or obj is MPI.IN_PLACE


def as_count(value: Any, what: str) -> int:
    """An int, NumPy integer or 0-d integer array as a non-negative int."""
    if isinstance(value, (bool, np.bool_)):
        raise errors.CountTypeError(f"{what} must be an integer, got {value!r}")
    try:
        n = int(np.asarray(value).item()) if not isinstance(value, int) else value
    except Exception:
        raise errors.CountTypeError(f"{what} must be an integer, got {type(value).__name__}") from None
    if isinstance(value, float) or (hasattr(value, "dtype") and np.asarray(value).dtype.kind not in "iu"):
        raise errors.CountTypeError(f"{what} must be an integer, got {value!r}")
    if n < 0:
        raise errors.CountError(f"{what} must be >= 0, got {n}")
    return n


def parse(spec: Any, what: str, *, writable: bool = False) -> Buffer:
    """Turn one buffer argument (``what`` names it in errors) into a :class:`Buffer`."""
    obj, count, displ, datatype = _split_spec(spec, what, pair=(list, tuple))
    array, xp, tm, datatype = _typed_array(obj, datatype, what, writable)
    displ = 0 if displ is None else as_count(displ, f"{what}: displacement")
    if tm is not None and not tm.dense:  # a non-contiguous datatype: its elements, packed by MPI
        raw = array.view(np.uint8)
        count = max(raw.shape[0] // tm.extent - displ, 0) if count is None else as_count(count, f"{what}: count")
        packed = datatypes.pack(raw, datatype, tm, [count], [displ], what, writable=writable)
        return Buffer(packed.array, tm.element, count * tm.per, np, _is_writable(array), 1, _packed_type(tm, datatype))
    factor = tm.per if tm is not None else 1
    writable_array = _is_writable(array)
    units = array.shape[0] // factor
    count = units - displ if count is None else as_count(count, f"{what}: count")
    view = _elements(array, displ * factor, (displ + count) * factor, xp, what,
                     f"count {count} at displacement {displ} needs {displ + count} elements", factor)
    return Buffer(view, array.dtype, count * factor, xp, writable_array, factor, datatype)


def _elements(array: Any, lo: int, hi: int, xp: Any, what: str, needs: str, unit: int = 1) -> Any:
    """Elements ``lo .. hi`` of ``array``, also past its end where the memory is known to be there or
    cannot be known (an address with a datatype: MPI takes it, see :func:`mpicoll.data.memory.known_bounds`).

    Raises
    ------
    CountError
        The elements reach past the memory known to be there (``needs`` says what the call needs).
    """
    if hi <= array.shape[0]:
        return array[lo:hi]
    k = array.dtype.itemsize
    bounds = memory.known_bounds(array) if xp is np else (0, array.nbytes)
    if bounds is not None and hi * k > bounds[1]:
        raise errors.CountError(f"{what}: {needs}, the buffer has {array.shape[0] // unit}" +
                                ("" if bounds[1] == array.nbytes else
                                 f" (the memory it lies in, {bounds[1] // (k * unit)})"))
    return memory.span_view(array, lo * k, hi * k, array.dtype)


def parse_blocks(spec: Any, what: str, blocks: int, *, writable: bool = False) -> Buffer:
    """A buffer of ``blocks`` equal blocks, one per rank (Gather's and Scatter's root buffer,
    Allgather's recvbuf, Alltoall's buffers), as mpi4py reads it.

    An explicit count in ``[buf, count, datatype]`` is the count of one block (the
    displacement is where block 0 starts); without one, the buffer must split into
    ``blocks`` equal blocks.
    """
    obj, count, displ, datatype = _split_spec(spec, what)
    if count is not None:
        count = as_count(count, f"{what}: count") * blocks
    buf = parse([obj, count, displ] + ([] if datatype is None else [datatype]), what, writable=writable)
    units = buf.count // buf.unit
    if blocks and units % blocks:
        raise errors.CountError(f"{what}: {units} elements do not split into {blocks} equal blocks (one per rank); "
                         "pass [buf, count, datatype] with the count per rank")
    return buf


@dataclass(frozen=True)
class VBuffer:
    """A buffer split into ``len(counts)`` blocks: block i is ``counts[i]`` elements from ``displs[i]``.

    ``array`` is the whole buffer (one-dimensional, from element 0); counts and
    displacements are in elements of ``dtype`` (already multiplied by ``unit``).
    """

    array: Any
    dtype: np.dtype
    counts: tuple[int, ...]
    displs: tuple[int, ...]
    xp: Any
    writable: bool
    unit: int = 1
    datatype: Any = None

    @property
    def nbytes(self) -> int:
        return sum(self.counts) * self.dtype.itemsize


def parse_v(spec: Any, what: str, blocks: int, *, writable: bool = False) -> VBuffer:
    """Parse a v-variant buffer argument (Gatherv, Scatterv, Allgatherv, Alltoallv, ...).

    Forms, as in mpi4py: ``buf`` (split into ``blocks`` equal blocks),
    ``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, counts, displs]``, each
    optionally followed by a datatype.  ``counts`` may be one int (the same for
    every block); ``displs`` default to the running sum of ``counts``, and one
    int ``d`` means block i starts at ``i * d``.  Every
    block must lie inside the buffer.
    """
    obj, counts, displs, datatype = _split_spec(spec, what, pair=(tuple,))
    array, xp, tm, datatype = _typed_array(obj, datatype, what, writable)
    unit = tm.per if tm is not None and tm.dense else 1
    units = array.shape[0] // unit if tm is None or tm.dense else array.nbytes // tm.extent
    if counts is None:
        counts = [units // blocks if blocks else 0] * blocks
    elif isinstance(counts, (int, np.integer)) or np.ndim(counts) == 0:
        counts = [as_count(counts, f"{what}: count")] * blocks
    else:
        counts = [as_count(c, f"{what}: counts[{i}]") for i, c in enumerate(np.asarray(counts).reshape(-1))]
    if len(counts) != blocks:
        raise errors.CountError(f"{what}: expected {blocks} counts (one per rank), got {len(counts)}")
    if displs is None:
        displs = [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])] if blocks else []
    elif isinstance(displs, (int, np.integer)) or np.ndim(displs) == 0:  # one int: the stride between blocks
        stride = as_count(displs, f"{what}: displacement")
        displs = [i * stride for i in range(blocks)]
    else:
        displs = [as_count(d, f"{what}: displs[{i}]") for i, d in enumerate(np.asarray(displs).reshape(-1))]
        if len(displs) != blocks:
            raise errors.CountError(f"{what}: expected {blocks} displacements (one per rank), got {len(displs)}")
    if tm is not None and not tm.dense:  # a non-contiguous datatype: its elements, packed by MPI
        packed = datatypes.pack(array.view(np.uint8), datatype, tm, counts, displs, what, writable=writable)
        return VBuffer(packed.array, tm.element, tuple(c * tm.per for c in counts), packed.offsets, np,
                       _is_writable(array), 1, _packed_type(tm, datatype))
    end = max((d + c for c, d in zip(counts, displs) if c), default=0)
    if end > units:   # past the object: also fine where the memory is there (see _elements)
        i, c, d = next((i, c, d) for i, (c, d) in enumerate(zip(counts, displs)) if c and d + c == end)
        array = _elements(array, 0, end * unit, xp, what,
                          f"block {i} (count {c} at displacement {d}) needs {end} elements", unit)
    return VBuffer(array, array.dtype, tuple(c * unit for c in counts), tuple(d * unit for d in displs), xp,
                   _is_writable(array), unit, datatype)


def _split_spec(spec: Any, what: str, pair: tuple[type, ...] = (list, tuple)) -> tuple[Any, Any, Any, Any]:
    """(object, count(s), displacement(s), datatype) of any mpi4py buffer form.

    ``[buf, X, datatype]`` with X an instance of ``pair`` of length 2 reads X as
    (count, displacement): for plain buffers a list or tuple, for v-variant ones a
    tuple only (a list there is the counts), as mpi4py does.
    """
    if not isinstance(spec, (list, tuple)):
        return spec, None, None, None
    items = list(spec)
    if not items:
        raise errors.BufferValueError(f"{what}: empty buffer specification")
    obj, rest = items[0], items[1:]
    datatype = rest.pop() if rest and isinstance(rest[-1], (MPI.Datatype, str)) else None
    first = second = None
    if len(rest) == 1 and isinstance(rest[0], pair):
        if len(rest[0]) != 2:
            raise errors.BufferValueError(f"{what}: expected (count, displacement), got {rest[0]!r}")
        first, second = rest[0]
    elif len(rest) == 1:
        first = rest[0]
    elif len(rest) == 2:
        first, second = rest
    elif rest:
        raise errors.BufferValueError(f"{what}: cannot read buffer specification; expected buf, [buf, datatype], "
                         "[buf, count, datatype], [buf, (count, displ), datatype] or [buf, count, displ, datatype]")
    return obj, first, second, datatype


def _typed_array(obj: Any, datatype: Any, what: str, writable: bool
                 ) -> tuple[Any, Any, datatypes.Typemap | None, Any]:
    """(one-dimensional array, namespace, the datatype's typemap or None, the datatype or None).

    With a dense datatype the array is a view typed by its element type; with a
    non-contiguous one it is the buffer as it is (to be packed).
    """
    array, xp = _as_array(obj, what)
    if writable and not _is_writable(array):
        raise errors.BufferValueError(f"{what}: the buffer is read-only, but it receives data")
    if isinstance(datatype, str):
        datatype = _datatype_of_code(datatype, what)
    if datatype is None:
        return array, xp, None, None
    tm = datatypes.describe(datatype, what)
    if tm.dense:
        return _retype(array, tm.element), xp, tm, datatype
    return array, xp, tm, datatype   # (device memory too: packed from a host copy, see datatypes.pack)


def _packed_type(tm: datatypes.Typemap, datatype: MPI.Datatype) -> MPI.Datatype:
    """The MPI datatype of a packed buffer's elements: its one basic type, or the datatype itself when
    its signature mixes basic types (reductions refuse those, see :func:`mpicoll.data.datatypes.check_reducible`)."""
    from mpi4py.util import dtlib

    return datatype if tm.mixed else dtlib.from_numpy_dtype(tm.element)


def _datatype_of_code(code: str, what: str) -> MPI.Datatype:
    try:
        return MPI._typedict[code]
    except KeyError:
        raise errors.DatatypeError(f"{what}: unknown MPI type code {code!r}") from None


def _as_array(obj: Any, what: str) -> tuple[Any, Any]:
    """A one-dimensional view of ``obj`` (in memory order) and its array namespace; never a copy.

    The objects mpi4py accepts: the buffer protocol (NumPy arrays in C or Fortran
    order, bytes, bytearray, memoryview, mmap, array.array), ``__cuda_array_interface__``
    and DLPack producers.  Host memory becomes a NumPy view, device memory a CuPy one.
    """
    if isinstance(obj, np.ndarray):
        return _flat(obj, what), np
    if hasattr(obj, "__cuda_array_interface__"):
        if not memory.cai_on_device(obj):
            return _flat(memory.cai_host_view(obj), what), np
        import cupy  # noqa: PLC0415 - only needed for GPU buffers

        return _flat(cupy.asarray(obj), what), cupy
    try:
        return _flat(np.asarray(memoryview(obj)), what), np
    except TypeError:
        pass
    if hasattr(obj, "__dlpack__"):
        view = memory.dlpack_view(obj)
        if view is not None:
            return _flat(view, what), np
        import cupy  # noqa: PLC0415

        return _flat(cupy.from_dlpack(obj), what), cupy
    raise errors.BufferTypeError(f"{what}: expected a buffer (NumPy array, bytes-like, DLPack or CUDA array), "
                                 f"got {type(obj).__name__}")


def host_view(obj: Any) -> np.ndarray | None:
    """A one-dimensional NumPy view of a host buffer of any kind mpi4py takes (NumPy, bytes-like, DLPack or
    CUDA array interface over host memory), or None: device memory, or not a contiguous buffer."""
    try:
        array, xp = _as_array(obj, "buffer")
    except (errors.MPIError, TypeError, ValueError, BufferError):
        return None
    return array if xp is np else None


def _flat(arr: Any, what: str) -> Any:
    """``arr`` as one dimension in memory order: C or Fortran contiguous, as mpi4py accepts."""
    if arr.flags.c_contiguous:
        return arr.reshape(-1)
    if arr.flags.f_contiguous:
        return arr.reshape(-1, order="F")
    raise errors.BufferValueError(f"{what}: the buffer is not contiguous (neither C nor Fortran order)")


def _is_writable(arr: Any) -> bool:
    flags = getattr(arr, "flags", None)
    return bool(getattr(flags, "writeable", True))


def _retype(array: Any, dtype: np.dtype) -> Any:
    """View the bytes of ``array`` as ``dtype`` (an explicit datatype wins)."""
    if array.dtype == dtype:
        return array
    raw = array.view(np.uint8)
    usable = raw.shape[0] - raw.shape[0] % dtype.itemsize
    return raw[:usable].view(dtype)
