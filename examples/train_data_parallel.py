"""Data-parallel training of a linear model on NumPy or CuPy, gradients summed with mpicoll.

Run:  mpirun -n 4 python examples/train_data_parallel.py [--device cpu|gpu] [--steps 200]

Every rank holds a replica of the weights and its own shard of the data.  Each
step it computes the gradient on its shard, ``Allreduce`` sums the gradients of
all replicas (divided by the number of ranks: the average), and every replica
applies the same update, so the replicas stay identical, as in PyTorch's
DistributedDataParallel.  With ``--device gpu`` the arrays are CuPy arrays and
mpicoll moves device buffers (needs CuPy and a GPU; the default is NumPy).

Checks: the loss falls below 1 % of its start, and all replicas hold
bit-identical weights.
"""

from __future__ import annotations

import argparse

import numpy as np
from mpi4py import MPI

import mpicoll


def array_module(device: str):
    """numpy for --device cpu, cupy for --device gpu (with a clear error when it is missing)."""
    if device == "cpu":
        return np
    try:
        import cupy
    except ImportError:
        raise SystemExit("--device gpu needs CuPy: pip install cupy-cuda12x (or run with --device cpu)") from None
    return cupy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.1)
    ns = ap.parse_args()
    xp = array_module(ns.device)
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size

    true_w = np.linspace(-1, 1, ns.features)
    rng = np.random.default_rng(100 + rank)                   # each rank: its own shard of the data
    x_np = rng.standard_normal((256, ns.features))
    x, y = xp.asarray(x_np), xp.asarray(x_np @ true_w)
    w = xp.zeros(ns.features)                                 # every replica starts from the same weights
    grad_sum = xp.empty_like(w)

    def loss() -> float:
        local = np.array([float(((x @ w - y) ** 2).mean())])
        total = np.empty(1)
        comm.Allreduce(local, total, op=MPI.SUM)
        return float(total[0]) / size

    first = loss()
    for step in range(ns.steps):
        grad = 2 * x.T @ (x @ w - y) / len(y)
        if ns.device == "gpu":
            xp.cuda.get_current_stream().synchronize()       # the gradient must be computed before MPI reads it
        comm.Allreduce(grad, grad_sum, op=MPI.SUM)
        w -= ns.lr * grad_sum / size
        if rank == 0 and step % 50 == 0:
            print(f"step {step:4d}  loss {loss():.3e}", flush=True)
        elif step % 50 == 0:
            loss()
    last = loss()
    w_host = np.asarray(w.get() if hasattr(w, "get") else w)
    replicas = comm.gather(w_host.tobytes(), root=0)
    same = rank != 0 or all(r == replicas[0] for r in replicas)
    ok = comm.allreduce(bool(last < 0.01 * first and same), op=MPI.LAND)
    if rank == 0:
        print(f"{size} replicas on {ns.device}: loss {first:.3e} -> {last:.3e}; replicas identical: {same}")
    if not ok:
        comm.Abort(1)


if __name__ == "__main__":
    main()
