"""The collectives' methods, written once: one line each, shared by every kind of mpicoll communicator.

:class:`Collectives` holds the buffer collectives that intra- and intercommunicators both have (MPI
defines ``Barrier`` to ``Reduce_scatter`` on both), with mpi4py's signatures and the keyword
``algorithm``; :class:`IntraCollectives` adds those of intracommunicators only (``Scan``, ``Exscan``, the
neighbourhood collectives, and the lowercase object collectives).  Each buffer collective hands
``(communicator, call, arguments, algorithm)`` to the one dispatch of its kind
(:mod:`mpicoll.comm.dispatch`: blocking, ``I*`` = start, ``*_init`` = init), which takes the path the
communicator's state chose when it was made (fast, careful, or intercommunicator); the summing calls hand it,
with their keyword ``reproducible``, to :mod:`mpicoll.comm.summing`, the one place that decides between the
plain call and the reproducible sum.  Both kinds of communicator share these bodies, as mpi4py's
``util/pkl5.py`` shares its method bodies between ``Intracomm`` and ``Intercomm``.  The docstrings are
written from :mod:`mpicoll.comm.docs` (:func:`~mpicoll.comm.docs.document`).
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from mpicoll.calls import objects
from mpicoll.comm.dispatch import init, run_blocking, start
from mpicoll.comm.docs import document
from mpicoll.comm.summing import init_summing, run_summing, start_summing
from mpicoll.engine.requests import Prequest, Request

__all__ = ["Collectives", "IntraCollectives"]

_INFO = MPI.INFO_NULL


class Collectives:
    """The buffer collectives of every communicator (a mixin: the class it is mixed into is an ``MPI.Comm``)."""

    __slots__ = ()

    def Barrier(self, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Barrier", algorithm)

    def Ibarrier(self, *, algorithm: str = "auto") -> Request:
        return start(self, "Barrier", (), algorithm)

    def Barrier_init(self, info: MPI.Info = _INFO, *, algorithm: str = "auto") -> Prequest:
        return init(self, "Barrier", (), algorithm)

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Bcast", algorithm, buf, root)

    def Ibcast(self, buf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        return start(self, "Bcast", (buf, root), algorithm)

    def Bcast_init(self, buf: Any, root: int = 0, info: MPI.Info = _INFO, *, algorithm: str = "auto") -> Prequest:
        return init(self, "Bcast", (buf, root), algorithm)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto",
               reproducible: bool | None = None) -> None:
        run_summing(self, "Reduce", algorithm, reproducible, sendbuf, recvbuf, op, root)

    def Ireduce(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Request:
        return start_summing(self, "Reduce", (sendbuf, recvbuf, op, root), algorithm, reproducible)

    def Reduce_init(
        self,
        sendbuf: Any,
        recvbuf: Any,
        op: Any = MPI.SUM,
        root: int = 0,
        info: MPI.Info = _INFO,
        *,
        algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Prequest:
        return init_summing(self, "Reduce", (sendbuf, recvbuf, op, root), algorithm, reproducible)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
                  reproducible: bool | None = None) -> None:
        run_summing(self, "Allreduce", algorithm, reproducible, sendbuf, recvbuf, op)

    def Iallreduce(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Request:
        return start_summing(self, "Allreduce", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Allreduce_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Prequest:
        return init_summing(self, "Allreduce", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Gather", algorithm, sendbuf, recvbuf, root)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        return start(self, "Gather", (sendbuf, recvbuf, root), algorithm)

    def Gather_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Gather", (sendbuf, recvbuf, root), algorithm)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Gatherv", algorithm, sendbuf, recvbuf, root)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        return start(self, "Gatherv", (sendbuf, recvbuf, root), algorithm)

    def Gatherv_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Gatherv", (sendbuf, recvbuf, root), algorithm)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Scatter", algorithm, sendbuf, recvbuf, root)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        return start(self, "Scatter", (sendbuf, recvbuf, root), algorithm)

    def Scatter_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Scatter", (sendbuf, recvbuf, root), algorithm)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Scatterv", algorithm, sendbuf, recvbuf, root)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        return start(self, "Scatterv", (sendbuf, recvbuf, root), algorithm)

    def Scatterv_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Scatterv", (sendbuf, recvbuf, root), algorithm)

    def Allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Allgather", algorithm, sendbuf, recvbuf)

    def Iallgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Allgather", (sendbuf, recvbuf), algorithm)

    def Allgather_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Allgather", (sendbuf, recvbuf), algorithm)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Allgatherv", algorithm, sendbuf, recvbuf)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Allgatherv", (sendbuf, recvbuf), algorithm)

    def Allgatherv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Allgatherv", (sendbuf, recvbuf), algorithm)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
                             reproducible: bool | None = None) -> None:
        run_summing(self, "Reduce_scatter_block", algorithm, reproducible, sendbuf, recvbuf, op)

    def Ireduce_scatter_block(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Request:
        return start_summing(self, "Reduce_scatter_block", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Reduce_scatter_block_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Prequest:
        return init_summing(self, "Reduce_scatter_block", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> None:
        run_summing(self, "Reduce_scatter", algorithm, reproducible, sendbuf, recvbuf, recvcounts, op)

    def Ireduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Request:
        return start_summing(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op), algorithm, reproducible)

    def Reduce_scatter_init(
        self,
        sendbuf: Any,
        recvbuf: Any,
        recvcounts: Any = None,
        op: Any = MPI.SUM,
        info: MPI.Info = _INFO,
        *,
        algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Prequest:
        return init_summing(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op), algorithm, reproducible)

    def Alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Alltoall", algorithm, sendbuf, recvbuf)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Alltoall", (sendbuf, recvbuf), algorithm)

    def Alltoall_init(self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto") -> Prequest:
        return init(self, "Alltoall", (sendbuf, recvbuf), algorithm)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Alltoallv", algorithm, sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Alltoallv", (sendbuf, recvbuf), algorithm)

    def Alltoallv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Alltoallv", (sendbuf, recvbuf), algorithm)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Alltoallw", algorithm, sendbuf, recvbuf)

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Alltoallw", (sendbuf, recvbuf), algorithm)

    def Alltoallw_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Alltoallw", (sendbuf, recvbuf), algorithm)


class IntraCollectives(Collectives):
    """The collectives of intracommunicators only: ``Scan``, ``Exscan``, the neighbourhood ones (where the
    communicator has a virtual topology), and the lowercase object collectives on mpicoll's schedules
    (:mod:`mpicoll.calls.objects`; an intercommunicator's are :mod:`mpicoll.comm.inter_objects`)."""

    __slots__ = ()

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
             reproducible: bool | None = None) -> None:
        run_summing(self, "Scan", algorithm, reproducible, sendbuf, recvbuf, op)

    def Iscan(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Request:
        return start_summing(self, "Scan", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Scan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Prequest:
        return init_summing(self, "Scan", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
               reproducible: bool | None = None) -> None:
        run_summing(self, "Exscan", algorithm, reproducible, sendbuf, recvbuf, op)

    def Iexscan(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Request:
        return start_summing(self, "Exscan", (sendbuf, recvbuf, op), algorithm, reproducible)

    def Exscan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> Prequest:
        return init_summing(self, "Exscan", (sendbuf, recvbuf, op), algorithm, reproducible)

    # -- neighbourhood collectives: any wrapped communicator with a virtual topology (mpicoll.calls._neighbors) --

    def Neighbor_allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Neighbor_allgather", algorithm, sendbuf, recvbuf)

    def Ineighbor_allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Neighbor_allgather", (sendbuf, recvbuf), algorithm)

    def Neighbor_allgather_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Neighbor_allgather", (sendbuf, recvbuf), algorithm)

    def Neighbor_allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Neighbor_allgatherv", algorithm, sendbuf, recvbuf)

    def Ineighbor_allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Neighbor_allgatherv", (sendbuf, recvbuf), algorithm)

    def Neighbor_allgatherv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Neighbor_allgatherv", (sendbuf, recvbuf), algorithm)

    def Neighbor_alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Neighbor_alltoall", algorithm, sendbuf, recvbuf)

    def Ineighbor_alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Neighbor_alltoall", (sendbuf, recvbuf), algorithm)

    def Neighbor_alltoall_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Neighbor_alltoall", (sendbuf, recvbuf), algorithm)

    def Neighbor_alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Neighbor_alltoallv", algorithm, sendbuf, recvbuf)

    def Ineighbor_alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Neighbor_alltoallv", (sendbuf, recvbuf), algorithm)

    def Neighbor_alltoallv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Neighbor_alltoallv", (sendbuf, recvbuf), algorithm)

    def Neighbor_alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        run_blocking(self, "Neighbor_alltoallw", algorithm, sendbuf, recvbuf)

    def Ineighbor_alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        return start(self, "Neighbor_alltoallw", (sendbuf, recvbuf), algorithm)

    def Neighbor_alltoallw_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Neighbor_alltoallw", (sendbuf, recvbuf), algorithm)


    # -- the lowercase object collectives: mpi4py's signatures on mpicoll's schedules: the functions of
    # mpicoll.calls.objects, as they are (``comm.bcast(obj)`` is ``objects.bcast(comm, obj)``) --

    barrier = objects.barrier
    bcast = objects.bcast
    gather = objects.gather
    scatter = objects.scatter
    allgather = objects.allgather
    alltoall = objects.alltoall
    reduce = objects.reduce
    allreduce = objects.allreduce
    scan = objects.scan
    exscan = objects.exscan
    neighbor_allgather = objects.neighbor_allgather
    neighbor_alltoall = objects.neighbor_alltoall


document(IntraCollectives)
