"""MPI datatypes in mpicoll's buffers: typed views where the layout allows, MPI's Pack/Unpack where not.

mpicoll's algorithms move and reduce one-dimensional NumPy arrays.  An MPI
datatype given in a message spec (``[buf, count, datatype]``) becomes:

- a **typed view** of the buffer when the datatype is *dense*: its elements
  are its basic elements in order, without gaps (a predefined type, a
  ``Dup``/``Create_contiguous`` chain over one, and any vector, indexed,
  struct or subarray whose blocks follow each other: see :func:`_in_order`);
  this is also how messages of 2^31 elements or bytes and more travel, which
  ``MPI_Pack`` (an ``int`` count in MPI 3) could not take;
- a **packed copy** otherwise (vector, indexed, struct, subarray, resized, ...):
  MPI's own ``Datatype.Pack`` gathers the elements the datatype selects into a
  contiguous array before the call, and ``Datatype.Unpack`` scatters a received
  result back into the user's buffer when the call completes, in pieces of
  fewer than 2^31 bytes (MPI 3's ``int`` sizes).  Both sides of a
  message may use different datatypes with the same type signature, as MPI
  allows, because only the packed elements travel.

The packed array's element type is the one basic type of the datatype's type
signature (so reductions work elementwise, as MPI's predefined ops do on derived
datatypes); a signature that mixes basic types is packed as bytes, which data
movement handles and reductions refuse (``MPI.ERR_OP``).

Device memory (a GPU array) given with a non-contiguous datatype is packed the same way from a host
copy of its bytes (a :class:`Mirror`, refreshed when the call starts, written back when it completes):
MPI's Pack reads host memory only.

Nothing here is a silent approximation: a datatype NumPy cannot express and
MPI cannot pack raises ``MPI.ERR_TYPE``.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.data.memory import known_bounds

__all__ = ["Typemap", "describe", "check_reducible", "Packed", "pack", "register", "packing", "Packing", "byte_message",
           "AbsoluteBlock"]

_INT_MAX = 2**31 - 1   # MPI 3's sizes are C ints (MPI_Pack has no large-count form before MPI 4)


@dataclass(frozen=True)
class Typemap:
    """How one MPI datatype maps onto NumPy elements.

    ``element``: the dtype of its basic elements (``uint8`` when the signature
    mixes basic types); ``per``: elements of ``element`` per datatype element;
    ``dense``: the datatype is exactly ``per`` consecutive ``element`` values from
    its start, so a typed view of the buffer is the datatype; ``extent``: its
    extent in bytes; ``mixed``: the signature mixes basic types.
    """

    element: np.dtype
    per: int
    dense: bool
    extent: int
    lb: int
    true_lb: int
    true_extent: int
    mixed: bool = False


def describe(datatype: MPI.Datatype, what: str) -> Typemap:
    """The :class:`Typemap` of ``datatype`` (``what`` names the argument in errors)."""
    if datatype == MPI.DATATYPE_NULL:
        raise errors.DatatypeError(f"{what}: MPI.DATATYPE_NULL is not a datatype")
    try:
        size = datatype.Get_size()
        lb, extent = datatype.Get_extent()
        true_lb, true_extent = datatype.Get_true_extent()
    except MPI.Exception as exc:
        raise errors.DatatypeError(f"{what}: invalid datatype ({exc})") from None
    if datatype.is_predefined:  # its NumPy dtype as mpi4py's dtlib gives it (pair types such as DOUBLE_INT too)
        element = _numpy(datatype, what)
        return Typemap(element, 1, True, extent, lb, true_lb, true_extent)
    bases, dense = _signature(datatype)
    if len(bases) == 1:
        element = _numpy(bases[0], what)
        mixed = False
    else:
        element, mixed = np.dtype(np.uint8), True
    if size % element.itemsize:
        raise errors.DatatypeError(f"{what}: datatype size {size} is not a multiple of its element size "
                                   f"{element.itemsize}")
    dense = dense and not mixed and lb == 0 and true_lb == 0 and extent == size == true_extent
    return Typemap(element, size // element.itemsize, dense, extent, lb, true_lb, true_extent, mixed)


def _signature(datatype: MPI.Datatype) -> tuple[list[MPI.Datatype], bool]:
    """(the distinct predefined types of the type signature, whether its typemap is its bytes in order,
    without gaps, from its true lower bound)."""
    if datatype.is_predefined:
        return [datatype], True
    base, combiner, params = datatype.decode()
    # decode() hands back new handles for derived constituents: free them once read
    parts = list(params.get("datatypes", ())) if combiner == "STRUCT" else [base]
    found: list[MPI.Datatype] = []
    tiles: list[tuple[bool, int]] = []    # per part: whether repeating it gives its bytes in order; its extent
    for part in parts:
        sub, sub_in_order = _signature(part)
        lb, extent = part.Get_extent()
        true_lb, true_extent = part.Get_true_extent()
        tiles.append((sub_in_order and lb == true_lb == 0 and extent == true_extent == part.Get_size(), extent))
        found.extend(t for t in sub if not any(t == f for f in found))
        if not part.is_predefined:
            part.Free()
    return found, all(t for t, _ in tiles) and _in_order(combiner, params, [e for _, e in tiles])


def _in_order(combiner: str, params: dict, extents: list[int]) -> bool:
    """Whether a datatype made by ``combiner`` from parts that tile (each repeated gives its bytes in order,
    ``extents``: theirs) has its bytes in order without gaps: what a typed view can stand for, however large
    (a struct of ``vector(1, INT_MAX, INT_MAX)`` and one more element, a full subarray, ...)."""
    if combiner in ("DUP", "CONTIGUOUS", "RESIZED"):
        return True
    if combiner == "VECTOR":
        return params["count"] <= 1 or params["stride"] == params["blocklength"]
    if combiner == "HVECTOR":
        return params["count"] <= 1 or params["stride"] == params["blocklength"] * extents[0]
    if combiner == "SUBARRAY":
        return list(params["subsizes"]) == list(params["sizes"])
    if combiner in ("INDEXED", "HINDEXED", "INDEXED_BLOCK", "HINDEXED_BLOCK", "STRUCT"):
        displacements = list(params["displacements"])
        lengths = params.get("blocklengths") or [params["blocklength"]] * len(displacements)
        sizes = extents if combiner == "STRUCT" else extents * len(displacements)
        unit = extents[0] if combiner in ("INDEXED", "INDEXED_BLOCK") else 1   # displacements in bytes or extents
        blocks = [(d * unit, n * e) for d, n, e in zip(displacements, lengths, sizes) if n]
        return all(start + size == after for (start, size), (after, _) in zip(blocks, blocks[1:]))
    return False


def _numpy(datatype: MPI.Datatype, what: str) -> np.dtype:
    from mpi4py.util import dtlib

    try:
        return np.dtype(dtlib.to_numpy_dtype(datatype))
    except Exception as exc:
        raise errors.TypeMismatchError(f"{what}: datatype {datatype.Get_name() or datatype} has no NumPy "
                                   f"equivalent ({exc})") from None


def check_reducible(datatype: Any, what: str = "op") -> None:
    """Refuse a reduction over a datatype whose type signature mixes basic types (its packed bytes)."""
    if datatype is not None and not datatype.is_predefined and describe(datatype, "datatype").mixed:
        raise errors.OpTypeError(f"{what}: a reduction needs one basic element type; datatype "
                                 f"{datatype.Get_name() or datatype} mixes several (MPI's predefined ops do not "
                                 "apply to it)")


# -- packing ------------------------------------------------------------------------------------------


class Mirror:
    """A host copy of a device array's bytes for one call: ``pack`` copies the device bytes in (the call
    starts), ``unpack`` copies the host bytes back (the call completes, where the call writes the array)."""

    def __init__(self, device_array: Any) -> None:
        from mpicoll.data.device import device_of  # noqa: PLC0415 - device memory only

        self.device = device_of(device_array)
        self.array = device_array
        self.host = np.empty(device_array.shape, device_array.dtype)

    def pack(self) -> None:
        stream = self.device.current_stream()
        self.device.to_host(self.host.view(np.uint8), self.device.raw(self.array), stream)
        stream.synchronize()

    def unpack(self) -> None:
        stream = self.device.current_stream()
        self.device.to_device(self.device.raw(self.array), self.host.view(np.uint8), stream)
        stream.synchronize()


def mirror(device_array: Any, writable: bool) -> np.ndarray:
    """A host copy of ``device_array`` for the call being prepared: filled now and whenever a persistent
    request starts it, written back to the device (``writable``) when the call completes."""
    copy = Mirror(device_array)
    copy.pack()
    _current().add(copy, writable)
    _current().for_device.add(id(copy.host))
    return copy.host


def made_for_device(array: Any) -> bool:
    """Whether ``array`` is host memory made for a device buffer of the call being prepared (its copy, or
    what a non-contiguous datatype packed from that copy)."""
    stack = _stack()
    return bool(stack) and id(array) in stack[-1].for_device


@dataclass
class Packed:
    """The elements a datatype selects in ``blocks`` of a raw byte buffer, packed one block after another.

    Block i is ``counts[i]`` datatype elements starting ``displs[i]`` extents
    into ``raw``; in ``array`` it is ``counts[i] * per`` elements from
    ``offsets[i]``.
    """

    raw: np.ndarray
    datatype: MPI.Datatype
    typemap: Typemap
    counts: tuple[int, ...]
    displs: tuple[int, ...]
    array: np.ndarray
    offsets: tuple[int, ...]

    def _user(self, count: int, displ: int) -> MPI.buffer:
        # mpi4py's Pack/Unpack take the count of datatype elements as (buffer length // extent)
        address = self.raw.ctypes.data + displ * self.typemap.extent
        return MPI.buffer.fromaddress(address, count * self.typemap.extent)

    def _pieces(self) -> Iterator[tuple[MPI.buffer, np.ndarray]]:
        """(user memory, packed bytes) of each piece: every block split so that a piece's sizes fit an
        ``int`` (``MPI_Pack`` in MPI 3: its count, its buffer size and its position), each piece packed
        from position 0 of its own slice."""
        packed = self.array.view(np.uint8)
        itemsize, size = self.typemap.element.itemsize, self.typemap.per * self.typemap.element.itemsize
        step = max(1, _INT_MAX // max(size, self.typemap.extent, 1))
        for count, displ, offset in zip(self.counts, self.displs, self.offsets):
            for first in range(0, count, step):
                n = min(step, count - first)
                start = offset * itemsize + first * size
                yield self._user(n, displ + first), packed[start:start + n * size]

    def pack(self) -> None:
        """Copy the selected elements of the user's buffer into ``array`` (MPI_Pack, in pieces)."""
        for user, out in self._pieces():
            self.datatype.Pack(user, out, 0, MPI.COMM_SELF)

    def unpack(self) -> None:
        """Copy ``array`` back into the selected elements of the user's buffer (MPI_Unpack, in pieces)."""
        for user, src in self._pieces():
            self.datatype.Unpack(src, 0, user, MPI.COMM_SELF)


def pack(raw: np.ndarray, datatype: MPI.Datatype, typemap: Typemap, counts: list[int], displs: list[int],
         what: str, *, writable: bool) -> Packed:
    """Pack ``counts[i]`` elements of ``datatype`` at ``displs[i]`` extents of ``raw`` (bytes) for a call.

    Every byte the datatype touches must lie in the memory known to be around
    ``raw``: the buffer, or the array it is a view of (checked here: MPI would
    read or write past it); where that memory cannot be known (an
    ``MPI.memory`` made from an address), mpicoll defers to MPI, as the
    built-in does (see :func:`mpicoll.data.memory.known_bounds`).  A receive
    buffer (``writable``) is unpacked when the call completes (see :func:`packing`).
    """
    tm = typemap
    if not isinstance(raw, np.ndarray):   # device memory: packed from (and unpacked into) a host copy of it
        raw = mirror(raw, writable)
    if tm.extent <= 0 and any(counts):
        raise errors.DatatypeError(f"{what}: a datatype of extent {tm.extent} cannot describe consecutive elements")
    if max(tm.per * tm.element.itemsize, tm.extent) > _INT_MAX and any(counts):
        raise errors.DatatypeError(f"{what}: one element of this datatype spans {tm.extent} bytes, more than MPI's "
                                   "Pack takes at once (2^31 - 1), and it is not contiguous (pass the data "
                                   "contiguous, or use the MPI library's own collective)")
    around: tuple[float, float] | None = None   # the memory known around raw, found when a block leaves it
    for i, (count, displ) in enumerate(zip(counts, displs)):
        if not count:
            continue
        lo = displ * tm.extent + tm.true_lb
        hi = (displ + count - 1) * tm.extent + tm.true_lb + tm.true_extent
        if 0 <= lo and hi <= raw.shape[0]:
            continue
        if around is None:
            around = known_bounds(raw) or (math.inf, math.inf)   # unknown: MPI's to say
        if lo < -around[0] or hi > around[1]:
            block = f"block {i}: " if len(counts) > 1 else ""
            raise errors.CountError(f"{what}: {block}{count} elements of the datatype at displacement {displ} "
                                    f"span bytes {lo} .. {hi}, the buffer has {raw.shape[0]}")
    offsets = [0]
    for count in counts[:-1]:
        offsets.append(offsets[-1] + count * tm.per)
    total = offsets[-1] + counts[-1] * tm.per if counts else 0
    packed = Packed(raw, datatype, tm, tuple(counts), tuple(displs), np.empty(total, tm.element), tuple(offsets))
    packed.pack()  # the receive side too: an in-place call reads it, and unwritten elements keep their values
    _current().add(packed, writable)
    if id(raw) in _current().for_device:
        _current().for_device.add(id(packed.array))
    return packed


def register(packed: Any, writable: bool) -> None:
    """Register a :class:`Packed` (or anything with ``pack()`` and ``unpack()``) built by a caller
    (Alltoallw's per-peer blocks) with the call being prepared:
    packed again whenever a persistent request starts, unpacked (``writable``) when the call completes."""
    _current().add(packed, writable)


# -- packing: pack before the call, unpack received data when the call completes ------------------------


class Packing:
    """The packed buffers of one call being prepared."""

    def __init__(self) -> None:
        self.pack: list[Callable[[], None]] = []
        self.unpack: list[Callable[[], None]] = []
        self.for_device: set[int] = set()   # ids of the host arrays made for device buffers (see mirror)

    def add(self, packed: Any, writable: bool) -> None:
        self.pack.append(packed.pack)
        if writable:
            self.unpack.append(packed.unpack)

    def attach(self, plan: Any) -> Any:
        """Make ``plan`` unpack its received data when it finishes, and pack its inputs again whenever it
        runs again (``Plan.before``: a cached plan, a persistent request); the call itself packed them already."""
        if plan is None or not self.pack:
            return plan
        earlier, earlier_before, pack, unpack = plan.finish, plan.before, tuple(self.pack), tuple(self.unpack)

        def finish() -> None:
            if earlier is not None:
                earlier()
            for step in reversed(unpack):   # the last packed first: a device's host copy after what fills it
                step()

        def before() -> None:
            if earlier_before is not None:
                earlier_before()
            for step in pack:
                step()

        plan.finish, plan.before = finish, before
        plan.finish_by_name = False     # (it unpacks into the caller's objects: see Plan.finish_by_name)
        return plan


# the calls being prepared in each thread, innermost last: a thread prepares its own calls, and
# several threads may prepare calls on their own communicators at once
_PREPARING = threading.local()


@contextlib.contextmanager
def packing() -> Iterator[Packing]:
    """Collect the packed buffers of the call prepared inside the block (in this thread)."""
    calls = Packing()
    stack = _stack()
    stack.append(calls)
    try:
        yield calls
    finally:
        stack.pop()


def _stack() -> list[Packing]:
    stack = getattr(_PREPARING, "stack", None)
    if stack is None:
        stack = _PREPARING.stack = []
    return stack


def _current() -> Packing:
    stack = _stack()
    if not stack:
        raise RuntimeError("a non-contiguous MPI datatype can only be used in a call through mpicoll.Comm")
    return stack[-1]


# -- messages of 2^31 bytes and more ---------------------------------------------------------------------

#: one datatype of n bytes, by n: what a message of n >= 2^31 bytes is sent and received as (bounded: when
#: full, it is emptied; the plans that hold a datatype keep it alive)
_BYTES_TYPES: dict[int, MPI.Datatype] = {}
_BYTES_TYPES_LIMIT = 64
_CHUNK = 1 << 30


def byte_message(view: np.ndarray) -> list:
    """A message of the bytes of host ``view`` as MPI takes it: ``[buffer, MPI.BYTE]``, or, from 2^31 bytes
    on (MPI 3's counts are C ints, and mpi4py on such a library has no large-count call), one element of a
    datatype of that many bytes: a struct of 2^30-byte blocks and the rest.  Both sides of a message build the
    same type signature (n bytes), so either may be received with ``[buffer, MPI.BYTE]`` where it fits."""
    n = view.nbytes
    if n <= _INT_MAX:
        return [MPI.buffer(view), MPI.BYTE]
    datatype = _BYTES_TYPES.get(n)
    if datatype is None:
        if len(_BYTES_TYPES) >= _BYTES_TYPES_LIMIT:
            _BYTES_TYPES.clear()
        chunks, rest = divmod(n, _CHUNK)
        parts = [MPI.BYTE.Create_contiguous(_CHUNK)] + ([MPI.BYTE.Create_contiguous(rest)] if rest else [])
        lengths, displs = [chunks] + ([1] if rest else []), [0] + ([chunks * _CHUNK] if rest else [])
        datatype = _BYTES_TYPES[n] = MPI.Datatype.Create_struct(lengths, displs, parts).Commit()
        for part in parts:
            part.Free()
    return [MPI.buffer(view), 1, datatype]


class AbsoluteBlock:
    """One block at absolute addresses, packed and unpacked by ``to_self(send, recv)``, a message to self
    (:func:`mpicoll.engine.rounds.to_self`: MPI's Pack needs a buffer address; a message takes
    ``MPI.BOTTOM``).  Any type signature may be sent and received as ``MPI.PACKED``, whose bytes are what
    ``Datatype.Pack`` gives."""

    def __init__(self, count: int, datatype: MPI.Datatype, array: np.ndarray,
                 to_self: Callable[[Any, Any], None]) -> None:
        self.count, self.datatype, self.array, self.to_self = count, datatype, array, to_self

    def pack(self) -> None:
        self.to_self([MPI.BOTTOM, self.count, self.datatype], [self.array, MPI.PACKED])

    def unpack(self) -> None:
        self.to_self([self.array, MPI.PACKED], [MPI.BOTTOM, self.count, self.datatype])
