"""torch's functional collectives (``torch.distributed._functional_collectives``) on "mpicoll".

They reach the process group through torch's C++ dispatcher (the group is
found by name), not through the Python API: this checks that route too.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402
import torch.distributed._functional_collectives as fc  # noqa: E402

from conftest import check  # noqa: E402


def result(out):
    return out.wait() if hasattr(out, "wait") else out


def test_functional_collectives(rank, size):
    world = dist.group.WORLD
    total = float(sum(range(size)))
    out = result(fc.all_reduce(torch.full((3,), float(rank)), "sum", world))
    check(torch.equal(out, torch.full((3,), total)), f"all_reduce {out}")
    out = result(fc.all_gather_tensor(torch.full((2,), float(rank)), 0, world))
    check(torch.equal(out, torch.arange(size).repeat_interleave(2).float()), f"all_gather_tensor {out}")
    out = result(fc.reduce_scatter_tensor(torch.arange(2.0 * size) + rank, "sum", 0, world))
    want = (torch.arange(2.0 * size) * size + total)[2 * rank:2 * rank + 2]
    check(torch.equal(out, want), f"reduce_scatter_tensor {out}")
    out = result(fc.all_to_all_single(torch.arange(float(size)) + 10 * rank, None, None, world))
    check(torch.equal(out, torch.arange(float(size)) * 10 + rank), f"all_to_all_single {out}")
    out = result(fc.broadcast(torch.full((2,), float(rank)), size - 1, world))
    check(torch.equal(out, torch.full((2,), float(size - 1))), f"broadcast {out}")
