"""``mpicoll.Comm``: a drop-in replacement for an mpi4py intracommunicator.

It *is* an :class:`mpi4py.MPI.Intracomm` (a subclass sharing the same MPI
handle), so everything mpi4py offers works unchanged; the collectives are
replaced by mpicoll's own, which take one more keyword, ``algorithm``.  The
buffer collectives' methods are written once, in :mod:`mpicoll.comm.collectives`,
and shared by :class:`Comm` (with its topology subclasses) and :class:`Intercomm`;
this module holds what differs: how a communicator is wrapped, derived and
released, and the object collectives.  What mpicoll keeps for a communicator is
its state (``comm._state``: a :class:`~mpicoll.program.state.CommState`, made by
:mod:`mpicoll.comm.setup` and found again by :mod:`mpicoll.comm.states`; an
intercommunicator's is a :class:`~mpicoll.comm.inter.InterState`).
"""

from __future__ import annotations

import numbers
from typing import Any

from mpi4py import MPI

from mpicoll import config
from mpicoll.comm import inter, inter_objects, setup, states
from mpicoll.comm.collectives import Collectives, IntraCollectives
from mpicoll.program.state import CommState

__all__ = ["Comm", "Cartcomm", "Graphcomm", "Distgraphcomm", "Intercomm"]

_INFO = MPI.INFO_NULL


class Comm(IntraCollectives, MPI.Intracomm):
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
    after playing its part, see :mod:`mpicoll.engine.standin`).  With ``MPICOLL_DEBUG=1``
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
            made._state = states.register(comm, setup.derived(comm, parent, parent.timeout) if parent is not None
                                    else setup.wrapped(comm, config.current().timeout))
        return made

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
        world = states.world()
        if world is None:
            return Comm(comm)
        return Comm._derive_from(comm, world)

    # -- surviving a failed process (MPI's fault-tolerance extension, ULFM: mpirun --with-ft ulfm) ----------

    def Shrink(self) -> Comm:
        """``MPIX_Comm_shrink``, wrapped: the surviving processes, in a communicator whose state is derived from
        this one's (no message beyond MPI's own ``Shrink`` and ``Idup``).  What a program does after a
        collective raised :class:`~mpicoll.ProcFailedError`."""
        return self._derive(MPI.Intracomm(MPI.Comm.Shrink(self)))

    def Ishrink(self) -> tuple[Comm, MPI.Request]:
        """``MPIX_Comm_ishrink``, wrapped as :meth:`Idup` is: mpicoll makes the state once the survivors'
        communicator exists, so the request returned is complete."""
        shrunk, request = MPI.Comm.Ishrink(self)
        request.Wait()
        return self._derive(MPI.Intracomm(shrunk)), request

    def Revoke(self) -> None:
        """``MPIX_Comm_revoke``: this communicator and mpicoll's private one, so that every pending or later
        operation on either, mpicoll's collectives included, raises on every rank."""
        MPI.Comm.Revoke(self)
        _revoke_private(self._state)

    def Is_revoked(self) -> bool:
        """Whether this communicator, or mpicoll's private one (revoked by a collective that saw a process
        fail), is revoked: its collectives cannot complete until the survivors :meth:`Shrink`."""
        return MPI.Comm.Is_revoked(self) or _private_revoked(self._state)

    def Set_errhandler(self, errhandler: MPI.Errhandler) -> None:
        """Set the error handler of this communicator and of mpicoll's private one (MPI's errors in its
        collectives then abort or raise as the handler says)."""
        MPI.Comm.Set_errhandler(self, errhandler)
        if self._state is not None:
            self._state.private.Set_errhandler(errhandler)

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
            state.release()     # (its attribute goes with the communicator, which the caller frees next)

    def __repr__(self) -> str:
        if self == MPI.COMM_NULL:
            return "mpicoll.Comm(COMM_NULL)"
        return f"mpicoll.Comm(rank={self.Get_rank()}, size={self.Get_size()})"


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


def _revoke_private(state: CommState | None) -> None:
    if state is not None and state.private != MPI.COMM_NULL:
        try:
            state.private.Revoke()
        except MPI.Exception:   # revoked already
            pass


def _private_revoked(state: CommState | None) -> bool:
    return state is not None and state.private != MPI.COMM_NULL and state.private.Is_revoked()


def _state_of(comm: MPI.Intracomm, timeout: float | None) -> CommState:
    """The state of ``comm``: shared with its other wrappers (same timeout), else made (collective)."""
    if isinstance(comm, Comm) and comm._state is not None and comm._state.timeout == timeout:
        return comm._state
    return states.shared(comm, timeout) or states.register(comm, setup.wrapped(comm, timeout))


# -- intercommunicators: mpi4py's class (every query, Merge) and mpicoll's collectives ----------------------


class Intercomm(Collectives, MPI.Intercomm):
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
