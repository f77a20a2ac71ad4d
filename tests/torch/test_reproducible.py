"""``Options(reproducible=True)``: torch's sums on "mpicoll" give the bits of one process, for every algorithm.

Every rank builds the same table of rows (values over many binades, with cancellations); rank ``i``
contributes row ``(i + shift) % size``.  The reference is :func:`mpicoll.data.fixedpoint.sum_rows` of
the table, computed in one process.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402

import mpicoll  # noqa: E402
import mpicoll.torch  # noqa: E402
from mpicoll.data import fixedpoint as fp  # noqa: E402

from conftest import check  # noqa: E402

COUNT = 3001
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16}


def table(size: int, dtype: torch.dtype) -> torch.Tensor:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((size, COUNT)) * np.exp2(rng.integers(-30, 30, (size, COUNT)))
    if size > 1:
        x[1, ::3] = -x[0, ::3]
    return torch.from_numpy(x).to(dtype)


def reference(rows: torch.Tensor) -> torch.Tensor:
    if rows.dtype == torch.bfloat16:
        import ml_dtypes

        as_numpy = rows.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return torch.from_numpy(fp.sum_rows(as_numpy).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(fp.sum_rows(rows.numpy()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_all_reduce_every_algorithm_and_placement(rank, size, dtype):
    rows = table(size, dtype)
    expected = reference(rows)
    group = dist.new_group(pg_options=mpicoll.torch.Options(reproducible=True))
    for algorithm in mpicoll.algorithms("allreduce"):
        group.set_algorithm("allreduce", algorithm)
        for shift in (0, 1):
            t = rows[(rank + shift) % size].clone()
            dist.all_reduce(t, group=group)
            check(torch.equal(t.view(BITS[dtype]), expected.view(BITS[dtype])), f"{algorithm}, shift {shift}, {dtype}")


def test_reduce_scatter_and_the_default_is_off(rank, size):
    rows = table(size, torch.float64)
    expected = reference(rows)
    group = dist.new_group(pg_options=mpicoll.torch.Options(reproducible=True))
    block = COUNT // size
    out = torch.empty(block, dtype=torch.float64)
    dist.reduce_scatter_tensor(out, rows[rank][:block * size].clone(), group=group)
    mine = expected[rank * block:(rank + 1) * block]
    check(torch.equal(out.view(torch.int64), mine.view(torch.int64)), "reduce_scatter_tensor")
    check(not mpicoll.torch.Options().reproducible, "off unless asked for")


def test_asynchronous_sums_are_requests_with_the_same_bits(rank, size):
    """async_op=True on a reproducible group: mpicoll's reproducible requests, several in flight at once."""
    rows = table(size, torch.float64)
    expected = reference(rows)
    group = dist.new_group(pg_options=mpicoll.torch.Options(reproducible=True))
    tensors = [rows[(rank + shift) % size].clone() for shift in (0, 1)]
    works = [dist.all_reduce(t, group=group, async_op=True) for t in tensors]
    plain = torch.full((5,), float(rank))
    other = dist.all_reduce(plain, group=group, async_op=True)      # an ordinary sum among them (integers)
    for work in (*works, other):
        work.wait()
    check(all(torch.equal(t.view(torch.int64), expected.view(torch.int64)) for t in tensors), "async all_reduce")
    check(torch.equal(plain, torch.full((5,), float(size * (size - 1) // 2))), "the sum of small integers")
