"""``ProcessGroupMpicoll``: torch.distributed's process group interface on mpicoll's collectives.

torch 2.13 builds a Python backend as a subclass of ``dist.ProcessGroup``
(a ``dist.Backend`` cannot be made from Python there), and torch's Python API,
DDP's reducer and the object collectives call its methods.  Each collective
method checks its arguments and plans the call in the caller (see
:mod:`mpicoll.torch.jobs`), then either runs mpicoll's blocking calls (a
blocking torch call: ``opts.asyncOp`` False) and returns a completed Work, or
starts them as mpicoll requests (``Iallreduce`` ...), which mpicoll's progress
thread advances while the caller goes on, and returns a Work that wraps them
(:mod:`mpicoll.torch.work`).  Sends and receives are MPI's nonblocking calls,
on a communicator of their own.  Every call shows in torch's profiler as
``mpicoll:<call>``, an event from the call's start until it completes
(:mod:`mpicoll.torch.events`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

from mpicoll import config

from . import collectives, jobs, sparse
from .checks import Signature, agree
from .events import Span, span
from .monitored import MonitoredBarrier
from .reduceops import reduction
from .tensors import ArrayCache, Staged, bytes_of, stage_in, stage_out
from .work import DoneWork, RequestWork, torch_error, torch_errors

__all__ = ["BACKEND_NAME", "Options", "ProcessGroupMpicoll"]

BACKEND_NAME = "mpicoll"
_IN_PLACE = MPI.IN_PLACE


@dataclass
class Options:
    """Options of the mpicoll backend (``init_process_group("mpicoll", pg_options=Options(...))``).

    Attributes
    ----------
    algorithms : dict of str to str
        mpicoll's algorithm per collective, e.g. ``{"allreduce": "ring", "bcast": "binomial"}``
        (names from :func:`mpicoll.algorithms`); the others take ``"auto"`` (where ``MPICOLL_ALGO`` applies).
    progress_thread : bool, optional
        Asynchronous calls (``async_op=True``, DDP's buckets) are mpicoll requests advanced by mpicoll's
        progress thread while the caller goes on (True), or run to completion in the caller (False: no
        overlap).  None: ``MPICOLL_TORCH_THREAD``, else True.
    reproducible : bool, default False
        Sums of floats (all_reduce, reduce, reduce_scatter with SUM or AVG) with ``reproducible=True``:
        the same bits for every algorithm, world size and placement (``docs/reproducible.md``).  Such calls
        are mpicoll's reproducible requests (``Iallreduce(..., reproducible=True)`` ...), asynchronous as any.
    """

    algorithms: dict[str, str] = field(default_factory=dict)
    progress_thread: bool | None = None
    reproducible: bool = False


def _as_requests(options: Options) -> bool:
    """Whether asynchronous calls are requests: the option, else MPICOLL_TORCH_THREAD, and only with THREAD_MULTIPLE."""
    wanted = options.progress_thread
    if wanted is None:
        wanted = config.current().torch_thread is not False
    if wanted and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        # requests advance on mpicoll's progress thread and futures are completed on another: both need it
        import warnings  # noqa: PLC0415

        warnings.warn("mpicoll backend: MPI does not provide MPI_THREAD_MULTIPLE; asynchronous calls run in the "
                      "caller's thread (no overlap with computation)", RuntimeWarning, stacklevel=3)
        return False
    return wanted


def _blocking(opts: Any) -> bool:
    """Whether torch waits at once (``opts.asyncOp`` False); a call without options is asynchronous."""
    return opts is not None and not opts.asyncOp


class ProcessGroupMpicoll(collectives.Collectives, dist.ProcessGroup):
    """A torch process group whose collectives are mpicoll's, over an MPI communicator.

    Made by torch through ``dist.init_process_group("mpicoll")`` and ``dist.new_group``
    (see :mod:`mpicoll.torch`), not directly.

    Parameters
    ----------
    comm : MPI.Intracomm
        The group's processes, in group rank order.
    timeout : datetime.timedelta
        The group's timeout: any other than torch's default turns mpicoll's watchdog on (a call that makes
        no progress for that long raises :class:`mpicoll.CollectiveTimeout`).
    options : Options, optional
        Algorithms, and whether asynchronous calls are requests.
    """

    def __init__(self, comm: MPI.Intracomm, timeout: timedelta, options: Options | None = None) -> None:
        super().__init__(comm.Get_rank(), comm.Get_size())
        import mpicoll  # noqa: PLC0415
        from mpicoll.comm import reproducible  # noqa: PLC0415

        settings = config.current()
        self.options = options or Options()
        self._timeout = timeout.total_seconds()
        # torch's default (30 minutes) leaves mpicoll's watchdog off (it costs on every call); MPICOLL_TIMEOUT
        # or a timeout given to init_process_group/new_group turn it on, so that a stuck call raises
        self._watchdog = None if timeout == dist.default_pg_timeout else self._timeout
        self._coll = mpicoll.Comm(comm.Dup(), timeout=self._watchdog)   # collectives
        self._p2p = comm.Dup()                                           # sends, receives, DETAIL's agreement
        self._monitor = MonitoredBarrier(comm.Dup())
        self._requests = _as_requests(self.options)
        self._ctx = jobs.Context(self.rank(), self.size(), self._algorithm)
        # the communicator the planned calls are started on: Options(reproducible=True) makes its summing calls
        # (their request forms) reproducible
        self._calls = reproducible.always(self._coll) if self.options.reproducible else self._coll
        self._detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"
        self._log = settings.debug >= 2
        self._tag_ub = self._p2p.Get_attr(MPI.TAG_UB) or 32767
        self._arrays = ArrayCache()
        # all_reduce's fast path: a plain tensor, reduced by the op alone, no check, no log
        self._fast = not (self._detail or self._log or self.options.reproducible)
        self._done = DoneWork("done")   # what every blocking call returns (see _completed)

    # -- identity ---------------------------------------------------------------------------------------------

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return BACKEND_NAME

    # torch names every group; the C++ base keeps names in its backends, and this group registers none
    def setGroupName(self, name: str) -> None:  # noqa: N802 - torch's name
        self._group_name = name

    def getGroupName(self) -> str:  # noqa: N802 - torch's name
        return getattr(self, "_group_name", "")

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802 - torch's name
        self._group_desc = desc

    def getGroupDesc(self) -> str:  # noqa: N802 - torch's name
        return getattr(self, "_group_desc", "")

    @property
    def _device_types(self) -> list[torch.device]:
        # torch picks the device of object collectives from this; the group has no C++ backend registered
        return [torch.device("cpu")]

    @property
    def comm(self) -> Any:
        """The ``mpicoll.Comm`` the collectives run on (for inspection: a call on it would race the group's)."""
        return self._coll

    def set_algorithm(self, collective: str, algorithm: str) -> None:
        """Use ``algorithm`` for ``collective`` (mpicoll names: ``"allreduce"``, ``"bcast"``, ...) from now on."""
        self.options.algorithms[collective] = algorithm

    def _algorithm(self, collective: str) -> str:
        return self.options.algorithms.get(collective, "auto")

    # -- the path every collective takes ------------------------------------------------------------------------

    def _run(self, name: str, plan: Callable[[], jobs.Planned], describe: Callable[[], Signature],
             opts: Any = None, inputs: Sequence[torch.Tensor] = ()) -> dist.Work:
        """Plan a call (the ranks agree on it first in DETAIL mode), then run or start it.

        ``inputs``: the call's input tensors, for the profiler's event (read only while a profiler records).
        """
        event = span(name, inputs)
        try:
            planned = agree(self._p2p, name, describe, plan, self._watchdog) if self._detail else plan()
            blocking = _blocking(opts) or not self._requests
            if self._log:
                sys.stderr.write(f"mpicoll.torch rank {self.rank()}/{self.size()}: {describe().describe()} "
                                 f"({'blocking' if blocking else 'requests'})\n")
            return self._start(name, planned, blocking, opts, event)
        except BaseException:
            if event is not None:
                event.end()
            raise

    def _start(self, name: str, planned: jobs.Planned, blocking: bool, opts: Any, event: Span | None) -> dist.Work:
        """Start the planned calls as mpicoll requests; wait for them here if ``blocking``.

        Blocking torch calls are requests waited for at once, not mpicoll's blocking calls: a torch call may be
        asynchronous on one rank and blocking on another, and a nonblocking collective never matches a blocking
        one (as in MPI).  ``event`` (the profiler's, or None) ends when the call completes.
        """
        comm = self._calls
        requests = [getattr(comm, jobs.nonblocking_name(method))(*args, **kwargs)
                    for method, args, kwargs in planned.calls]
        if _blocking(opts):
            try:
                for request in requests:
                    request.Wait()    # raises the call's error here
            except torch_errors as exc:
                raise torch_error(exc, name) from exc
            if planned.after is not None:
                planned.after()
            if event is not None:
                event.end()
            return self._completed(name, planned.outputs)
        work = RequestWork(name, planned.outputs, requests, planned.after, event=event)
        if not blocking:
            return work
        try:              # asynchronous, but run here (Options.progress_thread False): the error goes to wait()
            work.wait()
        except BaseException:  # noqa: BLE001, S110 - kept by the Work, raised by its wait()
            pass
        return work

    def _completed(self, name: str, outputs: Sequence[torch.Tensor]) -> DoneWork:
        """The Work of a blocking call that completed: the group's one DoneWork, its name and outputs set."""
        done = self._done
        done.name, done._outputs = name, outputs
        return done

    # -- all_reduce: the call that must cost little -------------------------------------------------------------

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        if opts is None:
            opts = dist.AllreduceOptions()
        if self._fast and len(tensors) == 1:
            t = tensors[0]
            array = self._arrays.plain(t)
            if array is not None:
                red = reduction(opts.reduceOp, t.dtype)
                if red.plain:
                    return self._allreduce_plain(tensors, array, red, opts.asyncOp and self._requests)
        t = collectives.one(tensors, "all_reduce", sparse_ok=True)
        red = reduction(opts.reduceOp, t.dtype)
        if t.layout == torch.sparse_coo:
            return self._sparse_allreduce(t, red)
        return self._run("all_reduce", lambda: jobs.allreduce(self._ctx, t, red),
                         lambda: collectives.signature("all_reduce", t, red.name), opts)

    def _allreduce_plain(self, tensors: list[torch.Tensor], array: Any, red: Any, asynchronous: bool) -> dist.Work:
        """All-reduce a plain tensor (its NumPy view given) by the op alone: one request, nothing after it."""
        algorithm = self.options.algorithms.get("allreduce", "auto")
        event = span("all_reduce", tensors)
        try:
            request = self._coll.Iallreduce(_IN_PLACE, array, op=red.op, algorithm=algorithm)
            if asynchronous:
                return RequestWork("all_reduce", tensors, [request], event=event)
            try:
                request.Wait()   # a request waited for at once, not a blocking Allreduce (see _start)
            except torch_errors as exc:
                raise torch_error(exc, "all_reduce") from exc
        except BaseException:
            if event is not None:
                event.end()
            raise
        if event is not None:
            event.end()
        return self._completed("all_reduce", tensors)

    def _sparse_allreduce(self, t: torch.Tensor, red: Any) -> dist.Work:
        """A sparse COO all-reduce (SUM), run in the caller whatever ``async_op`` says (see :mod:`.sparse`)."""
        def plan() -> jobs.Planned:
            sparse.check(t, red)
            return jobs.Planned([t], [], lambda: sparse.allreduce(self._coll, t, self._algorithm))

        def describe() -> Signature:
            dense = collectives.signature("all_reduce", t, red.name)
            return Signature(dense.name, "sparse " + dense.dtype, dense.shape, dense.op)

        return self._run("all_reduce", plan, describe, _BLOCKING_OPTS, inputs=[t])

    # -- point to point -------------------------------------------------------------------------------------------

    def _check_peer(self, peer: int, tag: int, what: str) -> None:
        if not 0 <= peer < self.size():
            raise ValueError(f"mpicoll backend: {what} peer {peer} is not a rank of this group (0..{self.size() - 1})")
        if not 0 <= tag <= self._tag_ub:
            raise ValueError(f"mpicoll backend: {what} tag {tag} is outside MPI's 0..{self._tag_ub}")

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> dist.Work:
        t = collectives.one(tensors, "send")
        self._check_peer(dst, tag, "send")
        event = span("send", [t])
        buf = stage_in(t)
        request = self._p2p.Isend(bytes_of(buf), dest=dst, tag=tag)
        # the staged copy must live until the send completes: the step after it holds it
        return RequestWork("send", [t], [request], after=lambda: buf, event=event)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> dist.Work:
        t = collectives.one(tensors, "recv")
        self._check_peer(src, tag, "recv")
        return self._irecv("recv", t, src, tag)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> dist.Work:
        t = collectives.one(tensors, "recv")
        self._check_peer(0, tag, "recv")
        return self._irecv("recv_anysource", t, MPI.ANY_SOURCE, tag)

    def _irecv(self, name: str, t: torch.Tensor, source: int, tag: int) -> RequestWork:
        event = span("recvAnySource" if source == MPI.ANY_SOURCE else "recv", [t])   # Gloo's event names
        staged: Staged = stage_out(t, keep=False)
        request = self._p2p.Irecv(bytes_of(staged.buffer), source=source, tag=tag)
        return RequestWork(name, [t], [request], after=staged.finish, status=MPI.Status(), event=event)

    # -- monitored barrier: torch's functional form takes Gloo groups only; this method is the group's ---------

    def monitored_barrier(self, timeout: timedelta | float | None = None, wait_all_ranks: bool = False) -> None:
        """A barrier that names the ranks that did not reach it within ``timeout`` (Gloo's ``monitored_barrier``).

        Parameters
        ----------
        timeout : datetime.timedelta or float, optional
            How long rank 0 waits for the others (seconds if a number); default: the group's timeout.
        wait_all_ranks : bool
            Rank 0 names every missing rank (True), or the first (False).

        Raises
        ------
        torch.distributed.DistBackendError
            On rank 0, naming the ranks that did not arrive in time; on the others, when rank 0 did not answer.
        """
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        event = span("monitored_barrier")
        try:
            self._monitor.run(self._timeout if seconds is None else float(seconds), wait_all_ranks)
        finally:
            if event is not None:
                event.end()

    # -- life cycle -------------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Free the communicators (the group's calls must be complete)."""
        self._monitor.free()
        for comm in (self._coll, self._p2p):
            if comm != MPI.COMM_NULL and not MPI.Is_finalized():
                comm.Free()

    def abort(self) -> None:
        """Abort every process of the job (MPI cannot abort one group alone)."""
        self._p2p.Abort(1)


_BLOCKING_OPTS = dist.AllreduceOptions()
_BLOCKING_OPTS.asyncOp = False
