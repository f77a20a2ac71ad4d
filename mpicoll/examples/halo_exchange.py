"""A halo exchange on a 2-D grid of ranks with one neighbourhood collective per step.

Run:  mpirun -n 4 python -m mpicoll.examples.halo_exchange   (any N; add --draw halo.png for the schedule)

Each rank owns an n x n tile of a periodic 2-D field, with a one-cell halo
around it holding copies of its neighbours' edge cells.  ``Create_cart`` lays
the ranks out as a grid; its neighbour order is, per dimension, the rank
before then the rank after: [north, south, west, east].  One
``Neighbor_alltoall`` per step sends block k (this tile's edge facing
neighbour k) to neighbour k and receives block k (neighbour k's edge facing
this tile) into the halo: no tags, no matching of Isend/Irecv pairs by hand.
A few Jacobi smoothing steps then run on the tile; the result is checked
against the same steps with MPI's built-in ``Neighbor_alltoall``.
mpicoll runs it as a one-round schedule over the grid's edges; ``--draw``
draws that schedule.
"""

from __future__ import annotations

import sys

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say
from mpicoll.ir.topology import Cart

N = 8        # cells per side of a tile
STEPS = 5


def edges(tile: np.ndarray) -> np.ndarray:
    """The four edges of the tile's interior, in the Cartesian neighbour order [north, south, west, east]."""
    inner = tile[1:-1, 1:-1]
    return np.concatenate([inner[0, :], inner[-1, :], inner[:, 0], inner[:, -1]])


def fill_halo(tile: np.ndarray, halo: np.ndarray) -> None:
    """Put what the neighbours sent (same order) into the halo cells."""
    n = tile.shape[0] - 2
    north, south, west, east = halo.reshape(4, n)
    tile[0, 1:-1], tile[-1, 1:-1], tile[1:-1, 0], tile[1:-1, -1] = north, south, west, east


def smooth(comm, tile: np.ndarray) -> np.ndarray:
    """STEPS Jacobi steps, each after a halo exchange on ``comm``."""
    halo = np.empty(4 * N)
    for _ in range(STEPS):
        comm.Neighbor_alltoall(edges(tile), halo)
        fill_halo(tile, halo)
        tile[1:-1, 1:-1] = 0.25 * (tile[:-2, 1:-1] + tile[2:, 1:-1] + tile[1:-1, :-2] + tile[1:-1, 2:])
    return tile


def main() -> None:
    world = MPI.COMM_WORLD
    dims = MPI.Compute_dims(world.size, 2)
    grid = world.Create_cart(dims, periods=[True, True])
    mine = mpicoll.Comm(grid.Dup())    # the same topology, wrapped (its own communicator)
    say(world, f"{world.size} ranks as a {dims[0]} x {dims[1]} periodic grid, tiles of {N} x {N} cells")
    rng = np.random.default_rng(grid.rank)
    start = np.zeros((N + 2, N + 2))
    start[1:-1, 1:-1] = rng.random((N, N))
    ours = smooth(mine, start.copy())
    builtin = smooth(grid, start.copy())
    check(world, np.array_equal(ours, builtin), f"{STEPS} halo exchanges + Jacobi steps equal MPI's built-in")
    if "--draw" in sys.argv and world.rank == 0:
        from mpicoll.analysis.draw import draw  # noqa: PLC0415 - only when asked (matplotlib)

        path = sys.argv[sys.argv.index("--draw") + 1]
        print("drew", draw("neighbor_alltoall", "direct", world.size, path, topology=Cart(dims, (True, True))))
    if world.size <= 4:
        say(world, str(mpicoll.schedules("neighbor_alltoall", "direct", world.size, topology=Cart(dims, (True, True)))))
    mine.Free()
    grid.Free()


if __name__ == "__main__":
    main()
