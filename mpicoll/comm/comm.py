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
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll.comm import careful as guard
from mpicoll.runtime import nonblocking
from mpicoll.runtime import plan as plan_module
from mpicoll.runtime.compiled import extension
from mpicoll.runtime.datatypes import staging
from mpicoll.runtime.nonblocking import Prequest, Request
from mpicoll.runtime.plan import NOTHING, REQUEST_PLAN_SCRATCH, Plan, PlanCache, call_key, held, scratch_from, shape_key

__all__ = ["Comm"]

# the collective modules, by mpi4py method name, looked up once
_MODULES: dict[str, Any] = {}
# positions of arguments that are counts rather than buffers (part of the plan cache's key by value)
_VALUE_ARGS: dict[str, tuple[int, ...]] = {"Reduce_scatter": (2,)}
# the three tag sequences of a communicator (see Comm._next_tag)
BLOCKING, NONBLOCKING, PERSISTENT = 0, 1, 2


class Comm(MPI.Intracomm):
    """Wrap ``comm`` (an ``MPI.Intracomm``) so that its collectives are mpicoll's.

    The collectives take mpi4py's arguments, plus the keyword ``algorithm``
    (``"auto"``, or a name from :func:`mpicoll.algorithms`; the environment
    variable ``MPICOLL_ALGO`` overrides ``"auto"``).  Every other method is
    mpi4py's own; derived communicators (``Dup``, ``Split``, ...) are wrapped too.

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
    plays its part on scratch memory, then raises).  With ``MPICOLL_DEBUG=1``
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

    #: seconds a blocking call or a Wait may go without progress before raising
    #: :class:`mpicoll.CollectiveTimeout`; None: no watchdog (the default; see :mod:`mpicoll.comm.careful`)
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
        state = self.__dict__.get("_tags") or self._tag_state()
        third = state[0]
        n = state[kind + 1] = state[kind + 1] % third + 1
        return n + kind * third

    def _tag_state(self) -> list[int]:
        """``[tags per kind, last blocking, last nonblocking, last persistent]``, made on first use."""
        state = self.__dict__["_tags"] = [MPI.COMM_WORLD.Get_attr(MPI.TAG_UB) // 3, 0, 0, 0]
        return state

    # -- how every collective runs -------------------------------------------
    # ``method`` is mpi4py's method name (``"Bcast"``); the collective's module is
    # ``mpicoll.calls.<method in lowercase>``: its ``prepare`` checks the arguments
    # and returns the bound plan.  Each call draws its tag first, so that every
    # rank counts every call, even one whose checks fail on some rank only.

    @staticmethod
    def _module(method: str) -> Any:
        module = _MODULES.get(method)
        if module is None:
            module = _MODULES[method] = importlib.import_module(f"mpicoll.calls.{method.lower()}")
        return module

    def _prepare(self, method: str, *args: Any, algorithm: str) -> Plan | None:
        with staging() as staged:  # buffers of non-contiguous datatypes: unpacked when the plan finishes
            return staged.attach(self._module(method).prepare(self, *args, algorithm=algorithm))

    @property
    def plans(self) -> PlanCache:
        """The bound plans of this communicator's blocking calls (see :mod:`mpicoll.runtime.plan`)."""
        cache = self.__dict__.get("_plans")
        if cache is None:
            cache = self.__dict__["_plans"] = PlanCache()
        return cache

    def _cached_prepare(self, method: str, *args: Any, algorithm: str) -> Plan | None:
        # Blocking calls only: a repeated call on the same memory (and counts, datatypes, op, root,
        # algorithm) reuses its bound plan and scratch buffers; a call of the same shape on other
        # memory moves a plan of that shape there.  Nonblocking calls have a cache of their own
        # (see _lend), since outstanding calls run at the same time and must not share scratch
        # space; a persistent call binds its plan once.
        values = _VALUE_ARGS.get(method, ())
        key = call_key(method, args, algorithm, values)
        plans = self.__dict__.get("_plans") or self.plans
        module = self._module(method)
        shape = None
        if key is not None:
            plan = plans.get(key)
            if plan is not None:
                return None if plan is NOTHING else plan
            cacheable = getattr(module, "cacheable", None)
            if cacheable is None or cacheable(*args):
                shape, spans = shape_key(method, args, algorithm, values)
                plan = plans.rebased(shape, spans)
                if plan is not None:
                    plans.put(key, plan, held(args, values), spans, comm=self.private)
                    return None if plan is NOTHING else plan
        with scratch_from(plans.arena):   # blocking calls run one at a time: one scratch arena for all
            plan = self._prepare(method, *args, algorithm=algorithm)
        if shape is not None:
            plans.put(key, plan, held(args, values), spans, comm=None if plan is None else self.private, shape=shape)
        return plan

    def _run_prepared(self, method: str, algorithm: str, args: tuple, tag: int) -> None:
        # what run() does on a miss, with a timeout, in debug mode or with mpicoll requests outstanding
        if self.timeout is not None or guard.debugging():   # the careful path
            return guard.run(self, method, args, algorithm, tag)
        try:
            plan = self._cached_prepare(method, *args, algorithm=algorithm)
        except Exception as exc:   # peers may have started: play this rank's part on scratch, then raise
            guard.stand_in(self, method, args, algorithm, exc, tag)
            raise
        if plan is None:
            return
        if nonblocking.ACTIVE:
            # a peer may be waiting on an outstanding mpicoll request before it joins this call:
            # run as a request of its own, so that waiting for it keeps the others moving
            nonblocking.start(plan, self, tag).Wait()
            return
        plan.runner(self.private)(tag)

    def _start(self, method: str, *args: Any, algorithm: str) -> Request:
        tag = self._next_tag(NONBLOCKING)
        if guard.active(self):
            return guard.start(self, method, args, algorithm, tag)
        try:
            plan, lent = self._lend(method, args, algorithm)
        except Exception as exc:   # as in _run: no peer may be left waiting
            guard.stand_in(self, method, args, algorithm, exc, tag, nonblocking_call=True)
            raise
        return nonblocking.start(plan, self, tag, lent=lent)

    @property
    def request_plans(self) -> PlanCache:
        """The bound plans of this communicator's nonblocking calls (see :meth:`_lend`)."""
        cache = self.__dict__.get("_request_plans")
        if cache is None:
            cache = self.__dict__["_request_plans"] = PlanCache(scratch=REQUEST_PLAN_SCRATCH)
        return cache

    def _lend(self, method: str, args: tuple, algorithm: str) -> tuple[Plan | None, bool]:
        """A nonblocking call's plan, and whether it is a cached one, lent to the call's request.

        A repeated nonblocking call on the same memory reuses its plan as a
        blocking call does, but its plan has scratch of its own (outstanding
        requests run at the same time) and serves one request at a time: while a
        request of it is unfinished (:attr:`Plan.lent`), an equal call gets a
        fresh plan, as do calls the cache does not take (GPU buffers, datatypes
        packed or unpacked around the call).
        """
        values = _VALUE_ARGS.get(method, ())
        key = call_key(method, args, algorithm, values)
        cache = self.request_plans
        if key is not None:
            plan = cache.get(key)
            if plan is NOTHING:
                return None, False
            if plan is not None and not plan.lent:
                return plan, True
        plan = self._prepare(method, *args, algorithm=algorithm)
        cacheable = getattr(self._module(method), "cacheable", None)
        if key is None or (cacheable is not None and not cacheable(*args)) or key in cache.data:
            return plan, False
        if plan is not None and (plan.device is not None or plan.before is not None or plan.finish is not None):
            return plan, False
        cache.put(key, plan, held(args, values), shape_key(method, args, algorithm, values)[1], comm=self.private)
        return plan, plan is not None and key in cache.data   # put refuses a plan with too much scratch

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
        """Block until every rank has called it (MPI_Barrier).

        Parameters
        ----------
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("barrier")``, or ``"auto"``.

        Raises
        ------
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Barrier", algorithm)

    def Ibarrier(self, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Barrier` (MPI_Ibarrier).

        Same parameters as :meth:`Barrier`.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Barrier`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Barrier", algorithm=algorithm)

    def Barrier_init(self, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto") -> Prequest:
        """Persistent :meth:`Barrier` (MPI_Barrier_init).

        Same parameters as :meth:`Barrier`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Barrier`, raised by this call.
        """
        return self._init("Barrier", info=info, algorithm=algorithm)

    def Bcast(self, buf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Broadcast ``buf`` from ``root`` to every rank (MPI_Bcast).

        Parameters
        ----------
        buf : buffer specification
            Sent at ``root``, received (so writable) elsewhere.
        root : int, default 0
            The rank that sends.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("bcast")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Bcast", algorithm, buf, root)

    def Ibcast(self, buf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Bcast` (MPI_Ibcast).

        Same parameters as :meth:`Bcast`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Bcast`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout is
            set.
        """
        return self._start("Bcast", buf, root, algorithm=algorithm)

    def Bcast_init(
        self, buf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Bcast` (MPI_Bcast_init).

        Same parameters as :meth:`Bcast`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Bcast`, raised by this call.
        """
        return self._init("Bcast", buf, root, info=info, algorithm=algorithm)

    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto") -> None:
        """Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` at ``root`` (MPI_Reduce).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's contribution; ``MPI.IN_PLACE`` at the root only, taking it from ``recvbuf``.
        recvbuf : buffer specification
            The result, significant at ``root`` only.
        op : MPI.Op or mpicoll.Op, default MPI.SUM
            The reduction; a predefined op must be defined for the dtype.
        root : int, default 0
            The rank that receives the result.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("reduce")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Reduce", algorithm, sendbuf, recvbuf, op, root)

    def Ireduce(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0, *, algorithm: str = "auto"
    ) -> Request:
        """Nonblocking :meth:`Reduce` (MPI_Ireduce).

        Same parameters as :meth:`Reduce`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Reduce`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout is
            set.
        """
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
        """Persistent :meth:`Reduce` (MPI_Reduce_init).

        Same parameters as :meth:`Reduce`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Reduce`, raised by this call.
        """
        return self._init("Reduce", sendbuf, recvbuf, op, root, info=info, algorithm=algorithm)

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Reduce every rank's ``sendbuf`` with ``op`` into every rank's ``recvbuf`` (MPI_Allreduce).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's contribution; ``MPI.IN_PLACE`` takes it from ``recvbuf``.
        recvbuf : buffer specification
            The result, on every rank.
        op : MPI.Op or mpicoll.Op, default MPI.SUM
            The reduction; a predefined op must be defined for the dtype.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("allreduce")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Allreduce", algorithm, sendbuf, recvbuf, op)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Allreduce` (MPI_Iallreduce).

        Same parameters as :meth:`Allreduce`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Allreduce`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Allreduce", sendbuf, recvbuf, op, algorithm=algorithm)

    def Allreduce_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Allreduce` (MPI_Allreduce_init).

        Same parameters as :meth:`Allreduce`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Allreduce`, raised by this call.
        """
        return self._init("Allreduce", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Gather equal blocks from every rank at ``root``, in rank order (MPI_Gather).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's block; ``MPI.IN_PLACE`` at the root only (its block is already in place in ``recvbuf``).
        recvbuf : buffer specification
            At ``root``: size x the block, block i from rank i; ignored elsewhere.
        root : int, default 0
            The rank that receives.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("gather")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Gather", algorithm, sendbuf, recvbuf, root)

    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Gather` (MPI_Igather).

        Same parameters as :meth:`Gather`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Gather`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout is
            set.
        """
        return self._start("Gather", sendbuf, recvbuf, root, algorithm=algorithm)

    def Gather_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Gather` (MPI_Gather_init).

        Same parameters as :meth:`Gather`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Gather`, raised by this call.
        """
        return self._init("Gather", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Gather blocks of varying size at ``root`` (MPI_Gatherv).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's block; ``MPI.IN_PLACE`` at the root only.
        recvbuf : buffer specification
            At ``root``: ``[buf, counts, displs, datatype]`` (``displs`` optional: packed in rank order); ignored
            elsewhere.
        root : int, default 0
            The rank that receives.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("gatherv")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Gatherv", algorithm, sendbuf, recvbuf, root)

    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Gatherv` (MPI_Igatherv).

        Same parameters as :meth:`Gatherv`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Gatherv`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Gatherv", sendbuf, recvbuf, root, algorithm=algorithm)

    def Gatherv_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Gatherv` (MPI_Gatherv_init).

        Same parameters as :meth:`Gatherv`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Gatherv`, raised by this call.
        """
        return self._init("Gatherv", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Send block i of ``root``'s ``sendbuf`` to rank i (MPI_Scatter).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            At ``root``: size equal blocks; ignored elsewhere.
        recvbuf : buffer specification
            This rank's block; ``MPI.IN_PLACE`` at the root only (it keeps its block in ``sendbuf``).
        root : int, default 0
            The rank that sends.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("scatter")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Scatter", algorithm, sendbuf, recvbuf, root)

    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Scatter` (MPI_Iscatter).

        Same parameters as :meth:`Scatter`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Scatter`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Scatter", sendbuf, recvbuf, root, algorithm=algorithm)

    def Scatter_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Scatter` (MPI_Scatter_init).

        Same parameters as :meth:`Scatter`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Scatter`, raised by this call.
        """
        return self._init("Scatter", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> None:
        """Scatter blocks of varying size from ``root`` (MPI_Scatterv).

        Parameters
        ----------
        sendbuf : buffer specification
            At ``root``: ``[buf, counts, displs, datatype]`` (``displs`` optional); ignored elsewhere.
        recvbuf : buffer specification
            This rank's block; ``MPI.IN_PLACE`` at the root only.
        root : int, default 0
            The rank that sends.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("scatterv")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Scatterv", algorithm, sendbuf, recvbuf, root)

    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Scatterv` (MPI_Iscatterv).

        Same parameters as :meth:`Scatterv`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Scatterv`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Scatterv", sendbuf, recvbuf, root, algorithm=algorithm)

    def Scatterv_init(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Scatterv` (MPI_Scatterv_init).

        Same parameters as :meth:`Scatterv`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Scatterv`, raised by this call.
        """
        return self._init("Scatterv", sendbuf, recvbuf, root, info=info, algorithm=algorithm)

    def Allgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """Gather equal blocks from every rank at every rank (MPI_Allgather).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's block; ``MPI.IN_PLACE`` takes it from its place in ``recvbuf``.
        recvbuf : buffer specification
            size x the block, block i from rank i.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("allgather")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Allgather", algorithm, sendbuf, recvbuf)

    def Iallgather(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Allgather` (MPI_Iallgather).

        Same parameters as :meth:`Allgather`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Allgather`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Allgather", sendbuf, recvbuf, algorithm=algorithm)

    def Allgather_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Allgather` (MPI_Allgather_init).

        Same parameters as :meth:`Allgather`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Allgather`, raised by this call.
        """
        return self._init("Allgather", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Allgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """Gather blocks of varying size at every rank (MPI_Allgatherv).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's block; ``MPI.IN_PLACE`` takes it from its place in ``recvbuf``.
        recvbuf : buffer specification
            ``[buf, counts, displs, datatype]`` (``displs`` optional: packed in rank order).
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("allgatherv")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Allgatherv", algorithm, sendbuf, recvbuf)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Allgatherv` (MPI_Iallgatherv).

        Same parameters as :meth:`Allgatherv`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Allgatherv`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a
            timeout is set.
        """
        return self._start("Allgatherv", sendbuf, recvbuf, algorithm=algorithm)

    def Allgatherv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Allgatherv` (MPI_Allgatherv_init).

        Same parameters as :meth:`Allgatherv`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Allgatherv`, raised by this call.
        """
        return self._init("Allgatherv", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Reduce, then give rank i block i of equal blocks (MPI_Reduce_scatter_block).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            size equal blocks; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
        recvbuf : buffer specification
            This rank's reduced block.
        op : MPI.Op or mpicoll.Op, default MPI.SUM
            The reduction; a predefined op must be defined for the dtype.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("reduce_scatter_block")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Reduce_scatter_block", algorithm, sendbuf, recvbuf, op)

    def Ireduce_scatter_block(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> Request:
        """Nonblocking :meth:`Reduce_scatter_block` (MPI_Ireduce_scatter_block).

        Same parameters as :meth:`Reduce_scatter_block`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Reduce_scatter_block`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout`
            when a timeout is set.
        """
        return self._start("Reduce_scatter_block", sendbuf, recvbuf, op, algorithm=algorithm)

    def Reduce_scatter_block_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Reduce_scatter_block` (MPI_Reduce_scatter_block_init).

        Same parameters as :meth:`Reduce_scatter_block`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and
        ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Reduce_scatter_block`, raised by this call.
        """
        return self._init("Reduce_scatter_block", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    def Reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> None:
        """Reduce, then give rank i ``recvcounts[i]`` elements (MPI_Reduce_scatter).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            ``sum(recvcounts)`` elements; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
        recvbuf : buffer specification
            This rank's reduced part.
        recvcounts : sequence of int, optional
            Elements each rank receives; ``None``: each rank's count of ``recvbuf``, exchanged (as mpi4py does).
        op : MPI.Op or mpicoll.Op, default MPI.SUM
            The reduction; a predefined op must be defined for the dtype.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("reduce_scatter")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Reduce_scatter", algorithm, sendbuf, recvbuf, recvcounts, op)

    def Ireduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Any = MPI.SUM, *, algorithm: str = "auto"
    ) -> Request:
        """Nonblocking :meth:`Reduce_scatter` (MPI_Ireduce_scatter).

        Same parameters as :meth:`Reduce_scatter`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Reduce_scatter`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a
            timeout is set.
        """
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
        """Persistent :meth:`Reduce_scatter` (MPI_Reduce_scatter_init).

        Same parameters as :meth:`Reduce_scatter`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Reduce_scatter`, raised by this call.
        """
        return self._init("Reduce_scatter", sendbuf, recvbuf, recvcounts, op, info=info, algorithm=algorithm)

    def Alltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """Send block j of every rank's ``sendbuf`` to rank j (MPI_Alltoall).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            size equal blocks, block j for rank j; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
        recvbuf : buffer specification
            size equal blocks, block i from rank i.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("alltoall")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Alltoall", algorithm, sendbuf, recvbuf)

    def Ialltoall(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Alltoall` (MPI_Ialltoall).

        Same parameters as :meth:`Alltoall`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Alltoall`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Alltoall", sendbuf, recvbuf, algorithm=algorithm)

    def Alltoall_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Alltoall` (MPI_Alltoall_init).

        Same parameters as :meth:`Alltoall`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Alltoall`, raised by this call.
        """
        return self._init("Alltoall", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Alltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """All-to-all with blocks of varying size (MPI_Alltoallv).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            ``[buf, counts, displs, datatype]``: block j for rank j; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
        recvbuf : buffer specification
            ``[buf, counts, displs, datatype]``: block i from rank i.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("alltoallv")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Alltoallv", algorithm, sendbuf, recvbuf)

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Alltoallv` (MPI_Ialltoallv).

        Same parameters as :meth:`Alltoallv`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Alltoallv`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Alltoallv", sendbuf, recvbuf, algorithm=algorithm)

    def Alltoallv_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Alltoallv` (MPI_Alltoallv_init).

        Same parameters as :meth:`Alltoallv`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Alltoallv`, raised by this call.
        """
        return self._init("Alltoallv", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Alltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> None:
        """All-to-all with a count, byte displacement and datatype per block (MPI_Alltoallw).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            ``[buf, counts, displs, datatypes]``: block j, ``counts[j]`` elements of ``datatypes[j]`` from byte
            ``displs[j]``, for rank j; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
        recvbuf : buffer specification
            ``[buf, counts, displs, datatypes]``: block i from rank i (same type signature size as rank
            i's block for this rank).
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("alltoallw")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Alltoallw", algorithm, sendbuf, recvbuf)

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Alltoallw` (MPI_Ialltoallw).

        Same parameters as :meth:`Alltoallw`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Alltoallw`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout
            is set.
        """
        return self._start("Alltoallw", sendbuf, recvbuf, algorithm=algorithm)

    def Alltoallw_init(
        self, sendbuf: Any, recvbuf: Any, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Alltoallw` (MPI_Alltoallw_init).

        Same parameters as :meth:`Alltoallw`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Alltoallw`, raised by this call.
        """
        return self._init("Alltoallw", sendbuf, recvbuf, info=info, algorithm=algorithm)

    def Scan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Inclusive prefix reduction: rank i gets ranks 0..i reduced (MPI_Scan).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's contribution; ``MPI.IN_PLACE`` takes it from ``recvbuf``.
        recvbuf : buffer specification
            The prefix result.
        op : MPI.Op or mpicoll.Op, default MPI.SUM
            The reduction; a predefined op must be defined for the dtype.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("scan")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Scan", algorithm, sendbuf, recvbuf, op)

    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Scan` (MPI_Iscan).

        Same parameters as :meth:`Scan`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Scan`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout is
            set.
        """
        return self._start("Scan", sendbuf, recvbuf, op, algorithm=algorithm)

    def Scan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Scan` (MPI_Scan_init).

        Same parameters as :meth:`Scan`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Scan`, raised by this call.
        """
        return self._init("Scan", sendbuf, recvbuf, op, info=info, algorithm=algorithm)

    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> None:
        """Exclusive prefix reduction: rank i gets ranks 0..i-1 reduced (MPI_Exscan).

        Parameters
        ----------
        sendbuf : buffer specification or MPI.IN_PLACE
            This rank's contribution; ``MPI.IN_PLACE`` takes it from ``recvbuf``.
        recvbuf : buffer specification
            The prefix result; undefined on rank 0, as in MPI.
        op : MPI.Op or mpicoll.Op, default MPI.SUM
            The reduction; a predefined op must be defined for the dtype.
        algorithm : str, default "auto"
            One of ``mpicoll.algorithms("exscan")``, or ``"auto"``.

        Raises
        ------
        MPI.Exception
            A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`Comm`).
        ValueError
            ``algorithm`` is not one of this collective's.
        MismatchError, CollectiveTimeout
            Only in debug mode, or with a timeout (see :class:`Comm`).
        """
        run(self, "Exscan", algorithm, sendbuf, recvbuf, op)

    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, *, algorithm: str = "auto") -> Request:
        """Nonblocking :meth:`Exscan` (MPI_Iexscan).

        Same parameters as :meth:`Exscan`; leave the buffers alone until the request completes.

        Returns
        -------
        Request
            Complete it with ``Wait()``, ``Test()`` or ``Request.Waitall``.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Exscan`, from this call; ``Wait()`` raises :class:`~mpicoll.CollectiveTimeout` when a timeout is
            set.
        """
        return self._start("Exscan", sendbuf, recvbuf, op, algorithm=algorithm)

    def Exscan_init(
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, info: MPI.Info = MPI.INFO_NULL, *, algorithm: str = "auto"
    ) -> Prequest:
        """Persistent :meth:`Exscan` (MPI_Exscan_init).

        Same parameters as :meth:`Exscan`, plus ``info`` (default ``MPI.INFO_NULL``: accepted and ignored).
        The buffers are bound once: change their contents, never the arrays, between starts.

        Returns
        -------
        Prequest
            An inactive request: ``Start()`` then ``Wait()``, as often as needed; ``Free()`` it at the end.

        Raises
        ------
        MPI.Exception, ValueError, TypeError
            As :meth:`Exscan`, raised by this call.
        """
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


def _run(comm: Comm, method: str, algorithm: str, *args: Any) -> None:
    """Run a blocking call: the hot path of every one.

    Draw the call's tag, build its key, find its cached plan and run it.  A
    miss goes to ``comm._run_prepared``, which prepares (and caches) the plan,
    as do calls with a timeout or with mpicoll requests outstanding, and calls
    in debug mode (where ``call_key`` gives no key).

    This is the definition of :func:`run`, which is the same function compiled
    (``run`` in ``mpicoll/_callkey.c``) when that was built.
    """
    state = comm.__dict__
    tags = state.get("_tags") or comm._tag_state()
    tag = tags[1] = tags[1] % tags[0] + 1      # comm._next_tag(BLOCKING), inline
    plans = state.get("_plans")
    if plans is not None and not nonblocking.ACTIVE and comm.timeout is None:
        entry = plans.data.get(call_key(method, args, algorithm, _VALUE_ARGS.get(method, ())))
        if entry is not None:
            entry.used = True
            entry.run(tag)
            return
    comm._run_prepared(method, algorithm, args, tag)


def _compiled_run() -> Callable[..., None]:
    """The compiled ``run`` bound to this module's tables, or :func:`_run` where the key is not compiled."""
    if call_key is plan_module._call_key:   # mpicoll._callkey is not built, or not used
        return _run
    _callkey = extension("_callkey")
    _callkey.init_run(nonblocking.ACTIVE, _VALUE_ARGS)
    return _callkey.run


#: ``run(comm, method, algorithm, *args)``: what every blocking collective calls (see :func:`_run`)
run = _compiled_run()
