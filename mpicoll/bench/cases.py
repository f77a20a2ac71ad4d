"""One call of every collective on any buffer kind, as ``python -m mpicoll.bench --style osu|nccl`` makes it.

For a collective, a block of ``c`` elements, a root and a buffer kind
(``numpy``, ``mmap``, ``bytearray``), :class:`Case` allocates one variant's
buffers and builds the positional arguments of the mpi4py call
(``Allreduce(sendbuf, recvbuf, op)`` and so on), out of place or with
``MPI.IN_PLACE`` where MPI defines it.  A NumPy buffer is passed as the array
itself (``[array, (counts, displs), datatype]`` for the v-variants); an ``mmap``
or a ``bytearray`` as ``[buf, count, datatype]``, the way mpi4py's OSU demos
pass theirs.  The v-variants get ``c`` elements from every rank (as the OSU
``alltoallv`` demo does).

Every rank's input is small integers (exact sums in any float type), the same
for every variant, so that :meth:`Case.result` of a variant can be compared
element by element with the built-in's.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["Coll", "COLLS", "KINDS", "Case", "datatype_of", "algorithm_run"]

KINDS = ("numpy", "mmap", "bytearray")


def _one(p: int) -> float:
    return 1.0


def _ring(p: int) -> float:
    return (p - 1) / p if p > 1 else 1.0


def _allreduce(p: int) -> float:
    return 2 * (p - 1) / p if p > 1 else 1.0


@dataclass(frozen=True)
class Coll:
    """What the benchmark styles need to know of one collective.

    ``osu_vector`` / ``nccl_vector``: whether OSU's / nccl-tests' message size is
    the whole vector of p blocks (else one block: what one rank sends or gets);
    ``factor(p)``: nccl-tests' busbw factor (its ``bus bandwidth`` note: 2(p-1)/p
    for all-reduce, (p-1)/p for the collectives that move p-1 of p blocks, 1 for
    broadcast and reduce; 1 for the prefix reductions, which nccl-tests lacks).
    """

    name: str
    method: str
    reduces: bool = False
    rooted: bool = False
    in_place: bool = True        # MPI defines MPI_IN_PLACE for it
    osu_vector: bool = False
    nccl_vector: bool = False
    factor: Callable[[int], float] = _one


COLLS: dict[str, Coll] = {c.name: c for c in (
    Coll("allreduce", "Allreduce", reduces=True, factor=_allreduce),
    Coll("bcast", "Bcast", rooted=True, in_place=False),
    Coll("reduce", "Reduce", reduces=True, rooted=True),
    Coll("allgather", "Allgather", nccl_vector=True, factor=_ring),
    Coll("allgatherv", "Allgatherv", nccl_vector=True, factor=_ring),
    Coll("gather", "Gather", rooted=True, nccl_vector=True, factor=_ring),
    Coll("gatherv", "Gatherv", rooted=True, nccl_vector=True, factor=_ring),
    Coll("scatter", "Scatter", rooted=True, nccl_vector=True, factor=_ring),
    Coll("scatterv", "Scatterv", rooted=True, nccl_vector=True, factor=_ring),
    Coll("alltoall", "Alltoall", nccl_vector=True, factor=_ring),
    Coll("alltoallv", "Alltoallv", nccl_vector=True, factor=_ring),
    Coll("reduce_scatter", "Reduce_scatter", reduces=True, osu_vector=True, nccl_vector=True, factor=_ring),
    Coll("reduce_scatter_block", "Reduce_scatter_block", reduces=True, osu_vector=True, nccl_vector=True,
         factor=_ring),
    Coll("scan", "Scan", reduces=True),
    Coll("exscan", "Exscan", reduces=True),
    Coll("barrier", "Barrier", in_place=False),
)}


def datatype_of(dtype: np.dtype) -> MPI.Datatype:
    """The predefined MPI datatype of a NumPy dtype (``float32`` -> ``MPI.FLOAT``)."""
    return MPI.Datatype.fromcode(dtype.char)


def _sizes(name: str, c: int, p: int, rank: int, root: int) -> tuple[int | None, int | None]:
    """(send, recv) element counts of ``rank``'s buffers, out of place; None: the argument is not used here."""
    at_root = rank == root
    if name in ("allreduce", "scan", "exscan"):
        return c, c
    if name == "bcast":
        return None, c
    if name == "reduce":
        return c, c if at_root else None
    if name in ("allgather", "allgatherv"):
        return c, c * p
    if name in ("gather", "gatherv"):
        return c, c * p if at_root else None
    if name in ("scatter", "scatterv"):
        return c * p if at_root else None, c
    if name in ("alltoall", "alltoallv"):
        return c * p, c * p
    if name in ("reduce_scatter", "reduce_scatter_block"):
        return c * p, c
    return None, None   # barrier


#: which argument is a v-variant's ``[buf, (counts, displs), datatype]``
SEND_V, RECV_V = ("scatterv", "alltoallv"), ("gatherv", "allgatherv", "alltoallv")
#: which argument holds one block per rank, its explicit count being one block's (mpi4py's reading, MPI's counts)
SEND_BLOCKS = ("scatter", "alltoall", "reduce_scatter_block")
RECV_BLOCKS = ("allgather", "gather", "alltoall")


class _Buf:
    """``n`` elements of ``dtype`` in a buffer of one kind, and a NumPy view of them."""

    def __init__(self, kind: str, n: int, dtype: np.dtype, datatype: MPI.Datatype):
        nbytes = n * dtype.itemsize
        if kind == "numpy":
            self.raw: Any = np.zeros(n, dtype)
            self.view = self.raw
        elif kind in ("mmap", "bytearray"):
            # an anonymous mmap cannot be empty: one spare byte, the count says how much is used
            self.raw = mmap.mmap(-1, max(1, nbytes)) if kind == "mmap" else bytearray(nbytes)
            self.view = np.frombuffer(self.raw, dtype, count=n)
        else:
            raise ValueError(f"--buffer: expected one of {', '.join(KINDS)}, got {kind!r}")
        self.kind, self.n, self.datatype = kind, n, datatype

    def spec(self, v: tuple[list[int], list[int]] | None = None, blocks: int = 1) -> Any:
        """The argument: the array, ``[buf, count, datatype]``, or a v-variant's ``[buf, (counts, displs), dt]``.

        ``blocks``: the buffer holds one block per rank, and mpi4py reads an explicit
        count as the count of one block (MPI's sendcount of Scatter, recvcount of Gather).
        """
        if v is not None:
            return [self.raw, v, self.datatype]
        return self.raw if self.kind == "numpy" else [self.raw, self.n // blocks, self.datatype]


def _inputs(n: int, rank: int, dtype: np.dtype, seed: int) -> np.ndarray:
    """Rank ``rank``'s input: small integers (exact in any float type; any byte for MPI.BYTE data)."""
    rng = np.random.default_rng(seed + rank)
    if dtype == np.uint8:
        return rng.integers(0, 256, n).astype(dtype)
    low = 0 if dtype.kind == "u" else -8
    return rng.integers(low, 8, n).astype(dtype)


class Case:
    """One variant's buffers and call arguments for one (collective, block count ``c``) on this rank.

    ``in_place``: the ``MPI.IN_PLACE`` form (only where :attr:`Coll.in_place`;
    at the root only for the rooted collectives).  ``send_from``: an
    out-of-place case whose send buffer this one shares (read only), so that
    variants do not each hold a copy of the input.
    """

    def __init__(self, coll: Coll, rank: int, p: int, c: int, *, root: int = 0, kind: str = "numpy",
                 dtype: Any = "uint8", datatype: MPI.Datatype | None = None, in_place: bool = False,
                 op: MPI.Op = MPI.SUM, send_from: Case | None = None, seed: int = 1234):
        if in_place and not coll.in_place:
            raise ValueError(f"MPI defines no MPI_IN_PLACE form of {coll.method}")
        self.coll, self.rank, self.p, self.c, self.root = coll, rank, p, c, root
        dtype = np.dtype(dtype)
        datatype = datatype if datatype is not None else datatype_of(dtype)
        send_n, recv_n = _sizes(coll.name, c, p, rank, root)
        # in place: one buffer holds the input and the result (rooted collectives: at the root only);
        # the root of an in-place Scatter keeps its send buffer and passes MPI.IN_PLACE as recvbuf
        self.in_place = in_place and (not coll.rooted or rank == root)
        scatter_root = self.in_place and coll.name in ("scatter", "scatterv")
        if self.in_place and not scatter_root:
            if coll.name in ("alltoall", "alltoallv", "reduce_scatter", "reduce_scatter_block"):
                recv_n = send_n     # the recv buffer holds the whole input vector
            send_n = None
        if scatter_root:
            recv_n = None
        self.send: _Buf | None = None
        if send_n is not None:
            shared = send_from.send if send_from is not None else None
            self.send = shared if shared is not None else _Buf(kind, send_n, dtype, datatype)
        self.recv = _Buf(kind, recv_n, dtype, datatype) if recv_n is not None else None
        full = _sizes(coll.name, c, p, rank, root)[0]
        self.input = _inputs(c if coll.name == "bcast" else full or 0, rank, dtype, seed)
        self.op = op
        self.args = self._args()

    # -- the call -------------------------------------------------------------------------------

    def _v(self) -> tuple[list[int], list[int]]:
        return [self.c] * self.p, [i * self.c for i in range(self.p)]

    def _args(self) -> tuple:
        name, op, root = self.coll.name, self.op, self.root
        p = self.p
        send = MPI.IN_PLACE if self.in_place and self.send is None else self._spec(
            self.send, name in SEND_V, p if name in SEND_BLOCKS else 1)
        # an in-place Reduce_scatter_block's recvbuf holds the p blocks of the input
        recv_blocks = name in RECV_BLOCKS or (name == "reduce_scatter_block" and self.in_place)
        recv = MPI.IN_PLACE if self.in_place and self.recv is None else self._spec(
            self.recv, name in RECV_V, p if recv_blocks else 1)
        if name == "barrier":
            return ()
        if name == "bcast":
            return (recv, root)
        if name in ("allreduce", "reduce_scatter_block", "scan", "exscan"):
            return (send, recv, op)
        if name == "reduce":
            return (send, recv, op, root)
        if name == "reduce_scatter":
            return (send, recv, [self.c] * self.p, op)
        if self.coll.rooted:
            return (send, recv, root)
        return (send, recv)

    def _spec(self, buf: _Buf | None, v: bool, blocks: int) -> Any:
        if buf is None:
            return None
        return buf.spec(self._v() if v else None, blocks)

    # -- the data -------------------------------------------------------------------------------

    def fill(self) -> None:
        """Put this rank's input where the call reads it and zero the result (before a checked call)."""
        name = self.coll.name
        if self.recv is not None:
            self.recv.view[...] = 0
        if name == "bcast":
            if self.rank == self.root:
                self.recv.view[...] = self.input
            return
        if not self.in_place or name in ("scatter", "scatterv"):
            if self.send is not None:
                self.send.view[...] = self.input
            return
        if name in ("allgather", "allgatherv", "gather", "gatherv"):
            lo = self.rank * self.c
            self.recv.view[lo:lo + self.c] = self.input
        elif self.recv is not None:
            self.recv.view[:len(self.input)] = self.input

    def result(self) -> np.ndarray | None:
        """The part of this rank's buffers that MPI defines after the call, or None (nothing defined here)."""
        name, at_root = self.coll.name, self.rank == self.root
        if name == "barrier" or (name in ("reduce", "gather", "gatherv") and not at_root):
            return None
        if name == "exscan" and self.rank == 0:
            return None
        if name in ("scatter", "scatterv") and self.in_place:
            return None    # the root's block stays in its send buffer
        if self.recv is None:
            return None
        if name in ("reduce_scatter", "reduce_scatter_block"):
            return self.recv.view[:self.c]
        return self.recv.view

    def wrong(self, reference: Case) -> int:
        """Elements of this rank's result that differ from ``reference``'s (another variant, same call)."""
        mine, ref = self.result(), reference.result()
        if mine is None or ref is None:
            return 0
        return int(np.count_nonzero(mine != ref))


def algorithm_run(comm: Any, method: str, args: tuple, algorithm: str) -> str:
    """The algorithm an ``mpicoll.Comm`` call ``method(*args, algorithm=algorithm)`` runs ("auto"'s choice).

    Prepares the call as the communicator does (no message) and reads its schedule's name;
    ``"-"`` when the call moves nothing (0 elements).
    """
    from mpicoll.comm.preparing import prepare  # noqa: PLC0415 - the benchmark's communicators are mpicoll's

    plan = prepare(comm._state, method, args, algorithm)
    return plan.schedule.algorithm if plan is not None else "-"
