"""Data movement on "mpicoll": broadcast, gathers, scatters, all-to-all, barrier, and their object forms.

Every dtype moves as bytes (float8 and complex included); strided views,
uneven sizes and zero-size tensors are checked against the right answer, and
against Gloo where Gloo gets them right.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402

from conftest import check  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.int64, torch.bool,
          torch.complex64, torch.uint8]


def payload(rank: int, dtype: torch.dtype, n: int = 6) -> torch.Tensor:
    """Rank ``rank``'s data: distinct per rank, exact in every dtype."""
    values = torch.arange(n) + 10 * rank
    if dtype == torch.bool:
        return (values % 3 == rank % 3)
    if dtype.is_complex:
        return (values + 1j * rank).to(dtype)
    if dtype == torch.float8_e4m3fn:
        return (values % 8).float().to(dtype)
    return values.to(dtype)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal (float8 has no torch.equal)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8) if a.element_size() == 1
                                                                      else a, b.view(torch.uint8)
                                                                      if b.element_size() == 1 else b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_every_root(rank, size, dtype):
    for root in range(size):
        t = payload(rank, dtype)
        dist.broadcast(t, src=root)
        check(same(t, payload(root, dtype)), f"root {root}: {t}")


def test_broadcast_strided_view_is_right_where_gloo_is_not(rank, size, gloo):
    base = torch.zeros(4, 5)
    base[:, 2] = torch.arange(4.0) + 100 * rank
    dist.broadcast(base[:, 2], src=size - 1)
    want = torch.zeros(4, 5)
    want[:, 2] = torch.arange(4.0) + 100 * (size - 1)
    check(torch.equal(base, want), f"{base}")
    # Gloo on the same call, for the record (it may or may not get this right: not asserted)
    other = torch.zeros(4, 5)
    other[:, 2] = torch.arange(4.0) + 100 * rank
    dist.broadcast(other[:, 2], src=size - 1, group=gloo)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e5m2, torch.bool], ids=str)
def test_all_gather_list(rank, size, dtype):
    outs = [torch.empty(6, dtype=dtype) for _ in range(size)]
    dist.all_gather(outs, payload(rank, dtype))
    check(all(same(o, payload(r, dtype)) for r, o in enumerate(outs)), f"{outs}")


def test_all_gather_uneven_and_strided_outputs(rank, size):
    outs = [torch.empty(2 * r + 1, 3).t() for r in range(size)]  # rank r sends 3 x (2r + 1), as strided views

    def mine(r):
        return torch.arange(3 * (2 * r + 1), dtype=torch.float32).reshape(2 * r + 1, 3).t() + r

    dist.all_gather(outs, mine(rank))
    check(all(torch.equal(o, mine(r)) for r, o in enumerate(outs)), f"{outs}")


def test_all_gather_matches_gloo(rank, size, gloo):
    ours = [torch.empty(5) for _ in range(size)]
    theirs = [torch.empty(5) for _ in range(size)]
    dist.all_gather(ours, torch.full((5,), float(rank)))
    dist.all_gather(theirs, torch.full((5,), float(rank)), group=gloo)
    check(all(torch.equal(a, b) for a, b in zip(ours, theirs)))


@pytest.mark.parametrize("shape", ["flat", "stacked"])
def test_all_gather_into_tensor(rank, size, shape):
    inp = torch.arange(4, dtype=torch.int32) + 10 * rank
    out = torch.empty(size * 4, dtype=torch.int32) if shape == "flat" else torch.empty(size, 4, dtype=torch.int32)
    dist.all_gather_into_tensor(out, inp)
    want = torch.stack([torch.arange(4, dtype=torch.int32) + 10 * r for r in range(size)]).reshape(out.shape)
    check(torch.equal(out, want), f"{out}")


def test_all_gather_into_tensor_in_place_and_zero_size(rank, size):
    out = torch.zeros(size * 3)
    block = out[rank * 3:(rank + 1) * 3]  # FSDP's way: the input is this rank's block of the output
    block.fill_(rank + 1)
    dist.all_gather_into_tensor(out, block)
    want = torch.cat([torch.full((3,), float(r + 1)) for r in range(size)])
    check(torch.equal(out, want), f"{out}")
    empty = torch.empty(0)
    dist.all_gather_into_tensor(torch.empty(0), empty)


def test_all_gather_coalesced_forms(rank, size):
    outs_a, outs_b = torch.empty(size * 2), torch.empty(size * 3, dtype=torch.int64)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(outs_a, torch.full((2,), float(rank)))
        dist.all_gather_into_tensor(outs_b, torch.full((3,), rank, dtype=torch.int64))
    cm.wait()
    check(torch.equal(outs_a, torch.arange(size).repeat_interleave(2).float())
          and torch.equal(outs_b, torch.arange(size).repeat_interleave(3)), f"{outs_a} {outs_b}")


def test_all_gather_coalesced_list_form(rank, size):
    # out_lists[j][i] gets rank j's inputs[i]: tensors of two shapes (torch wants one dtype), one call
    inputs = [torch.full((2,), float(rank)), torch.full((3, 1), rank + 0.5)]
    out_lists = [[torch.empty(2), torch.empty(3, 1)] for _ in range(size)]
    dist.all_gather_coalesced(out_lists, inputs)
    check(all(torch.equal(outs[0], torch.full((2,), float(j))) and torch.equal(outs[1], torch.full((3, 1), j + 0.5))
              for j, outs in enumerate(out_lists)), f"{out_lists}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bfloat16], ids=str)
def test_gather_and_scatter_every_root(rank, size, dtype):
    for root in range(size):
        outs = [torch.empty(6, dtype=dtype) for _ in range(size)] if rank == root else None
        dist.gather(payload(rank, dtype), outs, dst=root)
        if rank == root:
            check(all(same(o, payload(r, dtype)) for r, o in enumerate(outs)), f"gather root {root}: {outs}")
        else:
            check(True)
        out = torch.empty(6, dtype=dtype)
        dist.scatter(out, [payload(r, dtype) for r in range(size)] if rank == root else None, src=root)
        check(same(out, payload(rank, dtype)), f"scatter root {root}: {out}")


def test_scatter_into_strided_view(rank, size):
    base = torch.zeros(3, 4)
    dist.scatter(base[:, 1], [torch.full((3,), float(r + 1)) for r in range(size)] if rank == 0 else None, src=0)
    want = torch.zeros(3, 4)
    want[:, 1] = rank + 1
    check(torch.equal(base, want), f"{base}")


def test_all_to_all_list_uneven(rank, size):
    # rank r sends (r + j + 1) elements to rank j, valued 100 r + j
    inputs = [torch.full((rank + j + 1,), 100.0 * rank + j) for j in range(size)]
    outs = [torch.empty(j + rank + 1) for j in range(size)]
    dist.all_to_all(outs, inputs)
    check(all(torch.equal(o, torch.full((j + rank + 1,), 100.0 * j + rank)) for j, o in enumerate(outs)), f"{outs}")


def test_all_to_all_single_even_and_uneven(rank, size):
    inp = torch.arange(size * 2, dtype=torch.float32) + 100 * rank
    out = torch.empty(size * 2)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(rank * 2, rank * 2 + 2, dtype=torch.float32) + 100 * j for j in range(size)])
    check(torch.equal(out, want), f"even: {out} != {want}")
    # uneven, along dim 0 of a 2-d tensor: rank r sends j + 1 rows to rank j
    in_splits = [j + 1 for j in range(size)]
    out_splits = [rank + 1] * size
    inp = torch.cat([torch.full((j + 1, 2), 10.0 * rank + j) for j in range(size)])
    out = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), 10.0 * j + rank) for j in range(size)])
    check(torch.equal(out, want), f"uneven: {out} != {want}")


def test_barrier_and_object_collectives(rank, size):
    dist.barrier()
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "name": "x" * rank})
    check(objs == [{"rank": r, "name": "x" * r} for r in range(size)], f"{objs}")
    box = [{"from": rank}] if rank == size - 1 else [None]
    dist.broadcast_object_list(box, src=size - 1)
    check(box == [{"from": size - 1}], f"{box}")
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(("g", rank), gathered, dst=0)
    check(rank != 0 or gathered == [("g", r) for r in range(size)], f"{gathered}")
    got = [None]
    dist.scatter_object_list(got, [("s", r) for r in range(size)] if rank == 0 else None, src=0)
    check(got == [("s", rank)], f"{got}")


def test_device_tensors_are_refused_clearly():
    t = torch.empty(3, device="meta")
    try:
        dist.broadcast(t, src=0)
    except (ValueError, RuntimeError) as exc:
        check("CPU" in str(exc) or "cpu" in str(exc), str(exc))
    else:
        check(False, "a meta tensor was accepted")
