"""Alltoallw: rank i's block j goes to rank j's block i, each block with its own datatype.

Both buffers are ``[buf, counts, displs, datatypes]`` (or ``[buf, (counts,
displs), datatypes]``), as mpi4py takes them: block j is ``counts[j]`` elements
of ``datatypes[j]`` starting ``displs[j]`` **bytes** into ``buf``.  Rank i's
block j and rank j's block i must have the same type signature; mpicoll checks
their sizes where one rank can see both (its own block) and moves bytes: each
block is a byte view of the buffer where the datatype is dense (predefined or
contiguous), else the datatype's elements packed by MPI's ``Datatype.Pack``
and unpacked on the receiving side with that rank's own datatype.  ``MPI.BOTTOM``
with datatypes built on absolute addresses is packed by MPI too; blocks at
device addresses through host copies of the device bytes they span.

The schedules are Alltoallv's, over byte blocks.  "auto" picks:

=========  ==================
condition  algorithm
=========  ==================
p <= 4     linear (one round)
otherwise  pairwise
=========  ==================

``sendbuf`` ``IN_PLACE`` (or None): ``recvbuf``'s blocks (with the receive
datatypes) are sent and then replaced, through scratch as for Alltoall.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls import alltoall as _alltoall
from mpicoll.calls import debug_check
from mpicoll.calls._checks import check_count, check_disjoint
from mpicoll.data import datatypes, device
from mpicoll.data.buffers import VBuffer, _as_array, _is_writable, as_count, is_in_place
from mpicoll.engine.rounds import to_self
from mpicoll.ir.layout import Layout
from mpicoll.program.plan import Plan
from mpicoll.selection import choose as selection

if TYPE_CHECKING:
    from mpicoll.program.state import Preparation


@dataclass(frozen=True)
class WBuffer:
    """A ``[buf, counts, displs, datatypes]`` argument: ``raw`` is the buffer's bytes; block j is
    ``counts[j]`` elements of ``types[j]`` (described by ``maps[j]``) from byte ``displs[j]``."""

    raw: np.ndarray
    counts: tuple[int, ...]
    displs: tuple[int, ...]
    types: tuple[MPI.Datatype, ...]
    maps: tuple[datatypes.Typemap, ...]
    bottom: bool = False   # ``MPI.BOTTOM``: the datatypes hold absolute addresses
    owned: tuple[MPI.Datatype, ...] = ()   # datatypes made for this call (freed with the blocks using them)

    @property
    def nbytes(self) -> tuple[int, ...]:
        """The bytes of each block's type signature: what travels."""
        return tuple(c * t.Get_size() for c, t in zip(self.counts, self.types))

    @property
    def dense(self) -> bool:
        """Every block is its bytes, in place in ``raw`` (no packing needed)."""
        return all((m.dense and not self.bottom) or not c for c, m in zip(self.counts, self.maps))


def parse_w(spec: Any, what: str, size: int, *, writable: bool = False) -> WBuffer:
    """Check one Alltoallw buffer argument; every block must lie inside the buffer (``MPI.ERR_COUNT``)."""
    if not isinstance(spec, (list, tuple)) or len(spec) not in (3, 4):
        raise errors.BufferValueError(f"{what}: Alltoallw takes [buf, counts, displs, datatypes] or "
                                      f"[buf, (counts, displs), datatypes], got {type(spec).__name__}")
    if len(spec) == 3:
        if not isinstance(spec[1], (list, tuple)) or len(spec[1]) != 2:
            raise errors.BufferValueError(f"{what}: expected (counts, displs) in [buf, (counts, displs), datatypes]")
        obj, (counts, displs), types = spec[0], spec[1], spec[2]
    else:
        obj, counts, displs, types = spec
    if obj is MPI.BOTTOM:
        return _parse_bottom(counts, displs, types, what, size, writable)
    array, xp = _as_array(obj, what)
    if writable and not _is_writable(array):
        raise errors.BufferValueError(f"{what}: the buffer is read-only, but it receives data")
    counts = _per_rank(counts, size, f"{what}: counts")
    types = _datatypes(types, size, what)
    maps = [datatypes.describe(t, f"{what}: datatypes[{j}]") for j, t in enumerate(types)]
    if displs is None:   # blocks one after the other, each a whole number of its extents
        displs = [0]
        for c, m in zip(counts[:-1], maps):
            displs.append(displs[-1] + c * m.extent)
    displs = _per_rank(displs, size, f"{what}: displs")
    raw = array.view(np.uint8)
    if xp is not np:   # device memory: the call runs on a host copy of its bytes (MPI packs host memory only)
        raw = datatypes.mirror(raw, writable)
    for j, (c, d, m) in enumerate(zip(counts, displs, maps)):
        lo, hi = d + m.true_lb, d + (c - 1) * m.extent + m.true_lb + m.true_extent
        if c and (lo < 0 or hi > raw.shape[0]):
            raise errors.CountError(f"{what}: block {j} ({c} elements of its datatype at byte {d}) spans bytes "
                                    f"{lo} .. {hi}, the buffer has {raw.shape[0]}")
    return WBuffer(raw, tuple(counts), tuple(displs), tuple(types), tuple(maps))


def _parse_bottom(counts: Any, displs: Any, types: Any, what: str, size: int, writable: bool) -> WBuffer:
    """``MPI.BOTTOM`` with datatypes built on absolute addresses (``MPI.Get_address``): MPI alone can read them,
    so nothing is bounds-checked here, and every block is packed.  Blocks at device addresses are packed from
    (and, received, unpacked into) host copies of the device bytes they span (see :func:`_device_blocks`)."""
    counts = _per_rank(counts, size, f"{what}: counts")
    types = _datatypes(types, size, what)
    maps = [datatypes.describe(t, f"{what}: datatypes[{j}]") for j, t in enumerate(types)]
    displs = [0] * size if displs is None else _per_rank(displs, size, f"{what}: displs")
    spans = {j: (d + m.true_lb, d + (c - 1) * m.extent + m.true_lb + m.true_extent)
             for j, (c, d, m) in enumerate(zip(counts, displs, maps)) if c}
    for j, moved in _device_blocks(spans, what, writable).items():
        displs[j] += moved
    # a block at an absolute address: ``counts[j]`` elements of ``types[j]`` from byte ``displs[j]`` are one
    # element of a struct type placing them there (freed with the block that packs it, see
    # mpicoll.data.datatypes.AbsoluteBlock)
    for j, (c, d) in enumerate(zip(counts, displs)):
        if c and d:
            types[j] = MPI.Datatype.Create_struct([c], [d], [types[j]]).Commit()
            counts[j] = 1
            maps[j] = datatypes.describe(types[j], f"{what}: datatypes[{j}]")
    owned = tuple(t for t, c, d in zip(types, counts, displs) if c and d)
    return WBuffer(np.empty(0, np.uint8), tuple(counts), (0,) * size, tuple(types), tuple(maps), bottom=True,
                   owned=owned)


def _device_blocks(spans: dict[int, tuple[int, int]], what: str, writable: bool) -> dict[int, int]:
    """Host copies of the blocks whose bytes (``spans[j]``: absolute addresses ``lo .. hi``) lie in device
    memory, which MPI cannot pack: for each such block, how far its copy is from it (bytes to add to its
    displacement).  Overlapping blocks share one copy, so that writing a received copy back to the device
    never overwrites another block's elements with stale bytes."""
    on_device = []
    for j, (lo, hi) in spans.items():
        try:
            found = device.bytes_at(lo, 0)
        except Exception as exc:
            raise errors.BufferValueError(f"{what}: block {j} lies in device memory (MPI.BOTTOM with a datatype "
                                          f"at a GPU address), which this process cannot read: {exc}") from exc
        if found is not None:
            on_device.append((lo, hi, j))
    moved: dict[int, int] = {}
    groups: list[tuple[int, int, list[int]]] = []
    for lo, hi, j in sorted(on_device):
        if groups and lo < groups[-1][1]:
            groups[-1] = (groups[-1][0], max(groups[-1][1], hi), [*groups[-1][2], j])
        else:
            groups.append((lo, hi, [j]))
    for lo, hi, blocks in groups:
        copy = datatypes.mirror(device.bytes_at(lo, hi - lo), writable)
        for j in blocks:
            moved[j] = copy.ctypes.data - lo
    return moved


def _per_rank(values: Any, size: int, what: str) -> list[int]:
    if values is None or isinstance(values, (int, np.integer)) or np.ndim(values) != 1:
        raise errors.CountTypeError(f"{what} must be a sequence of {size} integers (one per rank), got {values!r}")
    out = [as_count(v, f"{what}[{i}]") for i, v in enumerate(values)]
    if len(out) != size:
        raise errors.CountError(f"{what}: expected {size} values (one per rank), got {len(out)}")
    return out


def _datatypes(types: Any, size: int, what: str) -> list[MPI.Datatype]:
    if isinstance(types, MPI.Datatype) or not isinstance(types, (list, tuple)):
        raise errors.DatatypeError(f"{what}: Alltoallw needs a sequence of {size} datatypes (one per rank), "
                                   f"got {types!r}")
    if len(types) != size:
        raise errors.CountError(f"{what}: expected {size} datatypes (one per rank), got {len(types)}")
    for j, t in enumerate(types):
        if not isinstance(t, MPI.Datatype):
            raise errors.DatatypeError(f"{what}: datatypes[{j}] must be an MPI.Datatype, got {t!r}")
    return list(types)


def as_bytes(buf: WBuffer, what: str, *, writable: bool) -> tuple[np.ndarray, Layout]:
    """The byte array the schedule moves and its block layout.

    Dense blocks: ``buf.raw`` itself.  Otherwise a packed array, block j its
    ``nbytes[j]`` bytes one after the other; every block is packed by MPI from
    the user's buffer when the call starts, and (``writable``) unpacked into it
    when the call completes.
    """
    nbytes = list(buf.nbytes)
    if buf.dense:
        if writable:
            check_disjoint(VBuffer(buf.raw, np.dtype(np.uint8), tuple(nbytes), buf.displs, np, True), what)
        return buf.raw, Layout.v(nbytes, list(buf.displs))
    offsets = [int(o) for o in np.concatenate([[0], np.cumsum(nbytes)[:-1]])]
    packed = np.empty(sum(nbytes), np.uint8)
    for c, d, t, m, off, n in zip(buf.counts, buf.displs, buf.types, buf.maps, offsets, nbytes):
        if not c:
            continue
        if buf.bottom:
            block: Any = datatypes.AbsoluteBlock(c, t, packed[off:off + n], to_self)
            if any(t is o for o in buf.owned):
                weakref.finalize(block, t.Free)
        else:   # block j: the user's bytes from displs[j], packed into packed[off : off + n]
            block = datatypes.Packed(buf.raw[d:], t, m, (c,), (0,), packed[off:off + n], (0,))
        block.pack()
        datatypes.register(block, writable)
    return packed, Layout.v(nbytes, offsets)


def prepare(comm: Preparation, sendbuf: Any, recvbuf: Any, *, algorithm: str | None) -> Plan | None:
    """Check an ``Alltoallw`` call and bind its schedule over byte blocks (zero-size messages included)."""
    p, me = comm.size, comm.rank
    recv = parse_w(recvbuf, "recvbuf", p, writable=True)
    in_place = is_in_place(sendbuf)
    send = recv if in_place else parse_w(sendbuf, "sendbuf", p)
    have, need = recv.nbytes[me], send.nbytes[me]
    check_count(have, need, f"recvbuf: block {me} (this rank's own) has {have} bytes of type signature, "
                            f"sendbuf's block {me} sends {need}")
    name, params = selection.choose("alltoallw", algorithm, size=p, nbytes=sum(recv.nbytes), count=sum(recv.nbytes),
                                    agreed=comm.agreed)
    debug_check(comm, "Alltoallw", algorithm=name)
    recv_array, recv_layout = as_bytes(recv, "recvbuf", writable=True)
    if in_place and not recv.dense:   # the packed copy of recvbuf is the data to send; results go to another
        send_array, send_layout = as_bytes(recv, "sendbuf", writable=False)
        in_place = False
    elif in_place:
        send_array, send_layout = recv_array, recv_layout
    else:
        send_array, send_layout = as_bytes(send, "sendbuf", writable=False)
    # never skip a call: only all ranks together know whether nothing moves at all
    return _alltoall.bind_alltoall(comm, "alltoallw", name, params, send_array, send_layout, recv_array,
                                   recv_layout, np.dtype(np.uint8), np, in_place)
