"""torch.distributed, call by call, in mpi4py and mpicoll: each pair run and checked here.

Run:  mpirun -n 4 python -m mpicoll.examples.torch_mapping   (any N >= 2; no torch needed)

A PyTorch user knows ``torch.distributed``; this example runs, for each of its
calls, the mpi4py/mpicoll call that does the same thing on NumPy arrays, checks
the result on every rank, and prints the two side by side (rank 0, in the order
of a first torch.distributed tutorial):

* setup: ``init_process_group`` -> MPI starts with the program
  (``from mpi4py import MPI``), ``mpicoll.Comm(MPI.COMM_WORLD)``;
  ``get_rank()``/``get_world_size()`` -> ``comm.rank``/``comm.size``;
* point to point: ``send``/``recv`` -> ``Send``/``Recv``; ``isend``/``irecv``
  -> ``Isend``/``Irecv`` and ``Wait``;
* groups: ``new_group(ranks)`` -> ``comm.Create_group(comm.group.Incl(ranks))``
  (every rank calls it; ranks outside get ``MPI.COMM_NULL``), or ``Split``;
* collectives: ``all_reduce``, ``broadcast``, ``reduce``, ``all_gather``
  (``all_gather_into_tensor``), ``gather``, ``scatter``, ``reduce_scatter``
  (``reduce_scatter_tensor``), ``all_to_all`` (``all_to_all_single``), ``barrier``.

The differences that matter: torch's ops work in place on tensors and return
a work handle with ``async_op=True``; mpi4py's take a send and a receive
buffer (``MPI.IN_PLACE`` for in place) and the nonblocking forms start with I
and return a request.  ``examples/torch_distributed.py`` runs the torch side
itself, on mpicoll's ``torch.distributed`` backend and on Gloo.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)                     # init_process_group(backend=...)
    rank, size = comm.rank, comm.size                        # get_rank(), get_world_size()
    rows: list[tuple[str, str]] = []

    def row(torch_call: str, mpi_call: str, ok: bool) -> None:
        check(comm, ok, f"{torch_call:32s} == {mpi_call}")
        rows.append((torch_call, mpi_call))

    # point to point: a token around the ring
    token = np.array([float(rank)])
    got = np.empty(1)
    right, left = (rank + 1) % size, (rank - 1) % size
    if rank % 2 == 0:                                        # even ranks send first: no deadlock
        comm.Send(token, dest=right)
        comm.Recv(got, source=left)
    else:
        comm.Recv(got, source=left)
        comm.Send(token, dest=right)
    row("dist.send / dist.recv", "comm.Send / comm.Recv", got[0] == left)
    reqs = [comm.Irecv(got, source=left), comm.Isend(token, dest=right)]
    MPI.Request.Waitall(reqs)
    row("dist.isend / dist.irecv + wait()", "comm.Isend / comm.Irecv + Waitall", got[0] == left)

    # collectives on a vector x_r = [r, r, r, r] (torch: a tensor, changed in place)
    x = np.full(4, float(rank))
    total = size * (size - 1) / 2
    y = x.copy()
    comm.Allreduce(MPI.IN_PLACE, y, op=MPI.SUM)
    row("dist.all_reduce(t)", "comm.Allreduce(MPI.IN_PLACE, t)", bool(np.all(y == total)))
    y = x.copy()
    comm.Bcast(y, root=0)
    row("dist.broadcast(t, src=0)", "comm.Bcast(t, root=0)", bool(np.all(y == 0)))
    y = np.empty(4)
    comm.Reduce(x, y, op=MPI.SUM, root=0)
    row("dist.reduce(t, dst=0)", "comm.Reduce(x, y, root=0)", rank != 0 or bool(np.all(y == total)))
    out = np.empty((size, 4))
    comm.Allgather(x, out)
    row("dist.all_gather_into_tensor", "comm.Allgather(x, out)", bool(np.all(out[:, 0] == np.arange(size))))
    out = np.empty((size, 4)) if rank == 0 else None
    comm.Gather(x, out, root=0)
    row("dist.gather(t, gather_list, dst=0)", "comm.Gather(x, out, root=0)",
        rank != 0 or bool(np.all(out[:, 0] == np.arange(size))))
    parts = np.arange(size * 2, dtype=float).reshape(size, 2) if rank == 0 else None
    mine = np.empty(2)
    comm.Scatter(parts, mine, root=0)
    row("dist.scatter(t, scatter_list, src=0)", "comm.Scatter(parts, mine, root=0)",
        bool(np.all(mine == [2 * rank, 2 * rank + 1])))
    blocks = np.arange(size, dtype=float) + 10 * rank        # block j goes to rank j
    mine = np.empty(1)
    comm.Reduce_scatter_block(blocks, mine, op=MPI.SUM)
    row("dist.reduce_scatter_tensor", "comm.Reduce_scatter_block", mine[0] == size * rank + 10 * total)
    back = np.empty(size)
    comm.Alltoall(blocks, back)
    row("dist.all_to_all_single", "comm.Alltoall", bool(np.all(back == rank + 10 * np.arange(size))))
    comm.Barrier()
    row("dist.barrier()", "comm.Barrier()", True)

    # groups: new_group([0, 2, 4, ...]); every rank calls, the others get COMM_NULL
    evens = list(range(0, size, 2))
    sub = comm.Create_group(comm.group.Incl(evens))
    if sub != MPI.COMM_NULL:
        s = np.array([float(rank)])
        sub.Allreduce(MPI.IN_PLACE, s)
        ok = s[0] == sum(evens)
        sub.Free()
    else:
        ok = rank % 2 == 1
    row("dist.new_group([0, 2, ...]) + all_reduce", "comm.Create_group(group.Incl) + Allreduce", bool(ok))
    # async: work = dist.all_reduce(t, async_op=True); work.wait()
    y = x.copy()
    req = comm.Iallreduce(MPI.IN_PLACE, y)
    req.Wait()
    row("dist.all_reduce(t, async_op=True).wait()", "comm.Iallreduce(MPI.IN_PLACE, t).Wait()",
        bool(np.all(y == total)))

    say(comm, f"\n{'torch.distributed':42s} mpi4py / mpicoll (each checked above on {size} ranks)",
        *(f"{t:42s} {m}" for t, m in rows))


if __name__ == "__main__":
    main()
