"""Two coupled codes on an intercommunicator: an "ocean" group and an "atmosphere" group exchange boundary data.

Run:  mpirun -n 4 python -m mpicoll.examples.coupled_intercomm   (any N >= 2)

Coupled simulations run as two groups of ranks, each with its own
communicator for its own work, joined by an *intercommunicator* for the
coupling.  On an intercommunicator every collective moves data between the
groups, never inside one:

- ``Allreduce``: each group gets the sum of the *other* group's values (the
  ocean learns the atmosphere's total heat flux and vice versa);
- ``Bcast`` with ``root=MPI.ROOT`` on the sending rank (``MPI.PROC_NULL`` on the
  rest of its group): the other group receives; the ocean's leader sends its
  time step to every atmosphere rank;
- ``Gather`` to ``MPI.ROOT``: the root receives one block from each rank of the
  *other* group (the ocean's leader collects the atmosphere's boundary cells).

mpicoll writes each as stages (see ``mpicoll.comm.inter``): the all-reduce is a
Reduce inside each group to its leader, one swap between the two leaders, and a
Bcast inside each group.  Every result is checked against MPI's built-in
collectives on an intercommunicator of the same groups.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

CELLS = 4        # boundary cells per rank
STEPS = 3


def couple(inter: MPI.Intercomm, ocean: bool, cells: np.ndarray) -> tuple:
    """One coupling step: (the other group's total flux, the ocean's time step, the atmosphere's boundary)."""
    rank, remote = inter.Get_rank(), inter.Get_remote_size()
    total = np.empty(1)
    inter.Allreduce(np.array([cells.sum()]), total, op=MPI.SUM)
    dt = np.array([0.5 if ocean else 0.0])
    if ocean:    # the ocean's rank 0 is the root; the rest of its group passes PROC_NULL
        inter.Bcast(dt, root=MPI.ROOT if rank == 0 else MPI.PROC_NULL)
    else:        # the atmosphere receives from rank 0 of the remote (ocean) group
        inter.Bcast(dt, root=0)
    boundary = np.zeros(remote * CELLS) if ocean and rank == 0 else None
    if ocean:
        inter.Gather(None, boundary, root=MPI.ROOT if rank == 0 else MPI.PROC_NULL)
    else:
        inter.Gather(cells, None, root=0)
    return total[0], dt[0], boundary


def main() -> None:
    world = MPI.COMM_WORLD
    if world.size < 2:
        say(world, "an intercommunicator needs two groups: run with 2 or more processes")
        return
    ocean = world.rank < (world.size + 1) // 2       # the first half (the larger one) is the ocean
    color = 0 if ocean else 1
    remote_leader = (world.size + 1) // 2 if ocean else 0    # rank in world of the other group's rank 0
    # each code's own communicator, then the intercommunicator between them: mpicoll's, and MPI's to compare
    mine = mpicoll.Comm(world).Split(color, world.rank)
    inter = mine.Create_intercomm(0, mpicoll.Comm(world), remote_leader)
    plain_local = world.Split(color, world.rank)
    plain = plain_local.Create_intercomm(0, world, remote_leader, tag=11)
    say(world, f"{world.size} ranks: ocean of {(world.size + 1) // 2}, atmosphere of {world.size // 2}, "
               f"coupled by {type(inter).__name__} (an MPI.Intercomm: {isinstance(inter, MPI.Intercomm)})")

    rng = np.random.default_rng(world.rank)
    cells = rng.random(CELLS) + (10.0 if ocean else 0.0)
    same = True
    for step in range(STEPS):
        ours, theirs = couple(inter, ocean, cells), couple(plain, ocean, cells)
        same &= ours[0] == theirs[0] and ours[1] == theirs[1]
        same &= (ours[2] is None) or np.array_equal(ours[2], theirs[2])
        if world.rank == 0:
            print(f"step {step}: the ocean sees the atmosphere's flux {ours[0]:.3f}; dt = {ours[1]}; "
                  f"boundary from the atmosphere: {np.round(ours[2], 2)[:2 * CELLS]}...", flush=True)
        cells = cells + 0.1 * ours[1]
    check(world, same, "Allreduce, Bcast and Gather on the intercommunicator equal MPI's built-in")
    # objects too: each group learns the other's names
    names = inter.allgather(f"{'ocean' if ocean else 'atmosphere'}-{inter.Get_rank()}")
    check(world, names == [f"{'atmosphere' if ocean else 'ocean'}-{j}" for j in range(inter.Get_remote_size())],
          "allgather of objects gives each group the other group's objects")
    # and back to one communicator of both groups: Merge (the ocean first)
    both = inter.Merge(high=not ocean)
    check(world, isinstance(both, mpicoll.Comm) and both.Get_size() == world.size,
          "Merge gives an mpicoll.Comm of both groups")
    for comm in (both, inter, mine, plain, plain_local):
        comm.Free()


if __name__ == "__main__":
    main()
