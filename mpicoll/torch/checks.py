"""The check path of ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: the ranks agree on a call before running it.

torch wraps C++ backends in a checking process group in DETAIL mode, but a
Python process group is used as it is, so this backend checks for itself:
before each collective, every rank shares a short description of its call
(the call, dtypes, shapes that must match, reduction, root) and every rank
raises the same error, naming each rank's call, when they differ.  This costs
one small all-gather per call, which is why it is off unless asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MismatchError", "Signature", "agree"]


class MismatchError(ValueError):
    """The ranks of a process group disagree on a collective (raised on every rank)."""


@dataclass(frozen=True)
class Signature:
    """What every rank of a collective must agree on.

    Attributes
    ----------
    name : str
        torch's name of the call.
    detail : str
        dtypes and shapes that must match, and the reduction.
    root : int
        The root rank, or -1 for calls without one.
    sends, recvs : tuple of int, optional
        All-to-all calls: the bytes this rank sends to and receives from each rank; rank i's
        ``sends[j]`` must be rank j's ``recvs[i]`` (compared across ranks, not for equality).
    """

    name: str
    detail: str
    root: int = -1
    sends: tuple[int, ...] | None = field(default=None, compare=False)
    recvs: tuple[int, ...] | None = field(default=None, compare=False)

    def describe(self) -> str:
        root = f" root {self.root}" if self.root >= 0 else ""
        return f"{self.name}({self.detail}){root}"


def agree(comm: Any, mine: Signature) -> None:
    """Raise :class:`MismatchError` on every rank unless every rank of ``comm`` makes the call ``mine``."""
    everyone = comm.allgather(mine)
    if any(other != mine for other in everyone):
        calls = "; ".join(f"rank {r}: {s.describe()}" for r, s in enumerate(everyone))
        raise MismatchError(f"mpicoll backend (TORCH_DISTRIBUTED_DEBUG=DETAIL): the ranks disagree on a "
                            f"collective: {calls}")
    if mine.sends is not None:
        _agree_on_sizes(mine.name, everyone)


def _agree_on_sizes(name: str, everyone: list[Signature]) -> None:
    """Every rank's sends to j match what j expects to receive from it (all-to-all split sizes)."""
    bad = [f"rank {i} sends {s.sends[j]} bytes to rank {j}, which expects {everyone[j].recvs[i]}"
           for i, s in enumerate(everyone) for j in range(len(everyone)) if s.sends[j] != everyone[j].recvs[i]]
    if bad:
        raise MismatchError(f"mpicoll backend (TORCH_DISTRIBUTED_DEBUG=DETAIL): {name} sizes do not match: "
                            + "; ".join(bad[:4]) + ("; ..." if len(bad) > 4 else ""))
