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

import importlib
from typing import Any

from mpi4py import MPI

from . import guard
from .datatypes import staging
from .exec import nonblocking
from .exec.blocking import execute
from .exec.nonblocking import Prequest, Request
from .plan import Plan, PlanCache, call_key

__all__ = ["Comm"]

# the collective modules, by mpi4py method name, looked up once
_MODULES: dict[str, Any] = {}
# positions of arguments that are counts rather than buffers (part of the plan cache's key by value)
_VALUE_ARGS: dict[str, tuple[int, ...]] = {"Reduce_scatter": (2,)}
# the three tag sequences of a communicator (see Comm._next_tag)
BLOCKING, NONBLOCKING, PERSISTENT = 0, 1, 2


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

    #: seconds a blocking call or a Wait may go without progress before raising
    #: :class:`mpicoll.CollectiveTimeout`; None: no watchdog (the default; see :mod:`mpicoll.guard`)
    timeout: float | None = None

    def __new__(cls, comm: MPI.Intracomm | None = None, *, timeout: float | None = None) -> Comm:
        if comm is not None and (not isinstance(comm, MPI.Intracomm) or isinstance(comm, MPI.Intercomm)):
            raise TypeError(f"mpicoll.Comm wraps an MPI.Intracomm, got {type(comm).__name__}")
        self = super().__new__(cls, comm)
        if timeout is None:
            timeout = guard.env_timeout() if comm is None or not isinstance(comm, Comm) else comm.timeout
        if timeout is not None:
            if not timeout > 0:
                raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
            self.timeout = float(timeout)
        return self

    def _derived(self, comm: MPI.Intracomm) -> Comm:
        """A communicator derived from this one, wrapped, with the same timeout."""
        return Comm(comm, timeout=self.timeout)

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

    def _next_tag(self, kind: int = NONBLOCKING) -> int:
        """The tag of the next call of ``kind`` (``BLOCKING``, ``NONBLOCKING`` or ``PERSISTENT``).

        Every rank calls the collectives of one communicator in the same order, so
        every rank draws the same tag for the same call, and a message of one call
        can only ever match the same call on its peer: a message left over by an
        erroneous call (counts that differ between ranks, say) is never received by
        a later one.  The tags 1 .. TAG_UB are split in three ranges, one per kind,
        each cycled through: blocking calls, nonblocking calls, and persistent
        requests (which keep their tag for their whole life, so a long-lived one
        is not caught up by a billion ``Iallreduce``).  Tag 0 is never used.
        """
        state = self.__dict__.get("_tags")
        if state is None:
            third = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB) // 3
            state = self.__dict__["_tags"] = [third, 0, 0, 0]
        third = state[0]
        n = state[kind + 1] = state[kind + 1] % third + 1
        return n + kind * third

    # -- how every collective runs -------------------------------------------
    # ``method`` is mpi4py's method name (``"Bcast"``); the collective's module is
    # ``mpicoll.calls.<method in lowercase>``: its ``prepare`` checks the arguments
    # and returns the bound plan.  Each call draws its tag first, so that every
    # rank counts every call, even one whose checks fail on some rank only.

    @staticmethod
    def _module(method: str) -> Any:
        module = _MODULES.get(method)
        if module is None:
            module = _MODULES[method] = importlib.import_module(f"{__package__}.calls.{method.lower()}")
        return module

    def _prepare(self, method: str, *args: Any, algorithm: str) -> Plan | None:
        with staging() as staged:  # buffers of non-contiguous datatypes: unpacked when the plan finishes
            return staged.attach(self._module(method).prepare(self, *args, algorithm=algorithm))

    @property
    def plans(self) -> PlanCache:
        """The bound plans of this communicator's blocking calls (see :mod:`mpicoll.plan`)."""
        cache = self.__dict__.get("_plans")
        if cache is None:
            cache = self.__dict__["_plans"] = PlanCache()
        return cache

    def _cached_prepare(self, method: str, *args: Any, algorithm: str) -> Plan | None:
        # Blocking calls only: a repeated call on the same memory (and counts, datatypes, op, root,
        # algorithm) reuses its bound plan and scratch buffers.  Nonblocking and persistent calls
        # always get a plan of their own, since two outstanding calls may share a send buffer and
        # must not share scratch space.
        found = call_key(method, args, algorithm, _VALUE_ARGS.get(method, ()))
        if found is not None:
            plan = self.plans.get(found[0])
            if plan is not None:
                return plan
        module = self._module(method)
        plan = self._prepare(method, *args, algorithm=algorithm)
        cacheable = getattr(module, "cacheable", None)
        if found is not None and (cacheable is None or cacheable(*args)):
            key, refs, spans = found
            self.plans.put(key, plan, refs, spans)
        return plan

    def _run(self, method: str, *args: Any, algorithm: str) -> None:
        tag = self._next_tag(BLOCKING)
        if guard.active(self):     # a timeout or MPICOLL_DEBUG: the careful path
            return guard.run(self, method, args, algorithm, tag)
        try:
            plan = self._cached_prepare(method, *args, algorithm=algorithm)
        except Exception as exc:   # peers may have started: play this rank's part on scratch, then raise
            guard.stand_in(self, method, args, algorithm, exc, tag)
            raise
        if plan is None:
            return
        if nonblocking.outstanding():
            # a peer may be waiting on an outstanding mpicoll request before it joins this call:
            # run as a request of its own, so that waiting for it keeps the others moving
            nonblocking.start(plan, self, tag).Wait()
        elif plan.device is not None:
            plan.device.run(self.private, tag)
            if plan.finish is not None:
                plan.finish()
        else:
            execute(plan.rounds(), self.private, tag)
            if plan.finish is not None:
                plan.finish()

    def _start(self, method: str, *args: Any, algorithm: str) -> Request:
        tag = self._next_tag(NONBLOCKING)
        if guard.active(self):
            return guard.start(self, method, args, algorithm, tag)
        try:
            plan = self._prepare(method, *args, algorithm=algorithm)
        except Exception as exc:   # as in _run: no peer may be left waiting
            guard.stand_in(self, method, args, algorithm, exc, tag, nonblocking_call=True)
            raise
        return nonblocking.start(plan, self, tag)

    def _init(self, method: str, *args: Any, info: MPI.Info, algorithm: str) -> Prequest:
        # mpicoll accepts the ``info`` hints of the *_init methods and ignores them
        tag = self._next_tag(PERSISTENT)
        plan = self._prepare(method, *args, algorithm=algorithm)
        rebuild = None
        if plan is not None and (plan.device is not None or plan.before is not None):
            # GPU buffers, or buffers of non-contiguous datatypes: bound once, their inputs staged per Start

            def rebuild() -> Plan | None:
                plan.begin()
                return None     # the request keeps its MPI persistent requests and views

        return nonblocking.persistent(plan, self, tag, rebuild)

    # -- the collectives: mpi4py's signatures, plus ``algorithm`` ---------------

    def Barrier(self, *, algorithm: str = "auto") -> None:
        """Block until every rank has called it (MPI_Barrier)."""
        self._run("Barrier", algorithm=algorithm)

    def Ibarrier(self, *, algorithm: str = "auto") -> Request:
        """Nonblocking Barrier: returns a request; see :meth:`Barrier`."""
        return self._start("Barrier", algorithm=algorithm)

    def Barrier_init(self, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto") -> Prequest:
        """Persistent Barrier: returns an inactive request to ``Start()``; see :meth:`Barrier`."""
        return self._init("Barrier", info=info, algorithm=algorithm)

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Broadcast ``buf`` from ``root`` to every rank (MPI_Bcast)."""
        self._run("Bcast", buf, root, algorithm=algorithm)

    def Ibcast(self, buf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking Bcast: returns a request; see :meth:`Bcast`."""
        return self._start("Bcast", buf, root, algorithm=algorithm)

    def Bcast_init(
        self, buf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Bcast: returns an inactive request to ``Start()``; see :meth:`Bcast`."""
        return self._init("Bcast", buf, root, info=info, algorithm=algorithm)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto") -> None:
        """Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` at ``root`` (MPI_Reduce)."""
        self._run("Reduce", sendbuf, recvbuf, op, root, algorithm=algorithm)

    def Ireduce(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto"
    ) -> Request:
        """Nonblocking Reduce: returns a request; see :meth:`Reduce`."""
        return self._start("Reduce", sendbuf, recvbuf, op, root, algorithm=algorithm)

    def Reduce_init(
        self,
        sendbuf: Any,
        recvbuf: Any,
        op: Any = MPI.SUM,
        root: int = 0,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        algorithm: str = "auto",
    ) -> Prequest:
        """Persistent Reduce: returns an inactive request to ``Start()``; see :meth:`Reduce`."""
        return self._init("Reduce", sendbuf, recvbuf, op, root, info=info, algorithm=algorithm)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Reduce every rank's ``sendbuf`` with ``op`` into every rank's ``recvbuf`` (MPI_Allreduce)."""
        self._run("Allreduce", sendbuf, recvbuf, op, algorithm=algorithm)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        """Nonblocking Allreduce: returns a request; see :meth:`Allreduce`."""
        return self._start("Allreduce", sendbuf, recvbuf, op, algorithm=algorithm)

    def Allreduce_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Allreduce: returns an inactive request to ``Start()``; see :meth:`Allreduce`."""
        return self._init("Allreduce", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Gather equal blocks from every rank at ``root``, in rank order (MPI_Gather)."""
        self._run("Gather", sendbuf, recvbuf, root, algorithm=algorithm)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking Gather: returns a request; see :meth:`Gather`."""
        return self._start("Gather", sendbuf, recvbuf, root, algorithm=algorithm)

    def Gather_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Gather: returns an inactive request to ``Start()``; see :meth:`Gather`."""
        return self._init("Gather", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Gather blocks of varying size at ``root`` (MPI_Gatherv)."""
        self._run("Gatherv", sendbuf, recvbuf, root, algorithm=algorithm)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking Gatherv: returns a request; see :meth:`Gatherv`."""
        return self._start("Gatherv", sendbuf, recvbuf, root, algorithm=algorithm)

    def Gatherv_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Gatherv: returns an inactive request to ``Start()``; see :meth:`Gatherv`."""
        return self._init("Gatherv", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Send block i of ``root``'s ``sendbuf`` to rank i (MPI_Scatter)."""
        self._run("Scatter", sendbuf, recvbuf, root, algorithm=algorithm)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking Scatter: returns a request; see :meth:`Scatter`."""
        return self._start("Scatter", sendbuf, recvbuf, root, algorithm=algorithm)

    def Scatter_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Scatter: returns an inactive request to ``Start()``; see :meth:`Scatter`."""
        return self._init("Scatter", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Scatter blocks of varying size from ``root`` (MPI_Scatterv)."""
        self._run("Scatterv", sendbuf, recvbuf, root, algorithm=algorithm)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking Scatterv: returns a request; see :meth:`Scatterv`."""
        return self._start("Scatterv", sendbuf, recvbuf, root, algorithm=algorithm)

    def Scatterv_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Scatterv: returns an inactive request to ``Start()``; see :meth:`Scatterv`."""
        return self._init("Scatterv", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """Gather equal blocks from every rank at every rank (MPI_Allgather)."""
        self._run("Allgather", sendbuf, recvbuf, algorithm=algorithm)

    def Iallgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking Allgather: returns a request; see :meth:`Allgather`."""
        return self._start("Allgather", sendbuf, recvbuf, algorithm=algorithm)

    def Allgather_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Allgather: returns an inactive request to ``Start()``; see :meth:`Allgather`."""
        return self._init("Allgather", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """Gather blocks of varying size at every rank (MPI_Allgatherv)."""
        self._run("Allgatherv", sendbuf, recvbuf, algorithm=algorithm)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking Allgatherv: returns a request; see :meth:`Allgatherv`."""
        return self._start("Allgatherv", sendbuf, recvbuf, algorithm=algorithm)

    def Allgatherv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Allgatherv: returns an inactive request to ``Start()``; see :meth:`Allgatherv`."""
        return self._init("Allgatherv", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Reduce, then give rank i block i of equal blocks (MPI_Reduce_scatter_block)."""
        self._run("Reduce_scatter_block", sendbuf, recvbuf, op, algorithm=algorithm)

    def Ireduce_scatter_block(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> Request:
        """Nonblocking Reduce_scatter_block: returns a request; see :meth:`Reduce_scatter_block`."""
        return self._start("Reduce_scatter_block", sendbuf, recvbuf, op, algorithm=algorithm)

    def Reduce_scatter_block_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Reduce_scatter_block: an inactive request to ``Start()``; see :meth:`Reduce_scatter_block`."""
        return self._init("Reduce_scatter_block", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    def Reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> None:
        """Reduce, then give rank i ``recvcounts[i]`` elements (MPI_Reduce_scatter)."""
        self._run("Reduce_scatter", sendbuf, recvbuf, recvcounts, op, algorithm=algorithm)

    def Ireduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> Request:
        """Nonblocking Reduce_scatter: returns a request; see :meth:`Reduce_scatter`."""
        return self._start("Reduce_scatter", sendbuf, recvbuf, recvcounts, op, algorithm=algorithm)

    def Reduce_scatter_init(
        self,
        sendbuf: Any,
        recvbuf: Any,
        recvcounts: Any = None,
        op: Any = MPI.SUM,
        info: MPI.Info = MPI.INFO_NULL,
        *,
        algorithm: str = "auto",
    ) -> Prequest:
        """Persistent Reduce_scatter: returns an inactive request to ``Start()``; see :meth:`Reduce_scatter`."""
        return self._init("Reduce_scatter", sendbuf, recvbuf, recvcounts, op, info=info, algorithm=algorithm)

    def Alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """Send block j of every rank's ``sendbuf`` to rank j (MPI_Alltoall)."""
        self._run("Alltoall", sendbuf, recvbuf, algorithm=algorithm)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking Alltoall: returns a request; see :meth:`Alltoall`."""
        return self._start("Alltoall", sendbuf, recvbuf, algorithm=algorithm)

    def Alltoall_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Alltoall: returns an inactive request to ``Start()``; see :meth:`Alltoall`."""
        return self._init("Alltoall", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """All-to-all with blocks of varying size (MPI_Alltoallv)."""
        self._run("Alltoallv", sendbuf, recvbuf, algorithm=algorithm)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking Alltoallv: returns a request; see :meth:`Alltoallv`."""
        return self._start("Alltoallv", sendbuf, recvbuf, algorithm=algorithm)

    def Alltoallv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Alltoallv: returns an inactive request to ``Start()``; see :meth:`Alltoallv`."""
        return self._init("Alltoallv", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """All-to-all with a count, byte displacement and datatype per block (MPI_Alltoallw)."""
        self._run("Alltoallw", sendbuf, recvbuf, algorithm=algorithm)

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking Alltoallw: returns a request; see :meth:`Alltoallw`."""
        return self._start("Alltoallw", sendbuf, recvbuf, algorithm=algorithm)

    def Alltoallw_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Alltoallw: returns an inactive request to ``Start()``; see :meth:`Alltoallw`."""
        return self._init("Alltoallw", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Inclusive prefix reduction: rank i gets ranks 0..i reduced (MPI_Scan)."""
        self._run("Scan", sendbuf, recvbuf, op, algorithm=algorithm)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        """Nonblocking Scan: returns a request; see :meth:`Scan`."""
        return self._start("Scan", sendbuf, recvbuf, op, algorithm=algorithm)

    def Scan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Scan: returns an inactive request to ``Start()``; see :meth:`Scan`."""
        return self._init("Scan", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Exclusive prefix reduction: rank i gets ranks 0..i-1 reduced (MPI_Exscan)."""
        self._run("Exscan", sendbuf, recvbuf, op, algorithm=algorithm)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        """Nonblocking Exscan: returns a request; see :meth:`Exscan`."""
        return self._start("Exscan", sendbuf, recvbuf, op, algorithm=algorithm)

    def Exscan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent Exscan: returns an inactive request to ``Start()``; see :meth:`Exscan`."""
        return self._init("Exscan", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    # -- derived communicators stay wrapped ------------------------------------

    def Dup(self, info: MPI.Info | None = None) -> Comm:
        dup = MPI.Intracomm.Dup(self, info) if info is not None else MPI.Intracomm.Dup(self)
        return self._derived(MPI.Intracomm(dup))

    def Clone(self) -> Comm:
        return self.Dup()

    def Dup_with_info(self, info: MPI.Info) -> Comm:
        return self._derived(MPI.Intracomm(MPI.Intracomm.Dup_with_info(self, info)))

    def Split(self, color: int = 0, key: int = 0) -> Comm:
        return self._derived(MPI.Intracomm.Split(self, color, key))

    def Split_type(self, split_type: int, key: int = 0, info: MPI.Info = MPI.INFO_NULL) -> Comm:
        return self._derived(MPI.Intracomm.Split_type(self, split_type, key, info))

    def Create(self, group: MPI.Group) -> Comm:
        return self._derived(MPI.Intracomm.Create(self, group))

    def Create_group(self, group: MPI.Group, tag: int = 0) -> Comm:
        return self._derived(MPI.Intracomm.Create_group(self, group, tag))

    def Free(self) -> None:
        """Free the private duplicate and the cached plans, then the communicator itself."""
        self.__dict__.pop("_plans", None)  # bound plans hold references to user arrays
        dup = self.__dict__.pop("_private", None)
        if dup is not None:
            dup.Free()
        MPI.Intracomm.Free(self)

    def __repr__(self) -> str:
        if self == MPI.COMM_NULL:
            return "mpicoll.Comm(COMM_NULL)"
        return f"mpicoll.Comm(rank={self.Get_rank()}, size={self.Get_size()})"
