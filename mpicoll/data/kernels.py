"""The local reduction kernels of MPI's predefined ops and of user functions, on arrays (no MPI needed).

:mod:`mpicoll.data.ops` turns an ``MPI.Op`` or :class:`mpicoll.Op` into one of these;
the simulator (:mod:`mpicoll.analysis.simulate`) uses them by name without mpi4py.
A kernel computes ``out = left (op) right`` elementwise with the array
library's own functions, so dtypes that MPI libraries lack (float16, bfloat16)
reduce like any other; ``left`` always holds the lower ranks' contributions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Reducer", "predefined", "inout_kernel", "family", "PREDEFINED", "FAMILY_NAMES"]

# predefined ops: name, numpy function name, dtype families it is defined on
PREDEFINED = {
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
FAMILY_NAMES = {"i": "integer", "f": "floating point", "c": "complex", "b": "logical",
                 "B": "byte", "p": "pair (value, index)"}


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


class Reducer:
    """``reduce(out, left, right)``: ``out = left (op) right`` elementwise."""

    def __init__(self, reduce: Callable[[Any, Any, Any], None], commutative: bool):
        self.reduce = reduce
        self.commutative = commutative


def predefined(name: str, dtype: np.dtype, xp: Any = np) -> Reducer:
    """The kernel of MPI's predefined op ``name`` (``"SUM"``, ``"MAX"``, ...) on ``dtype`` arrays of ``xp``.

    The caller checks that the op is defined for the dtype (:func:`mpicoll.data.ops.check_op`).
    """
    if name not in PREDEFINED:
        raise ValueError(f"op: expected one of {', '.join(PREDEFINED)}, got {name!r}")
    if name in ("MINLOC", "MAXLOC"):
        if family(np.dtype(dtype)) != "p":
            raise TypeError(f"op: MPI.{name} needs a pair dtype (value, index), got {dtype}")
        value_field, index_field = np.dtype(dtype).names
        return Reducer(_loc_kernel(name == "MINLOC", (value_field, index_field), xp), True)
    ufunc = getattr(xp, PREDEFINED[name][0])
    if family(np.dtype(dtype)) == "b" or name in ("LAND", "LOR", "LXOR"):
        return Reducer(_logical_kernel(ufunc, xp), True)

    def apply(out: Any, left: Any, right: Any) -> None:
        ufunc(left, right, out=out)

    apply.ufunc = ufunc   # type: ignore[attr-defined]  # lets a binder call the ufunc itself, one frame less
    return Reducer(apply, True)


def _logical_kernel(ufunc: Any, xp: Any) -> Callable[[Any, Any, Any], None]:
    # MPI's logical ops return 0 or 1 in the operands' own type
    def apply(out: Any, left: Any, right: Any) -> None:
        out[...] = ufunc(left != 0, right != 0)

    return apply


def _loc_kernel(minimum: bool, fields: tuple[str, str], xp: Any) -> Callable[[Any, Any, Any], None]:
    # MPI: the winning value; on a tie, the smaller index.  The fields are read by position (value first,
    # then index), whatever their names: mpi4py names them f0 and f1, a program may name them otherwise.
    value_field, index_field = fields

    def apply(out: Any, left: Any, right: Any) -> None:
        lv, li, rv, ri = left[value_field], left[index_field], right[value_field], right[index_field]
        better = lv < rv if minimum else lv > rv
        take_left = better | ((lv == rv) & (li <= ri))
        value = xp.where(take_left, lv, rv)
        index = xp.where(take_left, li, ri)
        out[value_field] = value
        out[index_field] = index

    return apply


def inout_kernel(function: Callable[[Any, Any], Any], xp: Any) -> Callable[[Any, Any, Any], None]:
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
