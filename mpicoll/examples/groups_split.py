"""Process groups: two sub-communicators each all-reduce, then the results are combined.

Run:  mpirun -n 4 python -m mpicoll.examples.groups_split   (any N >= 2)

``Split(color, key)`` cuts a communicator into groups, one per colour; in
PyTorch this is ``torch.distributed.new_group(ranks)``.  Here ranks 0..N/2-1
form group A and the others group B.  Each group sums its members' numbers with
an all-reduce on its own communicator (the groups run at the same time and
cannot see each other's messages).  Then the "leaders" (rank 0 of each group)
form a third communicator, add the two group sums, and each leader broadcasts
the total within its group: the result equals one all-reduce over everyone.
The same group can also be made from an explicit rank list with
``Group.Incl`` + ``Create_group``, which is closer to ``new_group``.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say


def main() -> None:
    world = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = world.rank, world.size
    if size < 2:
        raise SystemExit("groups_split needs at least 2 ranks")
    x = np.array([rank + 1.0, 10.0 * (rank + 1)])
    color = 0 if rank < size // 2 else 1
    group = world.Split(color=color, key=rank)             # a mpicoll.Comm again
    part = np.empty_like(x)
    group.Allreduce(x, part, op=MPI.SUM)
    print(f"rank {rank}: group {'AB'[color]} rank {group.rank}/{group.size}, group sum {part}", flush=True)

    # the same group from an explicit rank list, like torch.distributed.new_group(ranks)
    members = list(range(size // 2)) if color == 0 else list(range(size // 2, size))
    same = world.Create_group(world.Get_group().Incl(members))
    check(world, same.size == group.size and MPI.Group.Compare(same.Get_group(), group.Get_group()) == MPI.IDENT,
          "Split by colour and Create_group(Incl(ranks)) make the same group")
    same.Free()

    # leaders combine the two group sums, then each leader broadcasts inside its group
    leaders = world.Split(color=0 if group.rank == 0 else MPI.UNDEFINED, key=rank)
    total = part.copy()
    if leaders != MPI.COMM_NULL:
        leaders.Allreduce(part, total, op=MPI.SUM)
        leaders.Free()
    group.Bcast(total, root=0)
    expected = np.empty_like(x)
    MPI.COMM_WORLD.Allreduce(x, expected, op=MPI.SUM)      # the built-in over everyone
    say(world, f"combined total {total}; one all-reduce over the world gives {expected}")
    check(world, bool(np.array_equal(total, expected)), "group sums combined by the leaders equal the world sum")
    group.Free()


if __name__ == "__main__":
    main()
