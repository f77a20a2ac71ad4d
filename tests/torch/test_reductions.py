"""Reductions on "mpicoll": every ReduceOp on every dtype against the right answer (and Gloo where it works).

Each rank's input is a function of its rank, so every rank computes the right
answer from all inputs.  bfloat16 and float16 are reduced as themselves (the
right answer is computed in float32 and rounded once, so the comparison
allows each format's rounding); float8 and bitwise ops on floats are refused
on every rank.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402
from torch._C._distributed_c10d import _make_nccl_premul_sum  # noqa: E402

from conftest import check, raises_everywhere  # noqa: E402

R = dist.ReduceOp
N = 7
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
ARITH = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
BITWISE = [R.BAND, R.BOR, R.BXOR]


def data(rank: int, dtype: torch.dtype, op=R.SUM, n: int = N) -> torch.Tensor:
    """Rank ``rank``'s input: small values, exact in every dtype (products stay small)."""
    i = torch.arange(n)
    if dtype == torch.bool:
        return ((i + rank) % 3 == 0)
    if op == R.PRODUCT:
        values = ((i + rank) % 3 + 1) * (1 if dtype == torch.uint8 else (-1) ** ((i + rank) % 2))
    elif op in BITWISE:
        values = (i * 5 + rank * 3 + 1) % 64
    else:
        values = (i * 3 + rank * 5) % 17 - (0 if dtype == torch.uint8 else 8)
    if dtype.is_complex:
        return (values + 1j * (values % 5)).to(dtype)
    return values.to(dtype)


def expected(size: int, dtype: torch.dtype, op, n: int = N) -> torch.Tensor:
    """The right answer, from every rank's input (in float32 or complex64 for reduced-precision floats)."""
    inputs = [data(r, dtype, op, n) for r in range(size)]
    if dtype in (torch.float16, torch.bfloat16):
        inputs = [t.float() for t in inputs]
    stacked = torch.stack(inputs)
    if dtype == torch.bool:
        pick = {R.SUM: torch.any, R.MAX: torch.any, R.BOR: torch.any, R.PRODUCT: torch.all, R.MIN: torch.all,
                R.BAND: torch.all}
        if op == R.BXOR:
            return functools.reduce(torch.logical_xor, inputs)
        return pick[op](stacked, dim=0)
    if op == R.SUM:
        return stacked.sum(dim=0, dtype=stacked.dtype)
    if op == R.PRODUCT:
        return stacked.prod(dim=0, dtype=stacked.dtype)
    if op == R.MIN:
        return stacked.amin(dim=0)
    if op == R.MAX:
        return stacked.amax(dim=0)
    fn = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
    return functools.reduce(fn, inputs)


def close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Exact for integers, booleans and exactly representable sums; one rounding for half formats."""
    if got.dtype in (torch.float16, torch.bfloat16):
        return torch.allclose(got.float(), want.to(got.dtype).float(), rtol=1e-2, atol=1e-2)
    return torch.equal(got, want.to(got.dtype))


CASES = ([(d, op) for d in FLOATS + INTS for op in ARITH] + [(d, op) for d in INTS for op in BITWISE]
         + [(torch.bool, op) for op in ARITH + BITWISE] + [(torch.complex64, R.SUM), (torch.complex128, R.SUM)])


@pytest.mark.parametrize(("dtype", "op"), CASES, ids=lambda v: str(v).removeprefix("torch.").removeprefix("RedOpType."))
def test_all_reduce_every_op_and_dtype(rank, size, dtype, op):
    t = data(rank, dtype, op)
    dist.all_reduce(t, op=op)
    want = expected(size, dtype, op)
    check(t.dtype == dtype and close(t, want), f"{t} != {want}")


@pytest.mark.parametrize(("dtype", "op"), [(torch.float32, op) for op in ARITH] + [(torch.int32, op) for op in BITWISE])
def test_all_reduce_matches_gloo(gloo, rank, dtype, op):
    ours, theirs = data(rank, dtype, op), data(rank, dtype, op)
    dist.all_reduce(ours, op=op)
    dist.all_reduce(theirs, op=op, group=gloo)
    check(torch.equal(ours, theirs), f"mpicoll {ours} gloo {theirs}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.complex64])
def test_avg_and_premul_sum(rank, size, dtype):
    t = data(rank, dtype)
    dist.all_reduce(t, op=R.AVG)
    want = expected(size, dtype, R.SUM) / size
    check(close(t, want) if dtype.is_floating_point else torch.allclose(t, want.to(dtype)), f"AVG {t} != {want}")
    t = data(rank, dtype)
    dist.all_reduce(t, op=_make_nccl_premul_sum(0.5))
    want = expected(size, dtype, R.SUM) * 0.5
    check(close(t, want) if dtype.is_floating_point else torch.allclose(t, want.to(dtype)), f"PREMUL {t} != {want}")


def test_half_formats_are_reduced_as_themselves_not_as_bytes(rank, size):
    # 1 + 2**-8 is not a bfloat16: a sum of bytes would give garbage; a bfloat16 sum gives size * 1 (rounded)
    for dtype, value in ((torch.bfloat16, 1.5), (torch.float16, 1.25)):
        t = torch.full((5,), value, dtype=dtype)
        dist.all_reduce(t)
        check(torch.equal(t, torch.full((5,), value * size, dtype=dtype)), f"{dtype}: {t}")


@pytest.mark.parametrize(("dtype", "op", "match"), [
    (torch.float8_e4m3fn, R.SUM, "moved but not reduced"),
    (torch.float8_e5m2, R.MAX, "moved but not reduced"),
    (torch.float32, R.BAND, "integer or bool"),
    (torch.int32, R.AVG, "floating or complex"),
    (torch.bool, R.AVG, "bool"),
])
def test_undefined_reductions_are_refused_on_every_rank(dtype, op, match):
    t = torch.zeros(4).to(dtype)
    raises_everywhere(TypeError, lambda: dist.all_reduce(t, op=op), match)
    # reduce_scatter_tensor reaches the backend with the dtype as it is (all_reduce turns complex into real pairs)
    raises_everywhere(TypeError, lambda: dist.reduce_scatter_tensor(torch.zeros(1).to(dtype),
                                                                    torch.zeros(dist.get_world_size()).to(dtype),
                                                                    op=op), match)


def test_min_max_on_complex_are_refused_on_every_rank():
    # torch refuses these itself before the backend sees them; the backend refuses them too (reduceops)
    raises_everywhere(ValueError, lambda: dist.all_reduce(torch.zeros(3, dtype=torch.complex64), op=R.MAX), "complex")
    raises_everywhere(TypeError, lambda: dist.group.WORLD.reduce_scatter_single(
        torch.zeros(1, dtype=torch.complex64), torch.zeros(dist.get_world_size(), dtype=torch.complex64),
        _options(R.MIN)), "complex")


def _options(op):
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = op
    return opts


@pytest.mark.parametrize("root", [0, -1])
@pytest.mark.parametrize(("dtype", "op"), [(torch.float32, R.SUM), (torch.int64, R.MAX), (torch.bfloat16, R.SUM),
                                           (torch.bool, R.PRODUCT), (torch.float64, R.AVG)])
def test_reduce(rank, size, root, dtype, op):
    root = root % size
    t = data(rank, dtype, op)
    before = t.clone()
    dist.reduce(t, dst=root, op=op)
    if rank == root:
        want = expected(size, dtype, R.SUM if op == R.AVG else op) / (size if op == R.AVG else 1)
        check(close(t, want.to(dtype) if op != R.AVG else want), f"{t} != {want}")
    else:
        check(torch.equal(t, before), "a non-root's tensor changed")


def test_all_reduce_non_contiguous_and_zero_size(rank, size):
    base = torch.arange(12.0).reshape(3, 4) + rank
    view = base.t()  # strided
    dist.all_reduce(view)
    want = sum(torch.arange(12.0).reshape(3, 4) + r for r in range(size))
    check(torch.equal(base, want), f"{base} != {want}")
    column = torch.zeros(4, 3)
    column[:, 1] = rank + 1
    dist.all_reduce(column[:, 1])
    check(torch.equal(column[:, 1], torch.full((4,), float(sum(range(1, size + 1))))) and column[:, 0].eq(0).all(),
          f"{column}")
    empty = torch.empty(0, 3)
    dist.all_reduce(empty)
    check(empty.shape == (0, 3))
    scalar = torch.tensor(float(rank))
    dist.all_reduce(scalar, op=R.MAX)
    check(scalar.item() == size - 1)


def test_all_reduce_coalesced(rank, size):
    a, b, c = torch.full((3,), float(rank)), torch.full((2, 2), rank, dtype=torch.int64), torch.ones(1)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
        dist.all_reduce(c)
    cm.wait()
    s = sum(range(size))
    check(torch.equal(a, torch.full((3,), float(s))) and torch.equal(b, torch.full((2, 2), s))
          and c.item() == size, f"{a} {b} {c}")


@pytest.mark.parametrize("uneven", [False, True])
@pytest.mark.parametrize(("dtype", "op"), [(torch.float32, R.SUM), (torch.int32, R.MIN), (torch.bfloat16, R.SUM),
                                           (torch.float64, R.AVG)])
def test_reduce_scatter_list(rank, size, dtype, op, uneven):
    lengths = [(j + 1 if uneven else 3) for j in range(size)]

    def inputs(r):
        return [data(r, dtype, op, n=lengths[j]) + j for j in range(size)]

    out = torch.empty(lengths[rank], dtype=dtype)
    dist.reduce_scatter(out, inputs(rank), op=op)
    stacked = torch.stack([inputs(r)[rank].double() for r in range(size)])
    want = {R.SUM: stacked.sum(0), R.MIN: stacked.amin(0), R.AVG: stacked.mean(0)}[op]
    check(close(out, want.to(dtype)) if dtype != torch.bfloat16 else close(out, want.float()), f"{out} != {want}")


@pytest.mark.parametrize("op", [R.SUM, R.AVG, R.MAX])
def test_reduce_scatter_tensor(rank, size, op):
    inp = torch.arange(size * 4, dtype=torch.float32) * (rank + 1)
    out = torch.empty(4)
    dist.reduce_scatter_tensor(out, inp, op=op)
    stacked = torch.stack([torch.arange(size * 4, dtype=torch.float32) * (r + 1) for r in range(size)])
    want = {R.SUM: stacked.sum(0), R.AVG: stacked.mean(0), R.MAX: stacked.amax(0)}[op][rank * 4:(rank + 1) * 4]
    check(torch.allclose(out, want), f"{out} != {want}")
    # in place: the output is this rank's block of the input
    inp2 = torch.arange(size * 4, dtype=torch.float32) * (rank + 1)
    block = inp2[rank * 4:(rank + 1) * 4]
    dist.reduce_scatter_tensor(block, inp2, op=op)
    check(torch.allclose(block, want), f"in place {block} != {want}")


def test_reduce_scatter_tensor_coalesced(rank, size):
    a_in, b_in = torch.arange(size * 2.0) + rank, torch.full((size * 3,), rank, dtype=torch.int64)
    a_out, b_out = torch.empty(2), torch.empty(3, dtype=torch.int64)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(a_out, a_in)
        dist.reduce_scatter_tensor(b_out, b_in)
    cm.wait()
    total = sum(range(size))
    want_a = (torch.arange(size * 2.0) * size + total)[rank * 2:rank * 2 + 2]
    check(torch.equal(a_out, want_a) and torch.equal(b_out, torch.full((3,), total)), f"{a_out} {b_out}")
