"""Hybrid parallelism: a data x tensor x pipeline grid of process groups, each group's collectives shown.

Run:  mpirun -n 8 python -m mpicoll.examples.hybrid_parallel   (any N >= 1; 8 gives the 2 x 2 x 2 grid)

Large models combine three kinds of parallelism, each with its own process
groups (Megatron-LM, DeepSpeed):

* tensor parallelism (TP): the ranks of a TP group hold slices of the same
  layer's weights and all-reduce their partial outputs in every layer;
* pipeline parallelism (PP): the stages of a PP group hold consecutive layers
  and pass activations forward with point-to-point messages;
* data parallelism (DP): the replicas of a DP group hold the same parameters,
  see different data, and all-reduce their gradients.

The N ranks form a grid DP x PP x TP (``MPI.Compute_dims``: 2 x 2 x 2 for 8,
shapes such as 1 x 2 x 2 for 4 or 3 x 1 x 1 for 3) with the TP index varying
fastest, as Megatron-LM lays them out (TP groups inside a node).  ``Split``
makes each rank's three groups.  One "step" of a toy model ``y = sum of
stages(x)`` then runs every kind of communication once, each on its own group:

1. TP: every rank holds a slice of a layer; ``Allreduce`` in the TP group
   completes the layer's output (each TP rank adds its slice's part);
2. PP: the stages pass the activation forward with ``Send``/``Recv`` in the PP
   group, stage by stage;
3. DP: the replicas ``Allreduce`` their gradients (here: their loss) in the DP
   group and divide by the DP size.

Rank 0 prints the grid, every rank's coordinates and groups (gathered, in rank
order), and each group's result; every rank checks its results against the
same arithmetic done without any communication.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say


def grid(size: int) -> tuple[int, int, int]:
    """(dp, pp, tp) with dp * pp * tp = size: MPI's balanced factorisation, largest factor to DP."""
    dims = sorted(MPI.Compute_dims(size, 3), reverse=True)
    return dims[0], dims[1], dims[2]


def coordinates(rank: int, pp: int, tp: int) -> tuple[int, int, int]:
    """(dp index, pp stage, tp index) of ``rank``: TP varies fastest, then PP, then DP."""
    return rank // (pp * tp), (rank // tp) % pp, rank % tp


def layer_part(dp: int, stage: int, t: int, x: float) -> float:
    """What TP rank ``t`` of stage ``stage`` contributes to the stage's output (its slice of the weights)."""
    return (t + 1) * (stage + 1) * x + dp


def stage_output(dp: int, stage: int, tp: int, x: float) -> float:
    """A whole stage's output: the sum of its TP slices' parts (what the TP all-reduce completes)."""
    return sum(layer_part(dp, stage, t, x) for t in range(tp))


def main() -> None:
    world = mpicoll.Comm(MPI.COMM_WORLD)
    rank, size = world.rank, world.size
    dp_size, pp_size, tp_size = grid(size)
    d, s, t = coordinates(rank, pp_size, tp_size)
    # the three groups: colour = the coordinates that stay fixed, key = the one that varies
    tp_group = world.Split(color=d * pp_size + s, key=t)
    pp_group = world.Split(color=d * tp_size + t, key=s)
    dp_group = world.Split(color=s * tp_size + t, key=d)
    say(world, f"{size} ranks as a DP x PP x TP grid of {dp_size} x {pp_size} x {tp_size} "
               "(TP fastest: TP groups are neighbouring ranks)")
    members = {name: world.gather(comm.allgather(rank)) for name, comm in
               (("TP", tp_group), ("PP", pp_group), ("DP", dp_group))}
    coords = world.gather((d, s, t))
    if rank == 0:
        for r in range(size):
            print(f"  rank {r}: dp {coords[r][0]}, stage {coords[r][1]}, tp {coords[r][2]};  TP group "
                  f"{members['TP'][r]}, PP group {members['PP'][r]}, DP group {members['DP'][r]}")

    # 1.-2. forward: stage 0 starts from x = its DP index + 1; each stage completes its layer over TP
    x = np.array([float(d + 1)])
    if s > 0:
        pp_group.Recv(x, source=s - 1)                              # PP: the previous stage's activation
    part = np.array([layer_part(d, s, t, float(x[0]))])
    tp_group.Allreduce(MPI.IN_PLACE, part, op=MPI.SUM)              # TP: the whole layer's output
    out = part
    if s < pp_size - 1:
        pp_group.Send(out, dest=s + 1)                              # PP: on to the next stage
    expected = float(d + 1)
    for stage in range(s + 1):
        expected = stage_output(d, stage, tp_size, expected)
    check(world, out[0] == expected, "TP all-reduce + PP send/recv: each stage's output equals the whole model's")

    # the last stage has the model's output; the "loss" is shared down the pipeline, then averaged over DP
    loss = np.array([out[0]])
    pp_group.Bcast(loss, root=pp_size - 1)
    dp_group.Allreduce(MPI.IN_PLACE, loss, op=MPI.SUM)              # DP: average over the replicas
    loss /= dp_size
    finals = []
    for dd in range(dp_size):
        v = float(dd + 1)
        for stage in range(pp_size):
            v = stage_output(dd, stage, tp_size, v)
        finals.append(v)
    outputs = world.gather(float(out[0]))
    if rank == 0:
        print("\nper group, one step:")
        for r in range(size):
            dd, ss, tt = coords[r]
            print(f"  rank {r}: TP Allreduce -> stage {ss} output {outputs[r]:g}"
                  + (f"; PP Send to stage {ss + 1}" if ss < pp_size - 1 else "; last stage")
                  + f"; DP-averaged loss {np.mean(finals):g}")
    check(world, bool(np.isclose(loss[0], np.mean(finals))), "DP all-reduce: every rank has the replicas' mean loss")
    for comm in (tp_group, pp_group, dp_group):
        comm.Free()


if __name__ == "__main__":
    main()
