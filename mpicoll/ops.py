"""Reduction operations: MPI's predefined ops, user ops, and their local kernels.

Every op becomes a :class:`Reducer`, whose ``reduce(out, left, right)`` computes
``out = left (op) right`` elementwise with the array library's own functions, so
dtypes that MPI libraries lack (float16, bfloat16) reduce like any other.
``left`` always holds the lower ranks' contributions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["Op", "Reducer", "reducer", "op_name", "is_commutative", "check_op"]


class Op:
    """A user-defined reduction on arrays, as ``MPI.Op.Create`` but for mpicoll.

    ``function(invec, inoutvec)`` receives two arrays of the same length and must
    set ``inoutvec[:] = invec o inoutvec``, where ``invec`` holds the lower ranks'
    part (MPI's convention).  ``commute`` says whether the op is commutative;
    non-commutative ops are always reduced in rank order.

    Examples
    --------
    >>> import numpy as np, mpicoll
    >>> def matmul2x2(a, b):  # elements are flattened 2x2 matrices
    ...     b[:] = (a.reshape(-1, 2, 2) @ b.reshape(-1, 2, 2)).reshape(b.shape)
    >>> op = mpicoll.Op(matmul2x2, commute=False)
    """

    def __init__(self, function: Callable[[Any, Any], Any], commute: bool = False):
        if not callable(function):
            raise TypeError(f"Op: function must be callable, got {type(function).__name__}")
        self.function = function
        self.commute = bool(commute)

    @classmethod
    def Create(cls, function: Callable[[Any, Any], Any], commute: bool = False) -> Op:
        """Same as ``Op(function, commute)``, spelled as in mpi4py."""
        return cls(function, commute)

    def Is_commutative(self) -> bool:
        return self.commute

    def Free(self) -> None:
        """Nothing to free; present so code written for ``MPI.Op`` keeps working."""

    def __repr__(self) -> str:
        name = getattr(self.function, "__name__", "function")
        return f"mpicoll.Op({name}, commute={self.commute})"


# predefined ops: name, numpy function name, dtype families it is defined on
_PREDEFINED = {
    "SUM": ("add", "ifc"),
    "PROD": ("multiply", "ifc"),
    "MIN": ("minimum", "if"),
    "MAX": ("maximum", "if"),
    "LAND": ("logical_and", "ib"),
    "LOR": ("logical_or", "ib"),
    "LXOR": ("logical_xor", "ib"),
    "BAND": ("bitwise_and", "ibB"),
    "BOR": ("bitwise_or", "ibB"),
    "BXOR": ("bitwise_xor", "ibB"),
    "MINLOC": (None, "p"),
    "MAXLOC": (None, "p"),
}
_FAMILY_NAMES = {"i": "integer", "f": "floating point", "c": "complex", "b": "logical",
                 "B": "byte", "p": "pair (value, index)"}


def op_name(op: Any) -> str:
    """``'SUM'`` for ``MPI.SUM``, ``'user'`` for user ops."""
    if isinstance(op, MPI.Op):
        for name in _PREDEFINED:
            if op == getattr(MPI, name):
                return name
        if op == MPI.OP_NULL:
            return "OP_NULL"
        return "user"
    return "user"


def is_commutative(op: Any) -> bool:
    if isinstance(op, Op):
        return op.commute
    return bool(op.Is_commutative())


def family(dtype: np.dtype) -> str:
    """One letter: i (integer), f (float), c (complex), b (bool), p (pair), ? (other)."""
    kind = dtype.kind
    if kind in "iu":
        return "i"
    if kind in "fc":
        return kind
    if kind == "b":
        return "b"
    if dtype.names is not None and len(dtype.names) == 2:
        return "p" if family(dtype[1]) == "i" and family(dtype[0]) in "if" else "?"
    if kind == "V" and dtype.names is None:
        name = dtype.name  # ml_dtypes: bfloat16, float8_*, int4, uint4, ...
        if name.startswith(("float", "bfloat")):
            return "f"
        if name.startswith(("int", "uint")):
            return "i"
    return "?"


def check_op(op: Any, dtype: np.dtype) -> None:
    """Raise if ``op`` is not an op or is not defined for ``dtype``."""
    if isinstance(op, Op):
        return
    if not isinstance(op, MPI.Op):
        raise TypeError(f"op must be an MPI.Op or mpicoll.Op, got {type(op).__name__}")
    name = op_name(op)
    if name == "OP_NULL":
        raise ValueError("op: MPI.OP_NULL is not a reduction operation")
    if name == "user":
        try:
            from mpi4py.util import dtlib
            dtlib.from_numpy_dtype(dtype)
        except Exception:
            raise TypeError(f"op: a user op made with MPI.Op.Create needs an MPI datatype, and dtype "
                            f"{dtype} has none; wrap the function in mpicoll.Op instead") from None
        return
    allowed = _PREDEFINED[name][1]
    fam = family(dtype)
    is_byte = dtype == np.uint8
    if fam not in allowed and not (is_byte and "B" in allowed):
        kinds = ", ".join(_FAMILY_NAMES[k] for k in allowed)
        raise TypeError(f"op: MPI.{name} is not defined for dtype {dtype}; it takes {kinds} types")


class Reducer:
    """``reduce(out, left, right)``: ``out = left (op) right`` elementwise."""

    def __init__(self, reduce: Callable[[Any, Any, Any], None], commutative: bool):
        self.reduce = reduce
        self.commutative = commutative


def reducer(op: Any, dtype: np.dtype, xp: Any = np, datatype: Any = None) -> Reducer:
    """The local kernel of ``op`` on arrays of ``dtype`` from namespace ``xp``.

    ``datatype`` is the MPI datatype the caller named, if any: a user op made
    with ``MPI.Op.Create`` receives its data typed with it.
    """
    check_op(op, dtype)
    if isinstance(op, Op):
        return Reducer(_inout_kernel(op.function, xp), op.commute)
    name = op_name(op)
    if name == "user":
        if datatype is None:
            apply = op.Reduce_local
        else:
            def apply(invec: Any, inoutvec: Any) -> None:
                op.Reduce_local([invec, datatype], [inoutvec, datatype])
        return Reducer(_inout_kernel(apply, xp), bool(op.Is_commutative()))
    if name in ("MINLOC", "MAXLOC"):
        return Reducer(_loc_kernel(name == "MINLOC", xp), True)
    ufunc = getattr(xp, _PREDEFINED[name][0])
    if family(dtype) == "b" or name in ("LAND", "LOR", "LXOR"):
        return Reducer(_logical_kernel(ufunc, xp), True)

    def apply(out: Any, left: Any, right: Any) -> None:
        ufunc(left, right, out=out)

    return Reducer(apply, True)


def _logical_kernel(ufunc: Any, xp: Any) -> Callable[[Any, Any, Any], None]:
    # MPI's logical ops return 0 or 1 in the operands' own type
    def apply(out: Any, left: Any, right: Any) -> None:
        out[...] = ufunc(left != 0, right != 0)

    return apply


def _loc_kernel(minimum: bool, xp: Any) -> Callable[[Any, Any, Any], None]:
    # MPI: the winning value; on a tie, the smaller index
    def apply(out: Any, left: Any, right: Any) -> None:
        lv, li, rv, ri = left["f0"], left["f1"], right["f0"], right["f1"]
        better = lv < rv if minimum else lv > rv
        take_left = better | ((lv == rv) & (li <= ri))
        value = xp.where(take_left, lv, rv)
        index = xp.where(take_left, li, ri)
        out["f0"] = value
        out["f1"] = index

    return apply


def _inout_kernel(function: Callable[[Any, Any], Any], xp: Any) -> Callable[[Any, Any, Any], None]:
    # function(invec, inoutvec) sets inoutvec = invec o inoutvec; build out = left o right
    def apply(out: Any, left: Any, right: Any) -> None:
        if out is right or _same(out, right):
            function(left, out)
        elif _same(out, left):
            scratch = right.copy()
            function(left, scratch)
            out[...] = scratch
        else:
            out[...] = right
            function(left, out)

    return apply


def _same(a: Any, b: Any) -> bool:
    """True when two views of equal length start at the same address."""
    if a.size == 0:
        return False
    if isinstance(a, np.ndarray):
        return a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    return a.data.ptr == b.data.ptr
