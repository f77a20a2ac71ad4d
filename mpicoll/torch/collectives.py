"""torch's collective methods of the process group, but ``all_reduce`` (which has a fast path of its own).

Each method names the call, plans it (arguments checked, tensors staged: see
:mod:`mpicoll.torch.jobs`) and describes it (the :class:`~mpicoll.torch.checks.Signature`
the ranks agree on in DETAIL mode), and hands both to the group's ``_run``,
which runs or starts it.  The plan is made inside ``_run``, so that in DETAIL
mode a rank whose arguments are rejected tells the others, which raise too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from . import jobs
from .checks import Signature
from .reduceops import reduction
from .tensors import check_tensor
from .work import DoneWork

__all__ = ["Collectives", "one", "signature"]


def one(tensors: Sequence[torch.Tensor], what: str, sparse_ok: bool = False) -> torch.Tensor:
    """The single tensor of a call's tensor list (one device per process: torch's lists hold one)."""
    if len(tensors) != 1:
        raise ValueError(f"mpicoll backend: {what} takes one tensor per process, got {len(tensors)}")
    check_tensor(tensors[0], what, sparse_ok)
    return tensors[0]


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _shapes(tensors: Sequence[torch.Tensor]) -> str:
    return ",".join(f"{_dtype(t)}{list(t.shape)}" for t in tensors)


def signature(name: str, t: torch.Tensor, op: str = "", root: int = -1, shape: bool = True) -> Signature:
    """The signature of a call on tensor ``t`` (its shape left out where it may differ from rank to rank)."""
    return Signature(name, _dtype(t), str(list(t.shape)) if shape else "", op, root)


class Collectives:
    """The collective methods of :class:`~mpicoll.torch.process_group.ProcessGroupMpicoll` (a mixin)."""

    _ctx: jobs.Context
    _run: Callable[..., dist.Work]

    # -- reductions ----------------------------------------------------------------------------------------------

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.AllreduceCoalescedOptions()

        def plan() -> jobs.Planned:
            for i, t in enumerate(tensors):
                check_tensor(t, f"all_reduce_coalesced tensor {i}")
            reds = [reduction(opts.reduceOp, t.dtype) for t in tensors]
            return jobs.allreduce_coalesced(self._ctx, tensors, reds)

        return self._run("all_reduce_coalesced", plan, lambda: Signature("all_reduce_coalesced", _shapes(tensors)),
                         opts, inputs=tensors)

    def reduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceOptions()
        t = one(tensors, "reduce")
        red = reduction(opts.reduceOp, t.dtype)
        return self._run("reduce", lambda: jobs.reduce(self._ctx, t, red, opts.rootRank),
                         lambda: signature("reduce", t, red.name, opts.rootRank), opts, inputs=[t])

    def reduce_scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                       opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceScatterOptions()
        out = one(output_tensors, "reduce_scatter output")
        if len(input_tensors) != 1:
            raise ValueError("mpicoll backend: reduce_scatter takes one input list per process")
        red = reduction(opts.reduceOp, out.dtype)
        return self._run("reduce_scatter", lambda: jobs.reduce_scatter(self._ctx, out, input_tensors[0], red),
                         lambda: signature("reduce_scatter", out, red.name, shape=False), opts,
                         inputs=input_tensors[0])

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor,  # noqa: A002 - torch's name
                              opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceScatterOptions()
        check_tensor(output, "reduce_scatter_tensor output")
        check_tensor(input, "reduce_scatter_tensor input")
        red = reduction(opts.reduceOp, output.dtype)
        return self._run("reduce_scatter_tensor", lambda: jobs.reduce_scatter_single(self._ctx, output, input, red),
                         lambda: signature("reduce_scatter_tensor", output, red.name), opts, inputs=[input])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist.Work:
        opts = opts or dist.ReduceScatterOptions()

        def plan() -> jobs.Planned:
            return jobs.chain([jobs.reduce_scatter_single(self._ctx, o, i, reduction(opts.reduceOp, o.dtype))
                               for o, i in zip(outputs, inputs, strict=True)])

        return self._run("reduce_scatter_tensor_coalesced", plan,
                         lambda: Signature("reduce_scatter_tensor_coalesced", _shapes(outputs)), opts,
                         inputs=inputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # -- data movement ---------------------------------------------------------------------------------------------

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts or dist.BroadcastOptions()
        t = one(tensors, "broadcast")
        return self._run("broadcast", lambda: jobs.broadcast(self._ctx, t, opts.rootRank),
                         lambda: signature("broadcast", t, root=opts.rootRank), opts, inputs=[t])

    def allgather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
                  opts: Any = None) -> dist.Work:
        inp = one(input_tensors, "all_gather input")
        if len(output_tensors) != 1:
            raise ValueError("mpicoll backend: all_gather takes one output list per process")
        return self._run("all_gather", lambda: jobs.allgather(self._ctx, output_tensors[0], inp),
                         lambda: signature("all_gather", inp, shape=False), opts, inputs=[inp])

    def allgather_coalesced(self, output_lists: list[list[torch.Tensor]], input_list: list[torch.Tensor],
                            opts: Any = None) -> dist.Work:
        def plan() -> jobs.Planned:
            for i, t in enumerate(input_list):
                check_tensor(t, f"all_gather_coalesced input {i}")
            return jobs.allgather_coalesced(self._ctx, output_lists, input_list)

        return self._run("all_gather_coalesced", plan,
                         lambda: Signature("all_gather_coalesced", _shapes(input_list)), opts,
                         inputs=input_list)

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor,  # noqa: A002 - torch's name
                          opts: Any = None) -> dist.Work:
        check_tensor(output, "all_gather_into_tensor output")
        check_tensor(input, "all_gather_into_tensor input")
        return self._run("all_gather_into_tensor", lambda: jobs.allgather_single(self._ctx, output, input),
                         lambda: signature("all_gather_into_tensor", input), opts, inputs=[input])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                    opts: Any = None) -> dist.Work:
        def plan() -> jobs.Planned:
            return jobs.chain([jobs.allgather_single(self._ctx, o, i) for o, i in zip(outputs, inputs, strict=True)])

        return self._run("all_gather_into_tensor_coalesced", plan,
                         lambda: Signature("all_gather_into_tensor_coalesced", _shapes(inputs)), opts,
                         inputs=inputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor],
               opts: Any = None) -> dist.Work:
        opts = opts or dist.GatherOptions()
        inp = one(input_tensors, "gather input")
        outs = output_tensors[0] if output_tensors else []
        return self._run("gather", lambda: jobs.gather(self._ctx, outs, inp, opts.rootRank),
                         lambda: signature("gather", inp, root=opts.rootRank), opts, inputs=[inp])

    def scatter(self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]],
                opts: Any = None) -> dist.Work:
        opts = opts or dist.ScatterOptions()
        out = one(output_tensors, "scatter output")
        inputs = input_tensors[0] if input_tensors else []
        return self._run("scatter", lambda: jobs.scatter(self._ctx, out, inputs, opts.rootRank),
                         lambda: signature("scatter", out, root=opts.rootRank), opts, inputs=inputs)

    def alltoall(self, output_tensors: list[torch.Tensor], input_tensors: list[torch.Tensor],
                 opts: Any = None) -> dist.Work:
        def describe() -> Signature:
            return Signature("all_to_all", _dtype(input_tensors[0]) if input_tensors else "",
                             sends=tuple(jobs.nbytes(t) for t in input_tensors),
                             recvs=tuple(jobs.nbytes(t) for t in output_tensors))

        return self._run("all_to_all", lambda: jobs.alltoall(self._ctx, output_tensors, input_tensors), describe,
                         opts, inputs=input_tensors)

    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor,  # noqa: A002 - torch's name
                          output_split_sizes: list[int], input_split_sizes: list[int],
                          opts: Any = None) -> dist.Work:
        check_tensor(output, "all_to_all_single output")
        check_tensor(input, "all_to_all_single input")

        def describe() -> Signature:
            sends, recvs = jobs.alltoall_single_counts(self._ctx, output, input, output_split_sizes,
                                                       input_split_sizes)
            return Signature("all_to_all_single", _dtype(input), sends=tuple(sends), recvs=tuple(recvs))

        return self._run("all_to_all_single",
                         lambda: jobs.alltoall_single(self._ctx, output, input, output_split_sizes, input_split_sizes),
                         describe, opts, inputs=[input])

    alltoall_base = all_to_all_single

    def barrier(self, opts: Any = None) -> dist.Work:
        return self._run("barrier", lambda: jobs.barrier(self._ctx), lambda: Signature("barrier"), opts)

    # -- coalescing: torch's context manager; every call above already ran on its own ------------------------

    def _start_coalescing(self, device: torch.device) -> None:
        pass

    def _end_coalescing(self, device: torch.device) -> dist.Work:
        return DoneWork("coalesced")
