"""Conjugate gradient on a distributed SPD matrix, with mpicoll.Comm as a drop-in communicator.

Run:  mpirun -n 4 python examples/cg_solver.py [--n 400] [--algorithm auto]

Each rank owns a block of rows of A (n x n, symmetric positive definite) and the
matching slices of x, b, r, p.  CG needs two collectives per iteration:

* dot products: each rank sums its slice, ``Allreduce`` sums the partial sums;
* the matrix-vector product A p: each rank needs all of p for its rows, so
  ``Allgatherv`` assembles p (no halo exchange: A is dense).

Swap ``mpicoll.Comm(MPI.COMM_WORLD)`` for ``MPI.COMM_WORLD`` and the program is
plain mpi4py: the calls are the same.  The result is checked against
``numpy.linalg.solve`` on rank 0.
"""

from __future__ import annotations

import argparse

import numpy as np
from mpi4py import MPI

import mpicoll


def rows_of(n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows per rank and their offsets (the first n % size ranks get one more)."""
    counts = np.array([n // size + (r < n % size) for r in range(size)])
    return counts, np.concatenate([[0], np.cumsum(counts)[:-1]])


def make_problem(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """The same SPD matrix and right-hand side on every rank (a fixed seed)."""
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return m @ m.T / n + np.eye(n), rng.standard_normal(n)


def cg(comm, a_rows: np.ndarray, b: np.ndarray, counts: np.ndarray, displs: np.ndarray, *,
       algorithm: str = "auto", tol: float = 1e-10, maxiter: int = 1000) -> tuple[np.ndarray, int]:
    """Solve A x = b; ``a_rows`` and ``b`` are this rank's rows.  Returns (local x, iterations)."""
    n = int(counts.sum())
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    p_full = np.empty(n)

    def dot(u: np.ndarray, v: np.ndarray) -> float:
        partial = np.array([u @ v])
        total = np.empty(1)
        comm.Allreduce(partial, total, op=MPI.SUM, algorithm=algorithm)
        return float(total[0])

    rr = dot(r, r)
    bb = dot(b, b)
    for it in range(1, maxiter + 1):
        comm.Allgatherv(p, [p_full, counts, displs, MPI.DOUBLE], algorithm=algorithm)
        ap = a_rows @ p_full
        alpha = rr / dot(p, ap)
        x += alpha * p
        r -= alpha * ap
        rr_new = dot(r, r)
        if rr_new <= tol ** 2 * bb:
            return x, it
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x, maxiter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="matrix size")
    ap.add_argument("--algorithm", default="auto", help="mpicoll algorithm for Allreduce and Allgatherv")
    ns = ap.parse_args()
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = comm.rank, comm.size
    a, b = make_problem(ns.n)
    counts, displs = rows_of(ns.n, size)
    mine = slice(displs[rank], displs[rank] + counts[rank])
    x_local, iters = cg(comm, a[mine], b[mine], counts, displs, algorithm=ns.algorithm)
    x = np.empty(ns.n)
    comm.Allgatherv(x_local, [x, counts, displs, MPI.DOUBLE])
    ok = np.allclose(x, np.linalg.solve(a, b), rtol=1e-6, atol=1e-8)
    ok = comm.allreduce(bool(ok), op=MPI.LAND)
    if rank == 0:
        print(f"CG on {size} ranks, n = {ns.n}: {iters} iterations, "
              f"residual {np.linalg.norm(a @ x - b):.2e}, matches numpy.linalg.solve: {ok}")
    if not ok:
        comm.Abort(1)


if __name__ == "__main__":
    main()
