"""Each torch collective planned: arguments checked, tensors staged, mpicoll's calls and what follows them.

A function here runs in the caller's thread: it checks the arguments (so a bad
call raises at once, on every rank that makes it), stages tensors NumPy cannot
share (see :mod:`mpicoll.torch.tensors`), packs what is sent, and returns a
:class:`Planned` call: the output tensors, mpicoll's calls (by their blocking
names, such as ``"Allreduce"``; an asynchronous torch call starts them as
requests, ``Iallreduce``), and what to do once they completed (divide for AVG,
copy into strided outputs).  The calls of one plan do not depend on one
another, so they are all started at once: every rank starts the same calls in
the same order.  Data movement goes as bytes; reductions go typed (see
:mod:`mpicoll.torch.reduceops`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch
from mpi4py import MPI

from .reduceops import Reduction
from .tensors import Staged, bytes_of, check_tensor, stage_in, stage_out, typed_array

#: one of mpicoll's calls: its blocking name, positional and keyword arguments
Call = tuple[str, tuple, dict]


class Planned(NamedTuple):
    """A torch call ready to run: its outputs, mpicoll's calls, and what follows them (or None)."""

    outputs: list[torch.Tensor]
    calls: list[Call]
    after: Callable[[], None] | None = None


@dataclass
class Context:
    """What a plan needs from its process group.

    Attributes
    ----------
    rank, size : int
        This process's rank in the group, and the group's size.
    algorithm : callable
        ``algorithm(collective)``: the algorithm to ask mpicoll for (``"auto"`` unless chosen).
    """

    rank: int
    size: int
    algorithm: Callable[[str], str]

    def call(self, name: str, *args: Any, collective: str | None = None, **kwargs: Any) -> Call:
        """mpicoll's call ``name`` with the algorithm chosen for it (``collective``: mpicoll's lower-case name)."""
        kwargs["algorithm"] = self.algorithm(collective or name.lower())
        return name, args, kwargs


def nonblocking_name(name: str) -> str:
    """mpicoll's nonblocking form of a call: ``Allreduce`` -> ``Iallreduce``."""
    return "I" + name[0].lower() + name[1:]


def then(*steps: Callable[[], None] | None) -> Callable[[], None] | None:
    """The steps (None ones left out) as one, or None when there are none."""
    todo = [s for s in steps if s is not None]
    if not todo:
        return None
    if len(todo) == 1:
        return todo[0]

    def run() -> None:
        for step in todo:
            step()

    return run


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


def _average(buffer: torch.Tensor, red: Reduction, size: int) -> Callable[[], None] | None:
    """AVG's division after the sum, or None for other reductions."""
    return (lambda: buffer.div_(size)) if red.average else None


def _finish(staged: Staged) -> Callable[[], None] | None:
    """The copy of a staged output into its tensor, or None when the call writes the tensor itself."""
    return None if staged.buffer is staged.target else staged.finish


def _scaled_input(t: torch.Tensor, red: Reduction) -> torch.Tensor:
    """A contiguous input for a reduction, multiplied by PREMUL_SUM's factor (a copy then)."""
    return stage_in(t) if red.premul is None else t.detach() * red.premul


# -- reductions -----------------------------------------------------------------------------------------------


def allreduce(ctx: Context, t: torch.Tensor, red: Reduction) -> Planned:
    staged = stage_out(t)
    buf = staged.buffer
    _premul(buf, red)
    call = ctx.call("Allreduce", MPI.IN_PLACE, typed_array(buf), op=red.op)
    return Planned([t], [call], then(_average(buf, red, ctx.size), _finish(staged)))


def allreduce_coalesced(ctx: Context, tensors: Sequence[torch.Tensor], reds: Sequence[Reduction]) -> Planned:
    """One all-reduce per dtype over the tensors flattened together, then copied back."""
    groups: dict[torch.dtype, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    calls, steps = [], []
    for indices in groups.values():
        members = [tensors[i] for i in indices]
        flat = torch.cat([m.detach().reshape(-1) for m in members])
        red = reds[indices[0]]
        _premul(flat, red)
        calls.append(ctx.call("Allreduce", MPI.IN_PLACE, typed_array(flat), op=red.op))
        steps += [_average(flat, red, ctx.size), _unpack(flat, members)]
    return Planned(list(tensors), calls, then(*steps))


def _unpack(flat: torch.Tensor, members: Sequence[torch.Tensor]) -> Callable[[], None]:
    """Copy consecutive ranges of ``flat`` back into ``members`` (same dtype)."""
    def run() -> None:
        offset = 0
        for m in members:
            with torch.no_grad():
                m.copy_(flat[offset:offset + m.numel()].view(m.shape))
            offset += m.numel()

    return run


def reduce(ctx: Context, t: torch.Tensor, red: Reduction, root: int) -> Planned:
    _check_root(ctx, root, "reduce")
    if ctx.rank != root:
        return Planned([t], [ctx.call("Reduce", typed_array(_scaled_input(t, red)), None, op=red.op, root=root)])
    staged = stage_out(t)
    _premul(staged.buffer, red)
    call = ctx.call("Reduce", MPI.IN_PLACE, typed_array(staged.buffer), op=red.op, root=root)
    return Planned([t], [call], then(_average(staged.buffer, red, ctx.size), _finish(staged)))


def reduce_scatter(ctx: Context, out: torch.Tensor, inputs: Sequence[torch.Tensor], red: Reduction) -> Planned:
    """The list form: rank i gets the reduction of every rank's ``inputs[i]`` (sizes may differ)."""
    _check_list(inputs, ctx.size, "reduce_scatter input list")
    _check_dtypes(inputs, out.dtype, "reduce_scatter input list")
    counts = [i.numel() for i in inputs]
    if counts[ctx.rank] != out.numel():
        raise ValueError(f"mpicoll backend: reduce_scatter output has {out.numel()} elements, "
                         f"input {ctx.rank} has {counts[ctx.rank]}")
    staged = stage_out(out, keep=False)
    send = torch.cat([i.detach().reshape(-1) for i in inputs]) if inputs else out.new_empty(0)
    _premul(send, red)
    recv = typed_array(staged.buffer)
    if len(set(counts)) <= 1:
        call = ctx.call("Reduce_scatter_block", typed_array(send), recv, op=red.op)
    else:
        call = ctx.call("Reduce_scatter", typed_array(send), recv, counts, op=red.op)
    return Planned([out], [call], then(_average(staged.buffer, red, ctx.size), _finish(staged)))


def reduce_scatter_single(ctx: Context, out: torch.Tensor, inp: torch.Tensor, red: Reduction) -> Planned:
    """``reduce_scatter_tensor``: the input holds ``size`` blocks of the output's size, in rank order."""
    if inp.dtype != out.dtype:
        raise TypeError(f"mpicoll backend: reduce_scatter_tensor input is {inp.dtype}, output {out.dtype}")
    if inp.numel() != ctx.size * out.numel():
        raise ValueError(f"mpicoll backend: reduce_scatter_tensor input has {inp.numel()} elements, "
                         f"needs group size x output = {ctx.size} x {out.numel()}")
    staged = stage_out(out, keep=False)
    # an output inside the input (in-place use) must not be written while the input is read
    send = inp.detach().clone() if _overlap(inp, out) and red.premul is None else _scaled_input(inp, red)
    call = ctx.call("Reduce_scatter_block", typed_array(send), typed_array(staged.buffer), op=red.op)
    return Planned([out], [call], then(_average(staged.buffer, red, ctx.size), _finish(staged)))


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
    call = ctx.call("Bcast", bytes_of(staged.buffer), root=root)
    return Planned([t], [call], _finish(staged) if ctx.rank != root else None)


def _vector(t: torch.Tensor, counts: Sequence[int]) -> list:
    """mpi4py's ``[buffer, counts, displacements, MPI.BYTE]`` of a uint8 tensor."""
    return [bytes_of(t), list(counts), _displs(counts), MPI.BYTE]


def allgather(ctx: Context, outs: Sequence[torch.Tensor], inp: torch.Tensor) -> Planned:
    """The list form: ``outs[j]`` gets rank j's input (sizes may differ from rank to rank)."""
    _check_list(outs, ctx.size, "all_gather output list")
    _check_dtypes(outs, inp.dtype, "all_gather output list")
    counts = [nbytes(o) for o in outs]
    if counts[ctx.rank] != nbytes(inp):
        raise ValueError(f"mpicoll backend: all_gather output {ctx.rank} has {outs[ctx.rank].numel()} elements, "
                         f"the input {inp.numel()}")
    send, flat = stage_in(inp), torch.empty(sum(counts), dtype=torch.uint8)
    if len(set(counts)) <= 1:
        call = ctx.call("Allgather", bytes_of(send), bytes_of(flat))
    else:
        call = ctx.call("Allgatherv", bytes_of(send), _vector(flat, counts))
    return Planned(list(outs), [call], lambda: _scatter_bytes(flat, outs))


def allgather_coalesced(ctx: Context, out_lists: Sequence[Sequence[torch.Tensor]],
                        inputs: Sequence[torch.Tensor]) -> Planned:
    """``out_lists[j][i]`` gets rank j's ``inputs[i]``: one all-gather of every input packed together."""
    if len(out_lists) != ctx.size:
        raise ValueError(f"mpicoll backend: all_gather_coalesced needs {ctx.size} output lists, got {len(out_lists)}")
    counts = [sum(nbytes(o) for o in outs) for outs in out_lists]
    if counts[ctx.rank] != sum(nbytes(i) for i in inputs):
        raise ValueError("mpicoll backend: all_gather_coalesced outputs do not match the inputs' sizes")
    send, flat = _pack_bytes(inputs), torch.empty(sum(counts), dtype=torch.uint8)
    outs = [o for outs in out_lists for o in outs]
    call = ctx.call("Allgatherv", bytes_of(send), _vector(flat, counts))
    return Planned(outs, [call], lambda: _scatter_bytes(flat, outs))


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
    if staged.buffer is out and inp.is_contiguous() and n > 0 and inp.data_ptr() == out.data_ptr() + ctx.rank * n:
        send: Any = MPI.IN_PLACE
    else:
        send = bytes_of(inp.detach().clone() if _overlap(inp, out) else stage_in(inp))
    return Planned([out], [ctx.call("Allgather", send, bytes_of(staged.buffer))], _finish(staged))


def gather(ctx: Context, outs: Sequence[torch.Tensor], inp: torch.Tensor, root: int) -> Planned:
    """Rank ``root``'s ``outs[j]`` gets rank j's input; Gatherv, so that only the root needs the sizes."""
    _check_root(ctx, root, "gather")
    send = bytes_of(stage_in(inp))
    if ctx.rank != root:
        if outs:
            raise ValueError("mpicoll backend: gather takes an output list on the root only")
        return Planned([], [ctx.call("Gatherv", send, None, root=root)])
    _check_list(outs, ctx.size, "gather output list")
    _check_dtypes(outs, inp.dtype, "gather output list")
    counts = [nbytes(o) for o in outs]
    if counts[root] != nbytes(inp):
        raise ValueError("mpicoll backend: gather output on the root does not match its input's size")
    flat = torch.empty(sum(counts), dtype=torch.uint8)
    call = ctx.call("Gatherv", send, _vector(flat, counts), root=root)
    return Planned(list(outs), [call], lambda: _scatter_bytes(flat, outs))


def scatter(ctx: Context, out: torch.Tensor, inputs: Sequence[torch.Tensor], root: int) -> Planned:
    """Rank j's output gets ``inputs[j]`` of rank ``root``; Scatterv, so that only the root needs the sizes."""
    _check_root(ctx, root, "scatter")
    staged = stage_out(out, keep=False)
    if ctx.rank != root:
        if inputs:
            raise ValueError("mpicoll backend: scatter takes an input list on the root only")
        return Planned([out], [ctx.call("Scatterv", None, bytes_of(staged.buffer), root=root)], _finish(staged))
    _check_list(inputs, ctx.size, "scatter input list")
    _check_dtypes(inputs, out.dtype, "scatter input list")
    counts = [nbytes(i) for i in inputs]
    if counts[root] != nbytes(out):
        raise ValueError("mpicoll backend: scatter input on the root does not match its output's size")
    call = ctx.call("Scatterv", _vector(_pack_bytes(inputs), counts), bytes_of(staged.buffer), root=root)
    return Planned([out], [call], _finish(staged))


def alltoall(ctx: Context, outs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> Planned:
    """The list form: ``outs[j]`` gets rank j's ``inputs[me]``; sizes may differ (Alltoallv)."""
    _check_list(outs, ctx.size, "all_to_all output list")
    _check_list(inputs, ctx.size, "all_to_all input list")
    _check_dtypes(outs, inputs[0].dtype if inputs else outs[0].dtype, "all_to_all output list")
    scounts, rcounts = [nbytes(i) for i in inputs], [nbytes(o) for o in outs]
    recv = torch.empty(sum(rcounts), dtype=torch.uint8)
    call = ctx.call("Alltoallv", _vector(_pack_bytes(inputs), scounts), _vector(recv, rcounts))
    return Planned(list(outs), [call], lambda: _scatter_bytes(recv, outs))


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
    call = ctx.call("Alltoallv", _vector(send, scounts), _vector(staged.buffer, rcounts))
    return Planned([out], [call], _finish(staged))


def barrier(ctx: Context) -> Planned:
    return Planned([], [ctx.call("Barrier")])


def chain(planned: Sequence[Planned]) -> Planned:
    """Several planned calls as one: outputs and calls together, what follows them one after the other."""
    return Planned([t for p in planned for t in p.outputs], [c for p in planned for c in p.calls],
                   then(*(p.after for p in planned)))


__all__ = ["Call", "Context", "Planned", "Staged", "allgather", "allgather_coalesced", "allgather_single",
           "allreduce", "allreduce_coalesced", "alltoall", "alltoall_single", "barrier", "broadcast", "chain",
           "gather", "nonblocking_name", "reduce", "reduce_scatter", "reduce_scatter_single", "scatter", "then"]
