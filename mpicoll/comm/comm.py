"""``mpicoll.Comm``: a drop-in replacement for an mpi4py intracommunicator.

It *is* an :class:`mpi4py.MPI.Intracomm` (a subclass sharing the same MPI
handle), so everything mpi4py offers works unchanged; the collectives are
replaced by mpicoll's own, which take one more keyword, ``algorithm``.  Each
collective method is one line: blocking ones go to
:func:`mpicoll.comm.dispatch.run_blocking`, nonblocking ones to
:func:`~mpicoll.comm.dispatch.start`, persistent ones to
:func:`~mpicoll.comm.dispatch.init`; their documentation is written from
:mod:`mpicoll.comm.docs`.  What mpicoll keeps for a communicator is its
:class:`~mpicoll.runtime.state.CommState` (``comm._state``), made by
:mod:`mpicoll.comm.setup`.
"""

from __future__ import annotations

import numbers
import threading
import weakref
from typing import Any

from mpi4py import MPI

from mpicoll import config
from mpicoll.calls import objects
from mpicoll.comm import careful, inter, inter_objects, setup
from mpicoll.comm import reproducible as reproducible_sum
from mpicoll.comm.dispatch import fast_miss, init, run_blocking, start
from mpicoll.comm.docs import document
from mpicoll.runtime.requests import Prequest, Request
from mpicoll.runtime.state import CommState

__all__ = ["Comm", "Cartcomm", "Graphcomm", "Distgraphcomm", "Intercomm"]

_INFO = MPI.INFO_NULL
# (handle, timeout, configuration generation): the state of a wrapped communicator, while a wrapper lives;
# wrapping it again after mpicoll.config.reload() makes a new state, which follows the new configuration
_STATES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_PREDEFINED: dict[tuple, CommState] = {}  # (handle, timeout): the newest state of COMM_WORLD or COMM_SELF, kept
_LOCK = threading.Lock()


class Comm(MPI.Intracomm):
    """Wrap ``comm`` (an ``MPI.Intracomm``) so that its collectives are mpicoll's.

    The collectives take mpi4py's arguments, plus the keyword ``algorithm``
    (``"auto"``, or a name from :func:`mpicoll.algorithms`; the environment
    variable ``MPICOLL_ALGO`` overrides ``"auto"``).  Every other method is
    mpi4py's own; derived communicators (``Dup``, ``Split``, ...) are wrapped too.

    Wrapping is collective over ``comm`` (like ``Dup``): every rank of ``comm``
    wraps it, once, before its first call.  It makes mpicoll's private
    duplicate and exchanges what every rank must agree on (rank 0's tuning data,
    the node layout), so that no later call sends a message outside its own
    schedule.  Wrapping the same communicator again shares that state, and
    derived communicators inherit it without a message.  :meth:`Free` and
    :meth:`Disconnect` release it, as does garbage collection of the last wrapper.

    Parameters
    ----------
    comm : MPI.Intracomm, optional
        The communicator to wrap (not an ``MPI.Intercomm``).  ``None`` gives a
        null communicator, as ``MPI.Intracomm()`` does.
    timeout : float, optional
        Seconds a blocking call or a ``Wait()`` may go without progress before
        raising :class:`~mpicoll.CollectiveTimeout`.  ``None`` (the default): the
        ``timeout`` of ``comm`` if it is a :class:`Comm`, else ``MPICOLL_TIMEOUT``
        from the environment, else no watchdog.

    Raises
    ------
    TypeError
        ``comm`` is not an ``MPI.Intracomm``.
    ValueError
        ``timeout`` (or ``MPICOLL_TIMEOUT``) is not a positive number of seconds.

    Notes
    -----
    Buffers take every form mpi4py accepts: an array (NumPy, bytes-like,
    DLPack or CUDA array interface) alone or as ``[buf, datatype]``,
    ``[buf, count, datatype]``, ``[buf, (count, displ), datatype]``, and
    ``[buf, counts, displs, datatype]`` for the v-variants.

    Errors.  Every argument is checked before any message.  A bad argument
    raises an exception that is both an ``MPI.Exception`` with the matching
    error class (``MPI.ERR_ROOT``, ``MPI.ERR_COUNT``, ``MPI.ERR_TYPE``,
    ``MPI.ERR_OP``, ``MPI.ERR_BUFFER``, ``MPI.ERR_TRUNCATE``, ``MPI.ERR_ARG``)
    and a ``ValueError`` or ``TypeError`` (the classes of :mod:`mpicoll.errors`);
    an unsupported op for the dtype is a ``TypeError`` or ``ValueError``.  A
    check that fails on one rank only still lets the others finish (that rank
    plays its part on scratch memory with marked messages, then raises; every
    rank whose result depends on its data raises :class:`~mpicoll.ArgumentError`
    after playing its part, see :mod:`mpicoll.runtime.standin`).  With ``MPICOLL_DEBUG=1``
    the ranks first compare their arguments: disagreeing ones raise
    :class:`~mpicoll.MismatchError` on every rank, and a rank whose arguments
    were rejected makes the others raise :class:`~mpicoll.ArgumentError`.  With
    a timeout, a call that makes no progress for that long raises
    :class:`~mpicoll.CollectiveTimeout`; with a timeout or ``MPICOLL_DEBUG``, a
    message of the wrong length raises :class:`~mpicoll.MessageSizeError`.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> import numpy as np, mpicoll
    >>> comm = mpicoll.Comm(MPI.COMM_WORLD)
    >>> x = np.ones(4)
    >>> comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM, algorithm="ring")
    """

    __slots__ = ("_state",)

    def __new__(cls, comm: MPI.Intracomm | None = None, *, timeout: float | None = None) -> Comm:
        if cls is Comm and isinstance(comm, MPI.Intercomm):
            return Intercomm(comm, timeout=timeout)    # type: ignore[return-value]
        if comm is not None and (not isinstance(comm, MPI.Intracomm) or isinstance(comm, MPI.Intercomm)):
            raise TypeError(f"mpicoll.Comm wraps an MPI.Intracomm or an MPI.Intercomm, got {type(comm).__name__}")
        _check_timeout(timeout)
        if cls is Comm and comm is not None:
            cls = _class_of(comm)    # a topology communicator stays one (Cartcomm, Graphcomm, Distgraphcomm)
        self = MPI.Intracomm.__new__(cls, comm)   # (Cartcomm.__new__ refuses a subclass with two bases)
        self._state = None
        if comm is None or comm == MPI.COMM_NULL:
            return self
        if timeout is None:
            timeout = comm.timeout if isinstance(comm, Comm) else config.current().timeout
        self._state = _state_of(comm, None if timeout is None else float(timeout))
        return self

    @property
    def timeout(self) -> float | None:
        """Seconds a blocking call or a ``Wait()`` may go without progress before raising
        :class:`~mpicoll.CollectiveTimeout`; None: no watchdog."""
        return self._state.timeout if self._state is not None else None

    @property
    def node_layout(self) -> Any:
        """Which ranks share a node (:mod:`mpicoll.ir.nodes`: None for one node, k for blocks of k, or one id
        per rank), the same on every rank; found when the communicator was made."""
        return self._state.nodes if self._state is not None else None

    def _derive(self, comm: MPI.Intracomm) -> Comm:
        """``comm`` (made from this one by MPI) wrapped, with a state inherited from this one's."""
        return Comm._derive_from(comm, self._state)

    @staticmethod
    def _derive_from(comm: MPI.Intracomm, parent: CommState | None) -> Comm:
        """``comm`` wrapped as the class of its topology, with a state inherited from ``parent`` (made by
        :func:`~mpicoll.comm.setup.derived`: no message beyond MPI's ``Idup``); wrapped anew without one."""
        made = MPI.Intracomm.__new__(_class_of(comm), comm)  # the same handle, no new communicator
        made._state = None
        if comm != MPI.COMM_NULL:
            made._state = _register(comm, setup.derived(comm, parent, parent.timeout) if parent is not None
                                    else setup.wrapped(comm, config.current().timeout))
        return made

    # -- the collectives: one line each (documented from mpicoll.comm.docs) --------------------------------

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
        if reproducible or (reproducible is None and reproducible_sum.DEFAULT[0]):
            return reproducible_sum.run(self, "Reduce", algorithm, reproducible, sendbuf, recvbuf, op, root)
        run_blocking(self, "Reduce", algorithm, sendbuf, recvbuf, op, root)

    def Ireduce(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto"
    ) -> Request:
        return start(self, "Reduce", (sendbuf, recvbuf, op, root), algorithm)

    def Reduce_init(
        self,
        sendbuf: Any,
        recvbuf: Any,
        op: Any = MPI.SUM,
        root: int = 0,
        info: MPI.Info = _INFO,
        *,
        algorithm: str = "auto",
    ) -> Prequest:
        return init(self, "Reduce", (sendbuf, recvbuf, op, root), algorithm)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
                  reproducible: bool | None = None) -> None:
        if reproducible or (reproducible is None and reproducible_sum.DEFAULT[0]):
            return reproducible_sum.run(self, "Allreduce", algorithm, reproducible, sendbuf, recvbuf, op)
        run_blocking(self, "Allreduce", algorithm, sendbuf, recvbuf, op)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        return start(self, "Allreduce", (sendbuf, recvbuf, op), algorithm)

    def Allreduce_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Allreduce", (sendbuf, recvbuf, op), algorithm)

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
        if reproducible or (reproducible is None and reproducible_sum.DEFAULT[0]):
            return reproducible_sum.run(self, "Reduce_scatter_block", algorithm, reproducible, sendbuf, recvbuf, op)
        run_blocking(self, "Reduce_scatter_block", algorithm, sendbuf, recvbuf, op)

    def Ireduce_scatter_block(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> Request:
        return start(self, "Reduce_scatter_block", (sendbuf, recvbuf, op), algorithm)

    def Reduce_scatter_block_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Reduce_scatter_block", (sendbuf, recvbuf, op), algorithm)

    def Reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto",
        reproducible: bool | None = None,
    ) -> None:
        if reproducible or (reproducible is None and reproducible_sum.DEFAULT[0]):
            return reproducible_sum.run(self, "Reduce_scatter", algorithm, reproducible,
                                        sendbuf, recvbuf, recvcounts, op)
        run_blocking(self, "Reduce_scatter", algorithm, sendbuf, recvbuf, recvcounts, op)

    def Ireduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> Request:
        return start(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op), algorithm)

    def Reduce_scatter_init(
        self,
        sendbuf: Any,
        recvbuf: Any,
        recvcounts: Any = None,
        op: Any = MPI.SUM,
        info: MPI.Info = _INFO,
        *,
        algorithm: str = "auto",
    ) -> Prequest:
        return init(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op), algorithm)

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

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
             reproducible: bool | None = None) -> None:
        if reproducible or (reproducible is None and reproducible_sum.DEFAULT[0]):
            return reproducible_sum.run(self, "Scan", algorithm, reproducible, sendbuf, recvbuf, op)
        run_blocking(self, "Scan", algorithm, sendbuf, recvbuf, op)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        return start(self, "Scan", (sendbuf, recvbuf, op), algorithm)

    def Scan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Scan", (sendbuf, recvbuf, op), algorithm)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto",
               reproducible: bool | None = None) -> None:
        if reproducible or (reproducible is None and reproducible_sum.DEFAULT[0]):
            return reproducible_sum.run(self, "Exscan", algorithm, reproducible, sendbuf, recvbuf, op)
        run_blocking(self, "Exscan", algorithm, sendbuf, recvbuf, op)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        return start(self, "Exscan", (sendbuf, recvbuf, op), algorithm)

    def Exscan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO, *, algorithm: str = "auto"
    ) -> Prequest:
        return init(self, "Exscan", (sendbuf, recvbuf, op), algorithm)

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

    # -- the lowercase object collectives: mpi4py's signatures on mpicoll's schedules (mpicoll.calls.objects) --

    def barrier(self, *, algorithm: str = "auto") -> None:
        """Block until every rank has called it (``Barrier``: no object moves)."""
        objects.barrier(self, algorithm)

    def bcast(self, obj: Any, root: int = 0, *, algorithm: str = "auto") -> Any:
        """Broadcast the Python object ``obj`` from ``root``; every rank (the root too) gets an unpickled copy."""
        return objects.bcast(self, obj, root, algorithm)

    def gather(self, sendobj: Any, root: int = 0, *, algorithm: str = "auto") -> list[Any] | None:
        """Gather every rank's object at ``root`` as a list in rank order (None elsewhere)."""
        return objects.gather(self, sendobj, root, algorithm)

    def scatter(self, sendobj: Any, root: int = 0, *, algorithm: str = "auto") -> Any:
        """Scatter the root's sequence of size objects (None: all None): rank i gets item i."""
        return objects.scatter(self, sendobj, root, algorithm)

    def allgather(self, sendobj: Any, *, algorithm: str = "auto") -> list[Any]:
        """Every rank's object, as a list in rank order, on every rank."""
        return objects.allgather(self, sendobj, algorithm)

    def alltoall(self, sendobj: Any, *, algorithm: str = "auto") -> list[Any]:
        """Item j of rank i's sequence of size objects becomes item i of rank j's list."""
        return objects.alltoall(self, sendobj, algorithm)

    def reduce(self, sendobj: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto") -> Any:
        """``op`` (an ``MPI.Op`` or a callable ``op(a, b)``) over every rank's object in rank order, at ``root``
        (None elsewhere)."""
        return objects.reduce(self, sendobj, op, root, algorithm)

    def allreduce(self, sendobj: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Any:
        """``op`` over every rank's object in rank order, on every rank."""
        return objects.allreduce(self, sendobj, op, algorithm)

    def scan(self, sendobj: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Any:
        """On rank i, ``op`` over the objects of ranks 0 .. i."""
        return objects.scan(self, sendobj, op, algorithm)

    def exscan(self, sendobj: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Any:
        """On rank i > 0, ``op`` over the objects of ranks 0 .. i - 1; None on rank 0."""
        return objects.exscan(self, sendobj, op, algorithm)

    def neighbor_allgather(self, sendobj: Any, *, algorithm: str = "auto") -> list[Any]:
        """The in-neighbours' objects, in the virtual topology's order (None from ``MPI.PROC_NULL``)."""
        return objects.neighbor_allgather(self, sendobj, algorithm)

    def neighbor_alltoall(self, sendobj: Any, *, algorithm: str = "auto") -> list[Any]:
        """Item k of ``sendobj`` to out-neighbour k; item k of the result from in-neighbour k."""
        return objects.neighbor_alltoall(self, sendobj, algorithm)

    # -- derived communicators: mpicoll's too, inheriting this one's state without a message -----------------

    def Dup(self, info: MPI.Info | None = None) -> Comm:
        return self._derive(
            MPI.Intracomm(MPI.Intracomm.Dup(self, info) if info is not None else MPI.Intracomm.Dup(self))
        )

    def Clone(self) -> Comm:
        return self.Dup()

    def Dup_with_info(self, info: MPI.Info) -> Comm:
        return self._derive(MPI.Intracomm(MPI.Intracomm.Dup_with_info(self, info)))

    def Split(self, color: int = 0, key: int = 0) -> Comm:
        return self._derive(MPI.Intracomm.Split(self, color, key))

    def Split_type(self, split_type: int, key: int = 0, info: MPI.Info = _INFO) -> Comm:
        return self._derive(MPI.Intracomm.Split_type(self, split_type, key, info))

    def Create(self, group: MPI.Group) -> Comm:
        return self._derive(MPI.Intracomm.Create(self, group))

    def Create_group(self, group: MPI.Group, tag: int = 0) -> Comm:
        return self._derive(MPI.Intracomm.Create_group(self, group, tag))

    def Idup(self, info: MPI.Info | None = None) -> tuple[Comm, MPI.Request]:
        """Duplicate the communicator as ``MPI_Comm_idup`` does, wrapped.

        mpicoll makes the duplicate's state when the duplicate exists, so this waits for it: the request
        returned is complete (a program that waits on it, as MPI requires before using the duplicate,
        works unchanged)."""
        dup, request = MPI.Intracomm.Idup(self, info) if info is not None else MPI.Intracomm.Idup(self)
        request.Wait()
        return self._derive(MPI.Intracomm(dup)), request

    def Create_cart(self, dims: Any, periods: Any = None, reorder: bool = False) -> Comm:
        return self._derive(MPI.Intracomm.Create_cart(self, dims, periods, reorder))

    def Create_graph(self, index: Any, edges: Any, reorder: bool = False) -> Comm:
        return self._derive(MPI.Intracomm.Create_graph(self, index, edges, reorder))

    def Create_intercomm(self, local_leader: int, peer_comm: MPI.Intracomm, remote_leader: int,
                         tag: int = 0) -> Intercomm:
        """``MPI_Intercomm_create``, wrapped: an :class:`Intercomm` with this communicator's timeout (its state is
        made over both groups, which all call this)."""
        made = MPI.Intracomm.Create_intercomm(self, local_leader, peer_comm, remote_leader, tag)
        return Intercomm(made, timeout=self.timeout)

    def Create_dist_graph_adjacent(self, sources: Any, destinations: Any, sourceweights: Any = None,
                                   destweights: Any = None, info: MPI.Info = _INFO, reorder: bool = False) -> Comm:
        return self._derive(MPI.Intracomm.Create_dist_graph_adjacent(
            self, sources, destinations, sourceweights, destweights, info, reorder))

    def Create_dist_graph(self, sources: Any, degrees: Any, destinations: Any, weights: Any = None,
                          info: MPI.Info = _INFO, reorder: bool = False) -> Comm:
        return self._derive(MPI.Intracomm.Create_dist_graph(self, sources, degrees, destinations, weights, info,
                                                            reorder))

    @classmethod
    def Create_from_group(cls, group: MPI.Group, stringtag: str = "org.mpi4py", info: MPI.Info = _INFO,
                          errhandler: MPI.Errhandler | None = None) -> Comm:
        """``MPI_Comm_create_from_group``, wrapped: it inherits the state of ``MPI.COMM_WORLD``'s wrapper
        when one was made (no message beyond MPI's own), else it is wrapped (collective over the group)."""
        comm = MPI.Intracomm.Create_from_group(group, stringtag, info, errhandler)
        if comm == MPI.COMM_NULL:
            return Comm(None)
        with _LOCK:
            world = next((s for (h, _), s in _PREDEFINED.items() if h == MPI.COMM_WORLD.handle), None)
        if world is None or world.private == MPI.COMM_NULL:
            return Comm(comm)
        return Comm._derive_from(comm, world)

    # -- the end of a communicator: everything mpicoll kept for it goes too ---------------------------------

    def Free(self) -> None:
        """Free the communicator and everything mpicoll keeps for it (plans, private duplicate, GPU windows)."""
        self._release()
        MPI.Intracomm.Free(self)

    def Disconnect(self) -> None:
        """Disconnect the communicator (MPI_Comm_disconnect) and free everything mpicoll keeps for it."""
        self._release()
        MPI.Intracomm.Disconnect(self)

    def _release(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            with _LOCK:
                for key in [k for k, v in _STATES.items() if v is state]:
                    del _STATES[key]
            state.release()

    def __repr__(self) -> str:
        if self == MPI.COMM_NULL:
            return "mpicoll.Comm(COMM_NULL)"
        return f"mpicoll.Comm(rank={self.Get_rank()}, size={self.Get_size()})"


document(Comm)


# -- topology communicators: mpi4py's classes (isinstance, every topology query) and mpicoll's collectives --


class Cartcomm(Comm, MPI.Cartcomm):
    """A Cartesian communicator (``MPI.Cartcomm``) whose collectives are mpicoll's.

    Made by ``Create_cart`` on an :class:`Comm`, or by wrapping an ``MPI.Cartcomm``; ``Sub`` and ``Dup`` give
    mpicoll communicators too, inheriting this one's state without a message beyond MPI's own.
    """

    __slots__ = ()

    def Sub(self, remain_dims: Any) -> Cartcomm:
        return self._derive(MPI.Cartcomm.Sub(self, remain_dims))


class Graphcomm(Comm, MPI.Graphcomm):
    """A graph communicator (``MPI.Graphcomm``) whose collectives are mpicoll's (the neighbourhood
    collectives are MPI's own)."""

    __slots__ = ()


class Distgraphcomm(Comm, MPI.Distgraphcomm):
    """A distributed graph communicator (``MPI.Distgraphcomm``) whose collectives are mpicoll's (the
    neighbourhood collectives are MPI's own)."""

    __slots__ = ()


def _check_timeout(timeout: Any) -> None:
    if timeout is not None and not (isinstance(timeout, numbers.Real) and 0 < timeout < float("inf")):
        raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")


def _class_of(comm: MPI.Intracomm) -> type[Comm]:
    """The mpicoll class of a communicator with ``comm``'s topology (none: :class:`Comm`)."""
    if comm == MPI.COMM_NULL:
        return Comm
    return _TOPOLOGY_CLASSES.get(comm.Get_topology(), Comm)


_TOPOLOGY_CLASSES: dict[int, type[Comm]] = {MPI.CART: Cartcomm, MPI.GRAPH: Graphcomm, MPI.DIST_GRAPH: Distgraphcomm}


def _state_of(comm: MPI.Intracomm, timeout: float | None) -> CommState:
    """The state of ``comm``: shared with its other wrappers (same timeout), else made (collective)."""
    if isinstance(comm, Comm) and comm._state is not None and comm._state.timeout == timeout:
        return comm._state
    key = (comm.handle, timeout, config.generation())
    with _LOCK:
        state = _STATES.get(key)
    if state is not None and state.private != MPI.COMM_NULL and MPI.Comm.Compare(state.private, comm) == MPI.CONGRUENT:
        return state
    return _register(comm, setup.wrapped(comm, timeout))


def _register(comm: MPI.Intracomm, state: CommState) -> CommState:
    """Choose the state's slow path (once) and remember it for the communicator's other wrappers."""
    state.slow_path = fast_miss if state.entries is not None else careful.run
    with _LOCK:
        _STATES[comm.handle, state.timeout, config.generation()] = state
        if comm.handle in (MPI.COMM_WORLD.handle, MPI.COMM_SELF.handle):
            _PREDEFINED[comm.handle, state.timeout] = state
    return state


# -- intercommunicators: mpi4py's class (every query, Merge) and mpicoll's collectives ----------------------


class Intercomm(MPI.Intercomm):
    """Wrap ``comm`` (an ``MPI.Intercomm``) so that its collectives are mpicoll's.

    ``mpicoll.Comm(intercomm)`` gives one, as does :meth:`Comm.Create_intercomm`.
    Wrapping is collective over *both* groups.  The collectives take mpi4py's
    arguments and follow MPI's intercommunicator rules (``root=MPI.ROOT`` at the
    root, ``MPI.PROC_NULL`` at the rest of its group, the root's rank in the
    remote group elsewhere; every all-kind call gives each group what the other
    contributed); each is written as stages of one group's mpicoll collectives and
    exchanges between the groups (:mod:`mpicoll.comm.inter`), blocking, ``I*``
    and ``*_init``, and the lowercase object collectives too
    (:mod:`mpicoll.comm.inter_objects`).  ``Merge`` and ``Dup`` give mpicoll
    communicators.  Host buffers only; ``MPI.IN_PLACE`` is erroneous, as in MPI.

    Parameters
    ----------
    comm : MPI.Intercomm, optional
        The intercommunicator to wrap; ``None`` gives a null one.
    timeout : float, optional
        As for :class:`Comm`.

    Examples
    --------
    >>> world = mpicoll.Comm(MPI.COMM_WORLD)
    >>> color = world.rank % 2
    >>> half = world.Split(color)
    >>> inter = half.Create_intercomm(0, world, 1 - color)
    >>> y = np.empty(3); inter.Allreduce(np.ones(3), y)   # y: the other group's sum
    """

    __slots__ = ("_state",)

    def __new__(cls, comm: MPI.Intercomm | None = None, *, timeout: float | None = None) -> Intercomm:
        if comm is not None and not isinstance(comm, MPI.Intercomm):
            raise TypeError(f"mpicoll.Intercomm wraps an MPI.Intercomm, got {type(comm).__name__}")
        _check_timeout(timeout)
        self = MPI.Intercomm.__new__(cls, comm)
        self._state = None
        if comm is None or comm == MPI.COMM_NULL:
            return self
        if timeout is None:
            timeout = comm.timeout if isinstance(comm, Intercomm) else config.current().timeout
        if isinstance(comm, Intercomm) and comm._state is not None and comm.timeout == timeout:
            self._state = comm._state
        else:
            self._state = setup.intercomm(comm, None if timeout is None else float(timeout),
                                          lambda c, t: Comm(c, timeout=t), lambda c, parent: parent._derive(c))
        return self

    @property
    def timeout(self) -> float | None:
        """As for :attr:`Comm.timeout`."""
        return self._state.timeout if self._state is not None else None

    # -- the collectives: one line each -----------------------------------------------------------------

    def Barrier(self) -> None:
        inter.run(self, "Barrier", ())

    def Ibarrier(self) -> Request:
        return inter.start(self, "Barrier", ())

    def Barrier_init(self, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Barrier", ())

    def Bcast(self, buf: Any, root: int = 0) -> None:
        inter.run(self, "Bcast", (buf, root))

    def Ibcast(self, buf: Any, root: int = 0) -> Request:
        return inter.start(self, "Bcast", (buf, root))

    def Bcast_init(self, buf: Any, root: int = 0, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Bcast", (buf, root))

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        inter.run(self, "Gather", (sendbuf, recvbuf, root))

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return inter.start(self, "Gather", (sendbuf, recvbuf, root))

    def Gather_init(self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Gather", (sendbuf, recvbuf, root))

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        inter.run(self, "Gatherv", (sendbuf, recvbuf, root))

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return inter.start(self, "Gatherv", (sendbuf, recvbuf, root))

    def Gatherv_init(self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Gatherv", (sendbuf, recvbuf, root))

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        inter.run(self, "Scatter", (sendbuf, recvbuf, root))

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return inter.start(self, "Scatter", (sendbuf, recvbuf, root))

    def Scatter_init(self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Scatter", (sendbuf, recvbuf, root))

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        inter.run(self, "Scatterv", (sendbuf, recvbuf, root))

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> Request:
        return inter.start(self, "Scatterv", (sendbuf, recvbuf, root))

    def Scatterv_init(self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Scatterv", (sendbuf, recvbuf, root))

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0) -> None:
        inter.run(self, "Reduce", (sendbuf, recvbuf, op, root))

    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0) -> Request:
        return inter.start(self, "Reduce", (sendbuf, recvbuf, op, root))

    def Reduce_init(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0,
                    info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Reduce", (sendbuf, recvbuf, op, root))

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> None:
        inter.run(self, "Allreduce", (sendbuf, recvbuf, op))

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> Request:
        return inter.start(self, "Allreduce", (sendbuf, recvbuf, op))

    def Allreduce_init(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Allreduce", (sendbuf, recvbuf, op))

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        inter.run(self, "Allgather", (sendbuf, recvbuf))

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Request:
        return inter.start(self, "Allgather", (sendbuf, recvbuf))

    def Allgather_init(self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Allgather", (sendbuf, recvbuf))

    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        inter.run(self, "Allgatherv", (sendbuf, recvbuf))

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> Request:
        return inter.start(self, "Allgatherv", (sendbuf, recvbuf))

    def Allgatherv_init(self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Allgatherv", (sendbuf, recvbuf))

    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        inter.run(self, "Alltoall", (sendbuf, recvbuf))

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> Request:
        return inter.start(self, "Alltoall", (sendbuf, recvbuf))

    def Alltoall_init(self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Alltoall", (sendbuf, recvbuf))

    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        inter.run(self, "Alltoallv", (sendbuf, recvbuf))

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> Request:
        return inter.start(self, "Alltoallv", (sendbuf, recvbuf))

    def Alltoallv_init(self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Alltoallv", (sendbuf, recvbuf))

    def Alltoallw(self, sendbuf: Any, recvbuf: Any) -> None:
        inter.run(self, "Alltoallw", (sendbuf, recvbuf))

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any) -> Request:
        return inter.start(self, "Alltoallw", (sendbuf, recvbuf))

    def Alltoallw_init(self, sendbuf: Any, recvbuf: Any, info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Alltoallw", (sendbuf, recvbuf))

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> None:
        inter.run(self, "Reduce_scatter_block", (sendbuf, recvbuf, op))

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> Request:
        return inter.start(self, "Reduce_scatter_block", (sendbuf, recvbuf, op))

    def Reduce_scatter_block_init(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM,
                                  info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Reduce_scatter_block", (sendbuf, recvbuf, op))

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM) -> None:
        inter.run(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op))

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM) -> Request:
        return inter.start(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op))

    def Reduce_scatter_init(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM,
                            info: MPI.Info = _INFO) -> Prequest:
        return inter.init(self, "Reduce_scatter", (sendbuf, recvbuf, recvcounts, op))

    # -- the lowercase object collectives --------------------------------------------------------------

    def barrier(self) -> None:
        """Block until every rank of both groups has called it."""
        inter_objects.barrier(self)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """The root's object on every rank of the other group (None in the root's group)."""
        return inter_objects.bcast(self, obj, root)

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """At the root, the other group's objects in rank order (None elsewhere)."""
        return inter_objects.gather(self, sendobj, root)

    def scatter(self, sendobj: Any, root: int = 0) -> Any:
        """Item i of the root's sequence on rank i of the other group (None in the root's group)."""
        return inter_objects.scatter(self, sendobj, root)

    def allgather(self, sendobj: Any) -> list[Any]:
        """The other group's objects, in rank order."""
        return inter_objects.allgather(self, sendobj)

    def alltoall(self, sendobj: Any) -> list[Any]:
        """Item j of this rank's sequence to rank j of the other group; item j of the result from it."""
        return inter_objects.alltoall(self, sendobj)

    def reduce(self, sendobj: Any, op: Any = MPI.SUM, root: int = 0) -> Any:
        """At the root, ``op`` over the other group's objects in rank order (None elsewhere)."""
        return inter_objects.reduce(self, sendobj, op, root)

    def allreduce(self, sendobj: Any, op: Any = MPI.SUM) -> Any:
        """``op`` over the other group's objects in rank order."""
        return inter_objects.allreduce(self, sendobj, op)

    # -- derived communicators ---------------------------------------------------------------------------

    def Dup(self, info: MPI.Info | None = None) -> Intercomm:
        made = MPI.Intercomm.Dup(self, info) if info is not None else MPI.Intercomm.Dup(self)
        return self._derive(MPI.Intercomm(made))

    def Clone(self) -> Intercomm:
        return self.Dup()

    def Dup_with_info(self, info: MPI.Info) -> Intercomm:
        return self._derive(MPI.Intercomm(MPI.Intercomm.Dup_with_info(self, info)))

    def _derive(self, comm: MPI.Intercomm) -> Intercomm:
        """``comm`` (a duplicate of this one) wrapped, its state duplicated from this one's (MPI's ``Dup`` only)."""
        made = MPI.Intercomm.__new__(Intercomm, comm)
        made._state = None
        state = self._state
        if state is not None and comm != MPI.COMM_NULL:
            made._state = inter.InterState(state.merged.Dup(), state.local.Dup(), state.remote)
        return made

    def Merge(self, high: bool = False) -> Comm:
        """``MPI_Intercomm_merge``, wrapped: an :class:`Comm` of both groups, its state derived from this one's
        (no message beyond MPI's own)."""
        merged = MPI.Intercomm.Merge(self, high)
        return Comm._derive_from(merged, self._state.merged._state if self._state is not None else None)

    # -- the end of a communicator -------------------------------------------------------------------------

    def Free(self) -> None:
        """Free the intercommunicator and mpicoll's communicators for it."""
        self._release()
        MPI.Intercomm.Free(self)

    def Disconnect(self) -> None:
        """Disconnect the intercommunicator (MPI_Comm_disconnect) and free mpicoll's communicators for it."""
        self._release()
        MPI.Intercomm.Disconnect(self)

    def _release(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            state.release()

    def __repr__(self) -> str:
        if self == MPI.COMM_NULL:
            return "mpicoll.Intercomm(COMM_NULL)"
        return (f"mpicoll.Intercomm(rank={self.Get_rank()}, size={self.Get_size()}, "
                f"remote_size={self.Get_remote_size()})")
