"""``ProcessGroupMpicoll``: torch.distributed's process group interface on mpicoll's collectives.

torch 2.13 builds a Python backend as a subclass of ``dist.ProcessGroup``
(a ``dist.Backend`` cannot be made from Python there), and torch's Python API,
DDP's reducer and the object collectives call its methods.  Each collective
method checks its arguments and stages its tensors in the caller (see
:mod:`mpicoll.torch.jobs`), then hands the MPI call to the group's executor
(:mod:`mpicoll.torch.executor`) and returns a Work (:mod:`mpicoll.torch.work`).
Sends and receives are nonblocking MPI calls made in the caller's thread, on a
communicator of their own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

from . import jobs
from .checks import Signature, agree
from .executor import InlineExecutor, ThreadExecutor
from .reduceops import reduction
from .tensors import Staged, bytes_of, check_tensor, stage_in, stage_out
from .work import CollectiveWork, P2PWork, completed_work

__all__ = ["Options", "ProcessGroupMpicoll"]

BACKEND_NAME = "mpicoll"


@dataclass
class Options:
    """Options of the mpicoll backend (``init_process_group("mpicoll", pg_options=Options(...))``).

    Attributes
    ----------
    algorithms : dict of str to str
        mpicoll's algorithm per collective, e.g. ``{"allreduce": "ring", "bcast": "binomial"}``
        (names from :func:`mpicoll.algorithms`); the others take ``"auto"`` (where ``MPICOLL_ALGO`` applies).
    progress_thread : bool, optional
        Run the collectives on a thread of the process group (True), or in the caller (False: no overlap,
        no hand-over between threads).  None: ``MPICOLL_TORCH_THREAD`` (``0`` or ``1``), else True.
    reproducible : bool, default False
        Sums of floats (all_reduce, reduce, reduce_scatter with SUM or AVG) with ``reproducible=True``:
        the same bits for every algorithm, world size and placement (``docs/reproducible.md``).
    """

    algorithms: dict[str, str] = field(default_factory=dict)
    progress_thread: bool | None = None
    reproducible: bool = False


def _threaded(options: Options) -> bool:
    """Whether to use a progress thread: the option, else MPICOLL_TORCH_THREAD, and only with THREAD_MULTIPLE."""
    wanted = options.progress_thread
    if wanted is None:
        wanted = os.environ.get("MPICOLL_TORCH_THREAD", "1").strip() not in ("0", "false", "no", "off")
    if wanted and MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        # sends run in the caller while the thread runs collectives: that needs MPI_THREAD_MULTIPLE
        import warnings  # noqa: PLC0415

        warnings.warn("mpicoll backend: MPI does not provide MPI_THREAD_MULTIPLE; collectives run in the "
                      "caller's thread (no overlap with computation)", RuntimeWarning, stacklevel=3)
        return False
    return wanted


def _log_level() -> int:
    try:
        return int(os.environ.get("MPICOLL_DEBUG", "0") or 0)
    except ValueError:
        return 0


def _one(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
    """The single tensor of a call's tensor list (one device per process: torch's lists hold one)."""
    if len(tensors) != 1:
        raise ValueError(f"mpicoll backend: {what} takes one tensor per process, got {len(tensors)}")
    check_tensor(tensors[0], what)
    return tensors[0]


def _shape(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"


class ProcessGroupMpicoll(dist.ProcessGroup):
    """A torch process group whose collectives are mpicoll's, over an MPI communicator.

    Made by torch through ``dist.init_process_group("mpicoll")`` and ``dist.new_group``
    (see :mod:`mpicoll.torch`), not directly.

    Parameters
    ----------
    comm : MPI.Intracomm
        The group's processes, in group rank order.
    timeout : datetime.timedelta
        How long a ``wait()`` waits by default before raising ``DistBackendError``.
    options : Options, optional
        Algorithms and the progress thread.
    """

    def __init__(self, comm: MPI.Intracomm, timeout: timedelta, options: Options | None = None) -> None:
        super().__init__(comm.Get_rank(), comm.Get_size())
        import mpicoll  # noqa: PLC0415
        from mpicoll.comm import reproducible  # noqa: PLC0415

        self.options = options or Options()
        self._timeout = timeout.total_seconds()
        # torch's default (30 minutes) leaves mpicoll's watchdog off (it costs on every call); MPICOLL_TIMEOUT
        # or a timeout given to init_process_group/new_group turn it on, so that a stuck call raises
        watchdog = None if timeout == dist.default_pg_timeout else self._timeout
        # the collectives' communicator: one thread at a time uses it (the executor's lock sees to that)
        self._coll = mpicoll.Comm(comm.Dup(), timeout=watchdog)
        self._p2p = comm.Dup()  # sends and receives, in the caller's thread
        self._executor = (ThreadExecutor(f"mpicoll-torch-{id(self):x}") if _threaded(self.options)
                          else InlineExecutor())
        summing = reproducible.always(self._coll) if self.options.reproducible else self._coll
        self._ctx = jobs.Context(summing, self.rank(), self.size(), self._algorithm)
        self._detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"
        self._log = _log_level() >= 2
        self._tag_ub = self._p2p.Get_attr(MPI.TAG_UB) or 32767

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

    def _submit(self, name: str, planned: jobs.Planned, signature: Signature | None = None,
                opts: Any = None) -> CollectiveWork:
        """Hand a planned call to the executor; ``opts.asyncOp`` False (the caller waits at once): run it here."""
        outputs, job = planned
        blocking = opts is not None and not getattr(opts, "asyncOp", True)
        if self._log:
            where = "on the group's thread" if self._executor.threaded and not blocking else "in the caller"
            sys.stderr.write(f"mpicoll.torch rank {self.rank()}/{self.size()}: "
                             f"{signature.describe() if signature else name} ({where})\n")
        if self._detail and signature is not None:
            run, check = job, signature

            def job() -> None:  # noqa: F811 - the same job, after the ranks agreed on the call
                agree(self._coll, check)
                run()

        work = CollectiveWork(name, outputs, self._timeout)
        return self._executor.submit(work, job, blocking)

    # -- reductions ----------------------------------------------------------------------------------------------

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.AllreduceOptions()
        t = _one(tensors, "all_reduce")
        red = reduction(opts.reduceOp, t.dtype)
        return self._submit("all_reduce", jobs.allreduce(self._ctx, t, red),
                            Signature("all_reduce", f"{_shape(t)} {red.name}"), opts=opts)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.AllreduceCoalescedOptions()
        for i, t in enumerate(tensors):
            check_tensor(t, f"all_reduce_coalesced tensor {i}")
        reds = [reduction(opts.reduceOp, t.dtype) for t in tensors]
        return self._submit("all_reduce_coalesced", jobs.allreduce_coalesced(self._ctx, tensors, reds),
                            Signature("all_reduce_coalesced", ",".join(_shape(t) for t in tensors)), opts=opts)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceOptions()
        t = _one(tensors, "reduce")
        red = reduction(opts.reduceOp, t.dtype)
        return self._submit("reduce", jobs.reduce(self._ctx, t, red, opts.rootRank),
                            Signature("reduce", f"{_shape(t)} {red.name}", opts.rootRank), opts=opts)

    def reduce_scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                       opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceScatterOptions()
        out = _one(output_tensors, "reduce_scatter output")
        if len(input_tensors) != 1:
            raise ValueError("mpicoll backend: reduce_scatter takes one input list per process")
        red = reduction(opts.reduceOp, out.dtype)
        return self._submit("reduce_scatter", jobs.reduce_scatter(self._ctx, out, input_tensors[0], red),
                            Signature("reduce_scatter", f"{str(out.dtype)} {red.name}"), opts=opts)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,  # noqa: A002 - torch's name
                              opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceScatterOptions()
        check_tensor(output, "reduce_scatter_tensor output")
        check_tensor(input, "reduce_scatter_tensor input")
        red = reduction(opts.reduceOp, output.dtype)
        return self._submit("reduce_scatter_tensor", jobs.reduce_scatter_single(self._ctx, output, input, red),
                            Signature("reduce_scatter_tensor", f"{_shape(output)} {red.name}"), opts=opts)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceScatterOptions()
        planned = [jobs.reduce_scatter_single(self._ctx, o, i, reduction(opts.reduceOp, o.dtype))
                   for o, i in zip(outputs, inputs, strict=True)]
        return self._submit("reduce_scatter_tensor_coalesced", _chain(planned),
                            Signature("reduce_scatter_tensor_coalesced", ",".join(_shape(o) for o in outputs)),
                            opts=opts)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # -- data movement ---------------------------------------------------------------------------------------------

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.BroadcastOptions()
        t = _one(tensors, "broadcast")
        return self._submit("broadcast", jobs.broadcast(self._ctx, t, opts.rootRank),
                            Signature("broadcast", _shape(t), opts.rootRank), opts=opts)

    def allgather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
                  opts: Any = None) -> dist.Work:
        inp = _one(input_tensors, "all_gather input")
        if len(output_tensors) != 1:
            raise ValueError("mpicoll backend: all_gather takes one output list per process")
        return self._submit("all_gather", jobs.allgather(self._ctx, output_tensors[0], inp),
                            Signature("all_gather", str(inp.dtype)), opts=opts)

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]], input_list: list[torch.Tensor],
                            opts: Any = None) -> dist.Work:
        for i, t in enumerate(input_list):
            check_tensor(t, f"all_gather_coalesced input {i}")
        return self._submit("all_gather_coalesced", jobs.allgather_coalesced(self._ctx, output_lists, input_list),
                            Signature("all_gather_coalesced", ",".join(_shape(t) for t in input_list)), opts=opts)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor,  # noqa: A002 - torch's name
                          opts: Any = None) -> dist.Work:
        check_tensor(output, "all_gather_into_tensor output")
        check_tensor(input, "all_gather_into_tensor input")
        return self._submit("all_gather_into_tensor", jobs.allgather_single(self._ctx, output, input),
                            Signature("all_gather_into_tensor", _shape(input)), opts=opts)

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                    opts: Any = None) -> dist.Work:
        planned = [jobs.allgather_single(self._ctx, o, i) for o, i in zip(outputs, inputs, strict=True)]
        return self._submit("all_gather_into_tensor_coalesced", _chain(planned),
                            Signature("all_gather_into_tensor_coalesced", ",".join(_shape(i) for i in inputs)),
                            opts=opts)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
               opts: Any = None) -> dist.Work:
        opts = opts or dist.GatherOptions()
        inp = _one(input_tensors, "gather input")
        outs = output_tensors[0] if output_tensors else []
        return self._submit("gather", jobs.gather(self._ctx, outs, inp, opts.rootRank),
                            Signature("gather", _shape(inp), opts.rootRank), opts=opts)

    def scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                opts: Any = None) -> dist.Work:
        opts = opts or dist.ScatterOptions()
        out = _one(output_tensors, "scatter output")
        inputs = input_tensors[0] if input_tensors else []
        return self._submit("scatter", jobs.scatter(self._ctx, out, inputs, opts.rootRank),
                            Signature("scatter", _shape(out), opts.rootRank), opts=opts)

    def alltoall(self, output_tensors: list[torch.Tensor], input_tensors: list[torch.Tensor],
                 opts: Any = None) -> dist.Work:
        planned = jobs.alltoall(self._ctx, output_tensors, input_tensors)
        signature = Signature("all_to_all", str(input_tensors[0].dtype) if input_tensors else "",
                              sends=tuple(jobs.nbytes(t) for t in input_tensors),
                              recvs=tuple(jobs.nbytes(t) for t in output_tensors))
        return self._submit("all_to_all", planned, signature, opts=opts)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,  # noqa: A002 - torch's name
                          output_split_sizes: list[int], input_split_sizes: list[int],
                          opts: Any = None) -> dist.Work:
        check_tensor(output, "all_to_all_single output")
        check_tensor(input, "all_to_all_single input")
        planned = jobs.alltoall_single(self._ctx, output, input, output_split_sizes, input_split_sizes)
        sends, recvs = jobs.alltoall_single_counts(self._ctx, output, input, output_split_sizes, input_split_sizes)
        signature = Signature("all_to_all_single", str(input.dtype), sends=tuple(sends), recvs=tuple(recvs))
        return self._submit("all_to_all_single", planned, signature, opts=opts)

    alltoall_base = all_to_all_single

    def barrier(self, opts: Any = None) -> dist.Work:
        return self._submit("barrier", jobs.barrier(self._ctx), Signature("barrier", ""), opts=opts)

    # -- coalescing: torch's context manager; every call above already ran on its own ------------------------

    def _start_coalescing(self, device: torch.device) -> None:
        pass

    def _end_coalescing(self, device: torch.device) -> dist.Work:
        return completed_work("coalesced")

    # -- point to point -------------------------------------------------------------------------------------------

    def _check_peer(self, peer: int, tag: int, what: str) -> None:
        if not 0 <= peer < self.size():
            raise ValueError(f"mpicoll backend: {what} peer {peer} is not a rank of this group (0..{self.size() - 1})")
        if not 0 <= tag <= self._tag_ub:
            raise ValueError(f"mpicoll backend: {what} tag {tag} is outside MPI's 0..{self._tag_ub}")

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> dist.Work:
        t = _one(tensors, "send")
        self._check_peer(dst, tag, "send")
        buf = stage_in(t)
        request = self._p2p.Isend(bytes_of(buf), dest=dst, tag=tag)
        # the staged copy must live until the send completes: the finish callback holds it
        return P2PWork("send", [request], [t], self._timeout, finish=lambda: buf)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> dist.Work:
        t = _one(tensors, "recv")
        self._check_peer(src, tag, "recv")
        return self._irecv("recv", t, src, tag)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> dist.Work:
        t = _one(tensors, "recv")
        self._check_peer(0, tag, "recv")
        return self._irecv("recv_anysource", t, MPI.ANY_SOURCE, tag)

    def _irecv(self, name: str, t: torch.Tensor, source: int, tag: int) -> P2PWork:
        staged: Staged = stage_out(t, keep=False)
        request = self._p2p.Irecv(bytes_of(staged.buffer), source=source, tag=tag)
        return P2PWork(name, [request], [t], self._timeout, finish=staged.finish)

    # -- life cycle -------------------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Finish the queued calls, stop the thread, free the communicators."""
        self._executor.shutdown()
        for comm in (self._coll, self._p2p):
            if comm != MPI.COMM_NULL and not MPI.Is_finalized():
                comm.Free()

    def abort(self) -> None:
        """Abort every process of the job (MPI cannot abort one group alone)."""
        self._p2p.Abort(1)


def _chain(planned: Sequence[jobs.Planned]) -> jobs.Planned:
    """Several planned calls as one: outputs together, jobs one after the other."""
    outputs = [t for outs, _ in planned for t in outs]
    steps = [job for _, job in planned]

    def job() -> None:
        for step in steps:
            step()

    return outputs, job
