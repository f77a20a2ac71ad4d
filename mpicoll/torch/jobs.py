"""Each torch collective as a *job*: arguments checked and tensors staged now, the MPI call later.

A function here runs in the caller's thread: it checks the arguments (so a bad
call raises at once, on every rank that makes it), stages tensors NumPy cannot
share (see :mod:`mpicoll.torch.tensors`) and returns ``(outputs, job)``; the
executor runs ``job()``, which makes mpicoll's call and copies staged outputs
back.  Data movement goes as bytes; reductions go typed (see
:mod:`mpicoll.torch.reduceops`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from mpi4py import MPI

from .reduceops import Reduction
from .tensors import Staged, bytes_of, check_tensor, stage_in, stage_out, typed_array

Job = Callable[[], None]
Planned = tuple[list[torch.Tensor], Job]


@dataclass
class Context:
    """What a job needs from its process group.

    Attributes
    ----------
    comm : mpicoll.Comm
        The group's communicator for collectives (one thread at a time: see :mod:`mpicoll.torch.executor`).
    rank, size : int
        This process's rank in the group, and the group's size.
    algorithm : callable
        ``algorithm(collective)``: the algorithm to ask mpicoll for (``"auto"`` unless chosen).
    """

    comm: Any
    rank: int
    size: int
    algorithm: Callable[[str], str]


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _displs(counts: Sequence[int]) -> list[int]:
    return [int(x) for x in np.concatenate(([0], np.cumsum(counts[:-1])))] if counts else []


def _check_list(tensors: Sequence[torch.Tensor], size: int, what: str) -> None:
    if len(tensors) != size:
        raise ValueError(f"mpicoll backend: {what} needs one tensor per rank ({size}), got {len(tensors)}")
    for i, t in enumerate(tensors):
        check_tensor(t, f"{what}[{i}]")


def _check_dtypes(tensors: Sequence[torch.Tensor], dtype: torch.dtype, what: str) -> None:
    for i, t in enumerate(tensors):
        if t.dtype != dtype:
            raise TypeError(f"mpicoll backend: {what}[{i}] is {t.dtype}, the input is {dtype}")


def _check_root(ctx: Context, root: int, what: str) -> None:
    if not 0 <= root < ctx.size:
        raise ValueError(f"mpicoll backend: {what} root {root} is not a rank of this group (0..{ctx.size - 1})")


def _scatter_bytes(flat: torch.Tensor, targets: Sequence[torch.Tensor]) -> None:
    """Copy consecutive byte ranges of ``flat`` into ``targets`` (each with its own dtype and shape)."""
    offset = 0
    for t in targets:
        n = nbytes(t)
        if n:
            with torch.no_grad():
                t.copy_(flat[offset:offset + n].view(t.dtype).view(t.shape))
        offset += n


def _pack_bytes(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The tensors' bytes, one after another, in a new uint8 tensor."""
    parts = [t.detach().reshape(-1).view(torch.uint8) for t in tensors if t.numel()]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.uint8)


def _premul(buffer: torch.Tensor, red: Reduction) -> None:
    if red.premul is not None:
        buffer.mul_(red.premul)


def _average(buffer: torch.Tensor, red: Reduction, size: int) -> None:
    if red.average:
        buffer.div_(size)


def _scaled_input(t: torch.Tensor, red: Reduction) -> torch.Tensor:
    """A contiguous input for a reduction, multiplied by PREMUL_SUM's factor (a copy then)."""
    return stage_in(t) if red.premul is None else t.detach() * red.premul


# -- reductions -----------------------------------------------------------------------------------------------


def allreduce(ctx: Context, t: torch.Tensor, red: Reduction) -> Planned:
    staged = stage_out(t)

    def job() -> None:
        buf = staged.buffer
        _premul(buf, red)
        ctx.comm.Allreduce(MPI.IN_PLACE, typed_array(buf), op=red.op, algorithm=ctx.algorithm("allreduce"))
        _average(buf, red, ctx.size)
        staged.finish()

    return [t], job


def allreduce_coalesced(ctx: Context, tensors: Sequence[torch.Tensor], reds: Sequence[Reduction]) -> Planned:
    """One all-reduce per dtype over the tensors flattened together, then copied back."""
    groups: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)

    def job() -> None:
        for indices in groups.values():
            members = [tensors[i] for i in indices]
            flat = torch.cat([m.detach().reshape(-1) for m in members])
            red = reds[indices[0]]
            _premul(flat, red)
            ctx.comm.Allreduce(MPI.IN_PLACE, typed_array(flat), op=red.op, algorithm=ctx.algorithm("allreduce"))
            _average(flat, red, ctx.size)
            offset = 0
            for m in members:
                with torch.no_grad():
                    m.copy_(flat[offset:offset + m.numel()].view(m.shape))
                offset += m.numel()

    return list(tensors), job


def reduce(ctx: Context, t: torch.Tensor, red: Reduction, root: int) -> Planned:
    _check_root(ctx, root, "reduce")
    if ctx.rank == root:
        staged = stage_out(t)

        def job() -> None:
            _premul(staged.buffer, red)
            ctx.comm.Reduce(MPI.IN_PLACE, typed_array(staged.buffer), op=red.op, root=root,
                            algorithm=ctx.algorithm("reduce"))
            _average(staged.buffer, red, ctx.size)
            staged.finish()
    else:
        def job() -> None:
            ctx.comm.Reduce(typed_array(_scaled_input(t, red)), None, op=red.op, root=root,
                            algorithm=ctx.algorithm("reduce"))
    return [t], job


def reduce_scatter(ctx: Context, out: torch.Tensor, inputs: Sequence[torch.Tensor], red: Reduction) -> Planned:
    """The list form: rank i gets the reduction of every rank's ``inputs[i]`` (sizes may differ)."""
    _check_list(inputs, ctx.size, "reduce_scatter input list")
    _check_dtypes(inputs, out.dtype, "reduce_scatter input list")
    counts = [i.numel() for i in inputs]
    if counts[ctx.rank] != out.numel():
        raise ValueError(f"mpicoll backend: reduce_scatter output has {out.numel()} elements, "
                         f"input {ctx.rank} has {counts[ctx.rank]}")
    staged = stage_out(out, keep=False)

    def job() -> None:
        send = torch.cat([i.detach().reshape(-1) for i in inputs]) if inputs else out.new_empty(0)
        _premul(send, red)
        recv = typed_array(staged.buffer)
        if len(set(counts)) <= 1:
            ctx.comm.Reduce_scatter_block(typed_array(send), recv, op=red.op,
                                          algorithm=ctx.algorithm("reduce_scatter_block"))
        else:
            ctx.comm.Reduce_scatter(typed_array(send), recv, counts, op=red.op,
                                    algorithm=ctx.algorithm("reduce_scatter"))
        _average(staged.buffer, red, ctx.size)
        staged.finish()

    return [out], job


def reduce_scatter_single(ctx: Context, out: torch.Tensor, inp: torch.Tensor, red: Reduction) -> Planned:
    """``reduce_scatter_tensor``: the input holds ``size`` blocks of the output's size, in rank order."""
    if inp.dtype != out.dtype:
        raise TypeError(f"mpicoll backend: reduce_scatter_tensor input is {inp.dtype}, output {out.dtype}")
    if inp.numel() != ctx.size * out.numel():
        raise ValueError(f"mpicoll backend: reduce_scatter_tensor input has {inp.numel()} elements, "
                         f"needs group size x output = {ctx.size} x {out.numel()}")
    staged = stage_out(out, keep=False)
    # an output inside the input (in-place use) must not be written while the input is read
    shared = _overlap(inp, out)

    def job() -> None:
        send = inp.detach().clone() if shared and red.premul is None else _scaled_input(inp, red)
        ctx.comm.Reduce_scatter_block(typed_array(send), typed_array(staged.buffer), op=red.op,
                                      algorithm=ctx.algorithm("reduce_scatter_block"))
        _average(staged.buffer, red, ctx.size)
        staged.finish()

    return [out], job


# -- data movement --------------------------------------------------------------------------------------------


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors may share memory (the same storage, overlapping byte ranges)."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.untyped_storage().nbytes() and b0 < a0 + a.untyped_storage().nbytes()


def broadcast(ctx: Context, t: torch.Tensor, root: int) -> Planned:
    _check_root(ctx, root, "broadcast")
    staged = stage_out(t, keep=ctx.rank == root)

    def job() -> None:
        ctx.comm.Bcast(bytes_of(staged.buffer), root=root, algorithm=ctx.algorithm("bcast"))
        if ctx.rank != root:
            staged.finish()

    return [t], job


def allgather(ctx: Context, outs: Sequence[torch.Tensor], inp: torch.Tensor) -> Planned:
    """The list form: ``outs[j]`` gets rank j's input (sizes may differ from rank to rank)."""
    _check_list(outs, ctx.size, "all_gather output list")
    _check_dtypes(outs, inp.dtype, "all_gather output list")
    counts = [nbytes(o) for o in outs]
    if counts[ctx.rank] != nbytes(inp):
        raise ValueError(f"mpicoll backend: all_gather output {ctx.rank} has {outs[ctx.rank].numel()} elements, "
                         f"the input {inp.numel()}")
    send = stage_in(inp)

    def job() -> None:
        flat = torch.empty(sum(counts), dtype=torch.uint8)
        if len(set(counts)) <= 1:
            ctx.comm.Allgather(bytes_of(send), bytes_of(flat), algorithm=ctx.algorithm("allgather"))
        else:
            ctx.comm.Allgatherv(bytes_of(send), [bytes_of(flat), counts, _displs(counts), MPI.BYTE],
                                algorithm=ctx.algorithm("allgatherv"))
        _scatter_bytes(flat, outs)

    return list(outs), job


def allgather_coalesced(ctx: Context, out_lists: Sequence[Sequence[torch.Tensor]],
                        inputs: Sequence[torch.Tensor]) -> Planned:
    """``out_lists[j][i]`` gets rank j's ``inputs[i]``: one all-gather of every input packed together."""
    if len(out_lists) != ctx.size:
        raise ValueError(f"mpicoll backend: all_gather_coalesced needs {ctx.size} output lists, got {len(out_lists)}")
    counts = [sum(nbytes(o) for o in outs) for outs in out_lists]
    if counts[ctx.rank] != sum(nbytes(i) for i in inputs):
        raise ValueError("mpicoll backend: all_gather_coalesced outputs do not match the inputs' sizes")

    def job() -> None:
        send, flat = _pack_bytes(inputs), torch.empty(sum(counts), dtype=torch.uint8)
        ctx.comm.Allgatherv(bytes_of(send), [bytes_of(flat), counts, _displs(counts), MPI.BYTE],
                            algorithm=ctx.algorithm("allgatherv"))
        _scatter_bytes(flat, [o for outs in out_lists for o in outs])

    return [o for outs in out_lists for o in outs], job


def allgather_single(ctx: Context, out: torch.Tensor, inp: torch.Tensor) -> Planned:
    """``all_gather_into_tensor``: rank j's input goes to block j of the output (any shape of that size)."""
    if inp.dtype != out.dtype:
        raise TypeError(f"mpicoll backend: all_gather_into_tensor input is {inp.dtype}, output {out.dtype}")
    if out.numel() != ctx.size * inp.numel():
        raise ValueError(f"mpicoll backend: all_gather_into_tensor output has {out.numel()} elements, "
                         f"needs group size x input = {ctx.size} x {inp.numel()}")
    staged = stage_out(out, keep=False)
    n = nbytes(inp)
    # FSDP passes the input as the output's own block: MPI_IN_PLACE then; any other overlap is copied first
    in_place = (staged.buffer is out and inp.is_contiguous() and n > 0
                and inp.data_ptr() == out.data_ptr() + ctx.rank * n)
    copy_first = not in_place and _overlap(inp, out)

    def job() -> None:
        recv = bytes_of(staged.buffer)
        if in_place:
            send = MPI.IN_PLACE
        else:
            send = bytes_of(inp.detach().clone() if copy_first else stage_in(inp))
        ctx.comm.Allgather(send, recv, algorithm=ctx.algorithm("allgather"))
        staged.finish()

    return [out], job


def gather(ctx: Context, outs: Sequence[torch.Tensor], inp: torch.Tensor, root: int) -> Planned:
    """Rank ``root``'s ``outs[j]`` gets rank j's input; Gatherv, so that only the root needs the sizes."""
    _check_root(ctx, root, "gather")
    send = stage_in(inp)
    if ctx.rank != root:
        if outs:
            raise ValueError("mpicoll backend: gather takes an output list on the root only")
        return [], lambda: ctx.comm.Gatherv(bytes_of(send), None, root=root, algorithm=ctx.algorithm("gatherv"))
    _check_list(outs, ctx.size, "gather output list")
    _check_dtypes(outs, inp.dtype, "gather output list")
    counts = [nbytes(o) for o in outs]
    if counts[root] != nbytes(inp):
        raise ValueError("mpicoll backend: gather output on the root does not match its input's size")

    def job() -> None:
        flat = torch.empty(sum(counts), dtype=torch.uint8)
        ctx.comm.Gatherv(bytes_of(send), [bytes_of(flat), counts, _displs(counts), MPI.BYTE], root=root,
                         algorithm=ctx.algorithm("gatherv"))
        _scatter_bytes(flat, outs)

    return list(outs), job


def scatter(ctx: Context, out: torch.Tensor, inputs: Sequence[torch.Tensor], root: int) -> Planned:
    """Rank j's output gets ``inputs[j]`` of rank ``root``; Scatterv, so that only the root needs the sizes."""
    _check_root(ctx, root, "scatter")
    staged = stage_out(out, keep=False)
    if ctx.rank != root:
        if inputs:
            raise ValueError("mpicoll backend: scatter takes an input list on the root only")

        def job() -> None:
            ctx.comm.Scatterv(None, bytes_of(staged.buffer), root=root, algorithm=ctx.algorithm("scatterv"))
            staged.finish()

        return [out], job
    _check_list(inputs, ctx.size, "scatter input list")
    _check_dtypes(inputs, out.dtype, "scatter input list")
    counts = [nbytes(i) for i in inputs]
    if counts[root] != nbytes(out):
        raise ValueError("mpicoll backend: scatter input on the root does not match its output's size")

    def job() -> None:
        send = _pack_bytes(inputs)
        ctx.comm.Scatterv([bytes_of(send), counts, _displs(counts), MPI.BYTE], bytes_of(staged.buffer),
                          root=root, algorithm=ctx.algorithm("scatterv"))
        staged.finish()

    return [out], job


def alltoall(ctx: Context, outs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> Planned:
    """The list form: ``outs[j]`` gets rank j's ``inputs[me]``; sizes may differ (Alltoallv)."""
    _check_list(outs, ctx.size, "all_to_all output list")
    _check_list(inputs, ctx.size, "all_to_all input list")
    _check_dtypes(outs, inputs[0].dtype if inputs else outs[0].dtype, "all_to_all output list")
    scounts, rcounts = [nbytes(i) for i in inputs], [nbytes(o) for o in outs]

    def job() -> None:
        send, recv = _pack_bytes(inputs), torch.empty(sum(rcounts), dtype=torch.uint8)
        ctx.comm.Alltoallv([bytes_of(send), scounts, _displs(scounts), MPI.BYTE],
                           [bytes_of(recv), rcounts, _displs(rcounts), MPI.BYTE], algorithm=ctx.algorithm("alltoallv"))
        _scatter_bytes(recv, outs)

    return list(outs), job


def _split_bytes(t: torch.Tensor, splits: Sequence[int], size: int, what: str) -> list[int]:
    """Byte counts of ``t``'s blocks along dim 0: ``splits`` rows each, or equal blocks when empty."""
    rows = t.shape[0] if t.dim() else 1
    row_bytes = nbytes(t) // rows if rows else 0
    if not splits:
        if rows % size:
            raise ValueError(f"mpicoll backend: all_to_all_single {what} has {rows} rows, not a multiple of {size}")
        return [rows // size * row_bytes] * size
    if len(splits) != size or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(f"mpicoll backend: all_to_all_single {what} split sizes {list(splits)} must be {size} "
                         f"non-negative numbers adding up to its {rows} rows")
    return [int(s) * row_bytes for s in splits]


def alltoall_single_counts(ctx: Context, out: torch.Tensor, inp: torch.Tensor, out_splits: Sequence[int],
                           in_splits: Sequence[int]) -> tuple[list[int], list[int]]:
    """The bytes ``all_to_all_single`` sends to and receives from each rank (raises on bad split sizes)."""
    return _split_bytes(inp, in_splits, ctx.size, "input"), _split_bytes(out, out_splits, ctx.size, "output")


def alltoall_single(ctx: Context, out: torch.Tensor, inp: torch.Tensor, out_splits: Sequence[int],
                    in_splits: Sequence[int]) -> Planned:
    """``all_to_all_single``: blocks along dim 0, even or by split sizes (Alltoallv in both cases, so that
    ranks that give splits and ranks that leave them out still make the same call)."""
    if inp.dtype != out.dtype:
        raise TypeError(f"mpicoll backend: all_to_all_single input is {inp.dtype}, output {out.dtype}")
    scounts, rcounts = alltoall_single_counts(ctx, out, inp, out_splits, in_splits)
    staged = stage_out(out, keep=False)
    send = inp.detach().clone() if _overlap(inp, out) else stage_in(inp)

    def job() -> None:
        ctx.comm.Alltoallv([bytes_of(send), scounts, _displs(scounts), MPI.BYTE],
                           [bytes_of(staged.buffer), rcounts, _displs(rcounts), MPI.BYTE],
                           algorithm=ctx.algorithm("alltoallv"))
        staged.finish()

    return [out], job


def barrier(ctx: Context) -> Planned:
    return [], lambda: ctx.comm.Barrier(algorithm=ctx.algorithm("barrier"))


__all__ = ["Context", "Staged", "allgather", "allgather_coalesced", "allgather_single", "allreduce",
           "allreduce_coalesced", "alltoall", "alltoall_single", "barrier", "broadcast", "gather", "reduce",
           "reduce_scatter", "reduce_scatter_single", "scatter"]
