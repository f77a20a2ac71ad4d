"""FSDP2 (``fully_shard`` on a CPU DeviceMesh) on "mpicoll": the same parameters as on Gloo and as one process.

Each Linear layer and the whole model are sharded over every rank; 20 SGD
steps on each rank's own batch (as in :mod:`test_ddp`).  FSDP's all-gathers
(``all_gather_into_tensor``, in place) and reduce-scatters
(``reduce_scatter_tensor``) run on the mesh's group.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")  # the whole module is skipped where torch is not installed
import torch.distributed as dist  # noqa: E402
from test_ddp import STEPS, batch, model, train_alone  # noqa: E402

from conftest import check  # noqa: E402

fsdp = pytest.importorskip("torch.distributed.fsdp")
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402


def train_fsdp(mesh, rank: int, reshard: bool) -> torch.Tensor:
    net = model()
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            fsdp.fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fsdp.fully_shard(net, mesh=mesh, reshard_after_forward=reshard)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(rank, step)
        torch.nn.functional.mse_loss(net(x), y).backward()
        opt.step()
    return torch.cat([p.full_tensor().reshape(-1) for p in net.parameters()])


@pytest.mark.parametrize("reshard", [True, False])
def test_fsdp2_matches_gloo_and_one_process(gloo, rank, size, reshard):
    mesh = init_device_mesh("cpu", (size,))
    check(dist.get_backend(mesh.get_group()) == "mpicoll")
    ours = train_fsdp(mesh, rank, reshard)
    theirs = train_fsdp(DeviceMesh.from_group(gloo, "cpu"), rank, reshard)
    alone = train_alone(size, "default")
    gap_gloo, gap_alone = (ours - theirs).abs().max().item(), (ours - alone).abs().max().item()
    check(gap_gloo <= 1e-6 and gap_alone <= 1e-5, f"|mpicoll - gloo| {gap_gloo:.2e}, |mpicoll - one process| "
                                                  f"{gap_alone:.2e}")
