"""torch's ``ReduceOp`` as an MPI op for a dtype, with torch's definitions of AVG and PREMUL_SUM.

Every rank decides from its own tensor's dtype before any message, so a
reduction torch does not define (float8, bitwise ops on floats, MIN/MAX on
complex numbers) is refused with the same clear error on every rank.
Booleans follow NCCL: SUM and MAX are a logical or, PRODUCT and MIN a logical
and, BXOR an exclusive or.  AVG is a sum divided by the group size (floating
and complex tensors only); PREMUL_SUM multiplies each rank's input by the op's
factor, then sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from mpi4py import MPI

from .tensors import move_only_name, reducible

__all__ = ["Reduction", "reduction"]

_RED = dist.ReduceOp.RedOpType
_MPI_OPS = {_RED.SUM: MPI.SUM, _RED.AVG: MPI.SUM, _RED.PREMUL_SUM: MPI.SUM, _RED.PRODUCT: MPI.PROD,
            _RED.MIN: MPI.MIN, _RED.MAX: MPI.MAX, _RED.BAND: MPI.BAND, _RED.BOR: MPI.BOR, _RED.BXOR: MPI.BXOR}
_BOOL_OPS = {_RED.SUM: MPI.LOR, _RED.MAX: MPI.LOR, _RED.BOR: MPI.LOR, _RED.PRODUCT: MPI.LAND,
             _RED.MIN: MPI.LAND, _RED.BAND: MPI.LAND, _RED.BXOR: MPI.LXOR}
_BITWISE = (_RED.BAND, _RED.BOR, _RED.BXOR)


@dataclass(frozen=True)
class Reduction:
    """What a torch reduction means for one dtype.

    Attributes
    ----------
    op : MPI.Op
        The MPI op mpicoll applies.
    name : str
        torch's name of the op (for messages and logs).
    premul : float | torch.Tensor | None
        PREMUL_SUM's factor: each rank's input is multiplied by it first.
    average : bool
        AVG: the sum is divided by the group size afterwards.
    plain : bool
        Neither: the op alone is the reduction.
    """

    op: MPI.Op
    name: str
    premul: float | torch.Tensor | None = None
    average: bool = False
    plain: bool = field(init=False)   # the op alone is the reduction: no factor before, no division after

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain", self.premul is None and not self.average)


def _kind(reduce_op: dist.ReduceOp | _RED) -> _RED:
    """The RedOpType of a ReduceOp (objects from ``_make_nccl_premul_sum`` included)."""
    # ReduceOp.SUM is a RedOpType that also passes isinstance(..., ReduceOp): test the plain enum first
    return reduce_op if isinstance(reduce_op, _RED) else reduce_op.op


_KNOWN: dict[tuple[int, torch.dtype], Reduction] = {}   # every (op's number, dtype) met, but PREMUL_SUM's


def reduction(reduce_op: dist.ReduceOp | _RED, dtype: torch.dtype) -> Reduction:
    """The :class:`Reduction` for ``reduce_op`` on tensors of ``dtype`` (remembered: torch's enums are slow to read).

    Raises
    ------
    TypeError
        The dtype cannot be reduced (float8, complex32), or the op is not defined for it
        (bitwise ops on floating or complex tensors, MIN/MAX on complex, AVG on integers or booleans).
    ValueError
        An unknown op.
    """
    # keyed by the op's hash: torch hashes a ReduceOp as its RedOpType's number, which is cheaper to get than
    # the RedOpType (and comparing ReduceOps costs microseconds); an entry is only made where the hash is that
    # number, and never for PREMUL_SUM (each carries its own factor)
    key = (hash(reduce_op), dtype)
    known = _KNOWN.get(key)
    if known is not None:
        return known
    kind = _kind(reduce_op)
    red = _define(reduce_op, kind, dtype)
    if kind != _RED.PREMUL_SUM and key[0] == int(kind):
        _KNOWN[key] = red
    return red


def _define(reduce_op: dist.ReduceOp | _RED, kind: _RED, dtype: torch.dtype) -> Reduction:
    name = kind.name
    dname = str(dtype).removeprefix("torch.")
    if move_only_name(dtype) or not reducible(dtype):
        raise TypeError(f"mpicoll backend: {dname} tensors can be moved but not reduced "
                        f"(ReduceOp.{name} on {dname} is not defined)")
    if kind not in _MPI_OPS:
        raise ValueError(f"mpicoll backend: unknown ReduceOp {reduce_op!r}")
    if dtype == torch.bool:
        if kind in (_RED.AVG, _RED.PREMUL_SUM):
            raise TypeError(f"mpicoll backend: ReduceOp.{name} is not defined for bool tensors")
        return Reduction(_BOOL_OPS[kind], name)
    if kind in _BITWISE and (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(f"mpicoll backend: ReduceOp.{name} needs integer or bool tensors, got {dname}")
    if kind in (_RED.MIN, _RED.MAX) and dtype.is_complex:
        raise TypeError(f"mpicoll backend: ReduceOp.{name} is not defined for complex tensors ({dname})")
    if kind in (_RED.AVG, _RED.PREMUL_SUM) and not (dtype.is_floating_point or dtype.is_complex):
        raise TypeError(f"mpicoll backend: ReduceOp.{name} needs floating or complex tensors, got {dname}")
    premul = reduce_op.factor if kind == _RED.PREMUL_SUM else None
    return Reduction(_MPI_OPS[kind], name, premul=premul, average=kind == _RED.AVG)
