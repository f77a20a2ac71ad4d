"""The check path of ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (or ``MPICOLL_DEBUG``): the ranks agree on a call first.

torch wraps C++ backends in a checking process group in DETAIL mode, but a
Python process group is used as it is, so this backend checks for itself,
with mpicoll's own agreement (:func:`mpicoll.engine.debug.agree`): before each
collective, every rank shares a short description of its call (the call,
dtype, the shape that must match, reduction, root) and whether its own
argument checks passed, and every rank raises the same error:
:class:`~mpicoll.errors.ArgumentError` naming the ranks whose arguments were
rejected, or :class:`~mpicoll.errors.MismatchError` naming, for each field that
differs, which ranks passed which value.  All-to-all calls also compare each
rank's sizes with what its peers expect to receive.  This costs one small
all-gather per call (two for all-to-all), which is why it is off unless asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mpicoll.engine.debug import agree as agree_on_call
from mpicoll.errors import MismatchError

__all__ = ["MismatchError", "Signature", "agree"]

T = TypeVar("T")


@dataclass(frozen=True)
class Signature:
    """What every rank of a collective must agree on.

    Attributes
    ----------
    name : str
        torch's name of the call.
    dtype : str
        The dtype (or dtypes) that must match.
    shape : str
        The shapes that must match ("" where they may differ from rank to rank).
    op : str
        The reduction ("" for data movement).
    root : int
        The root rank, or -1 for calls without one.
    sends, recvs : tuple of int, optional
        All-to-all calls: the bytes this rank sends to and receives from each rank; rank i's
        ``sends[j]`` must be rank j's ``recvs[i]`` (compared across ranks, not for equality).
    """

    name: str
    dtype: str = ""
    shape: str = ""
    op: str = ""
    root: int = -1
    sends: tuple[int, ...] | None = field(default=None, compare=False)
    recvs: tuple[int, ...] | None = field(default=None, compare=False)

    def describe(self) -> str:
        """The call as one line of a log: ``all_reduce(float32[10] SUM)``."""
        detail = " ".join(x for x in (f"{self.dtype}{self.shape}", self.op) if x)
        root = f" root {self.root}" if self.root >= 0 else ""
        return f"{self.name}({detail}){root}"

    def fields(self) -> dict[str, Any]:
        """The labelled fields mpicoll's agreement compares (see :data:`mpicoll.engine.debug.FIELDS`)."""
        out: dict[str, Any] = {"collective": self.name, "dtype": self.dtype}
        if self.shape:
            out["shape"] = self.shape
        if self.op:
            out["op"] = self.op
        if self.root >= 0:
            out["root"] = self.root
        return out


class _Call:
    """What :func:`mpicoll.engine.debug.agree` reads of a call: its signature, and the communicator to agree on."""

    def __init__(self, private: Any) -> None:
        self.private = private
        self.signature: dict[str, Any] | None = None


def agree(comm: Any, name: str, describe: Callable[[], Signature], prepare: Callable[[], T],
          timeout: float | None = None) -> T:
    """Check the call (``describe()`` then ``prepare()``) on every rank, and make every rank reach the same verdict.

    Parameters
    ----------
    comm : MPI.Intracomm
        The group's processes (an mpi4py communicator the agreement's all-gather runs on).
    name : str
        torch's name of the call (for messages).
    describe : callable
        Returns this rank's :class:`Signature` (may raise, like ``prepare``).
    prepare : callable
        Checks the arguments and plans the call; its result is returned.
    timeout : float, optional
        Seconds the agreement may wait for the other ranks (the group's watchdog).

    Raises
    ------
    mpicoll.errors.ArgumentError
        Some rank's ``describe()`` or ``prepare()`` raised (on every rank, naming the ranks and errors).
    mpicoll.errors.MismatchError
        The ranks' signatures differ, or all-to-all sizes do not match (on every rank).
    """
    call = _Call(comm)
    box: list[Signature] = []

    def checked() -> T:
        mine = describe()
        box.append(mine)
        call.signature = mine.fields()
        return prepare()

    result = agree_on_call(call, name, checked, timeout)
    mine = box[0]
    if mine.sends is not None:
        _agree_on_sizes(comm, mine)
    return result


def _agree_on_sizes(comm: Any, mine: Signature) -> None:
    """Every rank's sends to j match what j expects to receive from it (all-to-all split sizes)."""
    everyone = comm.allgather((mine.sends, mine.recvs))
    bad = [f"rank {i} sends {sends[j]} bytes to rank {j}, which expects {everyone[j][1][i]}"
           for i, (sends, _) in enumerate(everyone) for j in range(len(everyone)) if sends[j] != everyone[j][1][i]]
    if bad:
        raise MismatchError(f"{mine.name}: the ranks' sizes do not match: " + "; ".join(bad[:4])
                            + ("; ..." if len(bad) > 4 else ""), mine.name, {})
