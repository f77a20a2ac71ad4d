"""Reduction operations: MPI's predefined ops, user ops, and their local kernels.

Every op becomes a :class:`Reducer`, whose ``reduce(out, left, right)`` computes
``out = left (op) right`` elementwise with the array library's own functions, so
dtypes that MPI libraries lack (float16, bfloat16) reduce like any other.
``left`` always holds the lower ranks' contributions.

A user function that raises ends the job, as mpi4py does when an
``MPI.Op.Create`` function raises: a reduction runs between the rounds of a
schedule, so a rank that stopped there would leave its peers waiting forever
for its next message.  The rank prints one line naming the op, the rank and
the exception, then the traceback, and calls ``MPI.COMM_WORLD.Abort(1)``
(:func:`abort_for_user_op`).
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.data.kernels import FAMILY_NAMES, PREDEFINED, Reducer, family, inout_kernel, predefined

__all__ = ["Op", "Reducer", "reducer", "op_name", "is_commutative", "check_op", "abort_for_user_op"]


class Op:
    """A user-defined reduction on arrays, as ``MPI.Op.Create`` but for mpicoll.

    ``function(invec, inoutvec)`` receives two arrays of the same length and must
    set ``inoutvec[:] = invec o inoutvec``, where ``invec`` holds the lower ranks'
    part (MPI's convention).  ``commute`` says whether the op is commutative;
    non-commutative ops are always reduced in rank order.  An exception raised
    by ``function`` inside a collective aborts the job with a message naming the
    op and the rank (as mpi4py does for ``MPI.Op.Create``): the other ranks
    would otherwise wait for this one forever.

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


def op_name(op: Any) -> str:
    """``'SUM'`` for ``MPI.SUM``, ``'user'`` for user ops."""
    if isinstance(op, MPI.Op):
        return _NAMES.get(op.handle, "user")
    return "user"


#: the names of MPI's predefined ops (and of ``MPI.OP_NULL``) by handle: two ``MPI.Op`` objects of one handle
#: are the same op
_NAMES = {getattr(MPI, name).handle: name for name in PREDEFINED} | {MPI.OP_NULL.handle: "OP_NULL"}

#: (op name, dtype) pairs that passed :func:`check_op`, and the predefined ops' kernels by (name, dtype,
#: array namespace): what every call that is not served by the plan cache would otherwise work out again.
#: Each is emptied when it reaches ``_MEMO_LIMIT`` entries (dtypes can be made without end).
_CHECKED: set[tuple[str, np.dtype]] = set()
_KERNELS: dict[tuple[str, np.dtype, Any], Reducer] = {}
_MEMO_LIMIT = 1024


def is_commutative(op: Any) -> bool:
    if isinstance(op, Op):
        return op.commute
    return bool(op.Is_commutative())


def check_op(op: Any, dtype: np.dtype) -> None:
    """Raise if ``op`` is not an op or is not defined for ``dtype``."""
    if isinstance(op, Op):
        return
    if not isinstance(op, MPI.Op):
        raise TypeError(f"op must be an MPI.Op or mpicoll.Op, got {type(op).__name__}")
    name = op_name(op)
    if (name, dtype) in _CHECKED:
        return
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
    allowed = PREDEFINED[name][1]
    fam = family(dtype)
    is_byte = dtype == np.uint8
    if fam not in allowed and not (is_byte and "B" in allowed):
        kinds = ", ".join(FAMILY_NAMES[k] for k in allowed)
        raise TypeError(f"op: MPI.{name} is not defined for dtype {dtype}; it takes {kinds} types")
    if len(_CHECKED) >= _MEMO_LIMIT:
        _CHECKED.clear()
    _CHECKED.add((name, dtype))


def reducer(op: Any, dtype: np.dtype, xp: Any = np, datatype: Any = None, *, abort: bool = True) -> Reducer:
    """The local kernel of ``op`` on arrays of ``dtype`` from namespace ``xp``.

    ``datatype`` is the MPI datatype the caller named, if any: a user op made
    with ``MPI.Op.Create`` receives its data typed with it.  ``abort``: a
    :class:`Op` whose function raises ends the job (:func:`abort_for_user_op`),
    what the executors need; False lets the exception through, for a caller
    that runs every rank in one process (the simulator).  (An ``MPI.Op.Create``
    function that raises ends the job inside mpi4py's ``Reduce_local`` either way.)
    """
    check_op(op, dtype)
    if isinstance(op, Op):
        function = _aborting(op) if abort else op.function
        return Reducer(inout_kernel(function, xp), op.commute)
    name = op_name(op)
    if name == "user":
        if datatype is None:
            apply = op.Reduce_local
        else:
            def apply(invec: Any, inoutvec: Any) -> None:
                op.Reduce_local([invec, datatype], [inoutvec, datatype])
        return Reducer(inout_kernel(apply, xp), bool(op.Is_commutative()))
    key = (name, dtype, xp)
    kernel = _KERNELS.get(key)
    if kernel is None:
        if len(_KERNELS) >= _MEMO_LIMIT:
            _KERNELS.clear()
        kernel = _KERNELS[key] = predefined(name, dtype, xp)   # stateless: plans can share it
    return kernel


def _aborting(op: Op) -> Callable[[Any, Any], None]:
    """``op.function``, which ends the job instead of raising (see :func:`abort_for_user_op`)."""
    function = op.function

    def call(invec: Any, inoutvec: Any) -> None:
        try:
            function(invec, inoutvec)
        except Exception as exc:   # any error: the peers must not wait for this rank
            abort_for_user_op(op, exc)

    return call


def abort_for_user_op(op: Any, exc: BaseException) -> None:
    """End the job because user op ``op`` raised ``exc`` on this rank.

    Prints one line (the op, this rank of ``MPI.COMM_WORLD``, the exception)
    and the traceback to stderr, then calls ``MPI.COMM_WORLD.Abort(1)``.  The
    rank is in the middle of a schedule: raising instead would leave every
    peer that waits for its next message waiting forever, and no message can
    tell them without a check that every call would pay for.
    """
    rank = MPI.COMM_WORLD.Get_rank()
    line = (f"mpicoll: on rank {rank} of MPI.COMM_WORLD, user op {op!r} raised {type(exc).__name__}: {exc}; "
            f"aborting the job (MPI_Abort) so that no rank waits for this one forever, as mpi4py does when an "
            f"MPI.Op.Create function raises")
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    sys.stderr.write(f"{line}\n{trace}")
    sys.stderr.flush()
    time.sleep(0.25)     # (MPICH's launcher may end the job before it has forwarded what is still in the pipe)
    MPI.COMM_WORLD.Abort(1)
