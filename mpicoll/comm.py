"""``mpicoll.Comm``: a drop-in replacement for an mpi4py intracommunicator.

It *is* an :class:`mpi4py.MPI.Intracomm` (a subclass sharing the same MPI
handle), so everything mpi4py offers works unchanged; the collectives are
replaced by mpicoll's own, which take one more keyword, ``algorithm``.
Communicators derived from it (``Dup``, ``Split``, ``Create``, ...) are wrapped
again.  All traffic of mpicoll's collectives runs on a private duplicate of the
communicator, made on first use and freed by :meth:`Comm.Free`, so it can never
match the user's own messages.
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from . import api

__all__ = ["Comm"]


class Comm(MPI.Intracomm):
    """Wrap ``comm`` (an ``MPI.Intracomm``) so that its collectives are mpicoll's.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> import numpy as np, mpicoll
    >>> comm = mpicoll.Comm(MPI.COMM_WORLD)
    >>> x = np.ones(4)
    >>> comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM, algorithm="ring")
    """

    def __new__(cls, comm: MPI.Intracomm | None = None) -> Comm:
        if comm is not None and (not isinstance(comm, MPI.Intracomm) or isinstance(comm, MPI.Intercomm)):
            raise TypeError(f"mpicoll.Comm wraps an MPI.Intracomm, got {type(comm).__name__}")
        return super().__new__(cls, comm)

    @property
    def private(self) -> MPI.Intracomm:
        """The private duplicate that carries mpicoll's traffic (collective on first use)."""
        dup = self.__dict__.get("_private")
        if dup is None:
            if self == MPI.COMM_NULL:
                raise ValueError("the communicator is MPI.COMM_NULL")
            dup = MPI.Intracomm.Dup(self)
            dup = MPI.Intracomm(dup)  # a plain mpi4py communicator, not another wrapper
            self.__dict__["_private"] = dup
        return dup

    # -- collectives ---------------------------------------------------------

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Reduce ``sendbuf`` of every rank with ``op`` into every rank's ``recvbuf``.

        Parameters
        ----------
        sendbuf : buffer, buffer spec, ``MPI.IN_PLACE`` or None
            This rank's contribution; ``IN_PLACE`` or None takes it from ``recvbuf``.
        recvbuf : buffer or buffer spec
            Receives the result; same count and dtype as ``sendbuf``.
        op : MPI.Op or mpicoll.Op
            The reduction; non-commutative ops are applied in rank order.
        algorithm : str
            ``"auto"`` or one of ``mpicoll.algorithms("allreduce")``.
        """
        api.allreduce(self, sendbuf, recvbuf, op, algorithm)

    # -- derived communicators stay wrapped ------------------------------------

    def Dup(self, info: MPI.Info | None = None) -> Comm:
        return Comm(MPI.Intracomm(MPI.Intracomm.Dup(self, info) if info is not None else MPI.Intracomm.Dup(self)))

    def Clone(self) -> Comm:
        return self.Dup()

    def Dup_with_info(self, info: MPI.Info) -> Comm:
        return Comm(MPI.Intracomm(MPI.Intracomm.Dup_with_info(self, info)))

    def Split(self, color: int = 0, key: int = 0) -> Comm:
        return Comm(MPI.Intracomm.Split(self, color, key))

    def Split_type(self, split_type: int, key: int = 0, info: MPI.Info = MPI.INFO_NULL) -> Comm:
        return Comm(MPI.Intracomm.Split_type(self, split_type, key, info))

    def Create(self, group: MPI.Group) -> Comm:
        return Comm(MPI.Intracomm.Create(self, group))

    def Create_group(self, group: MPI.Group, tag: int = 0) -> Comm:
        return Comm(MPI.Intracomm.Create_group(self, group, tag))

    def Free(self) -> None:
        """Free the private duplicate, then the communicator itself."""
        dup = self.__dict__.pop("_private", None)
        if dup is not None:
            dup.Free()
        MPI.Intracomm.Free(self)

    def __repr__(self) -> str:
        if self == MPI.COMM_NULL:
            return "mpicoll.Comm(COMM_NULL)"
        return f"mpicoll.Comm(rank={self.Get_rank()}, size={self.Get_size()})"
