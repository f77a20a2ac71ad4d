"""Pipeline parallelism (GPipe): micro-batches flow through stages with Send/Recv.

Run:  mpirun -n 4 python -m mpicoll.examples.pipeline_parallel   (any N >= 1: one stage per rank)

The model is N layers h <- tanh(h W_s), one layer (a *stage*) per rank.  A batch
is cut into M micro-batches.  Forward: stage s receives micro-batch m's
activations from stage s - 1, applies its layer, and sends the result to stage
s + 1; the last stage computes the loss.  Backward runs the other way: the
gradient with respect to the activations travels from s + 1 to s, and every
stage adds up its weight gradient over the micro-batches (GPipe applies the
update once per batch, so the result is exactly full-batch training).

Messages only go forward then only backward along a chain, so plain blocking
Send/Recv cannot deadlock.  Stage s starts micro-batch m at clock tick s + m:
the first and last N - 1 ticks leave stages idle, the "bubble", a fraction
(N-1)/(M+N-1) of the time.  Rank 0 prints the schedule.  The check: every
stage's weight gradient equals the one of the whole model in one process.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.examples._common import check, say

BATCH, MICRO, WIDTH = 16, 4, 8


def gpipe_chart(stages: int, micro: int) -> list[str]:
    """The forward then backward schedule: which micro-batch each stage works on at each tick."""
    ticks = micro + stages - 1
    lines = []
    for s in range(stages):
        fwd = ["F" + str(t - s) if 0 <= t - s < micro else " . " for t in range(ticks)]
        bwd = ["B" + str(micro - 1 - (t - (stages - 1 - s))) if 0 <= t - (stages - 1 - s) < micro else " . "
               for t in range(ticks)]
        lines.append(f"stage {s}: " + " ".join(f"{c:>3}" for c in fwd + bwd))
    return lines


def main() -> None:
    comm = mpicoll.Comm(MPI.COMM_WORLD)
    s, n = comm.rank, comm.size
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH) for _ in range(n)]   # all, for the check
    x, target = rng.standard_normal((BATCH, WIDTH)), rng.standard_normal((BATCH, WIDTH))
    w = weights[s]                                          # this stage's layer
    micro_x, micro_t = np.array_split(x, MICRO), np.array_split(target, MICRO)
    inputs, outputs, grad_w = [], [], np.zeros_like(w)
    for m in range(MICRO):                                  # forward: all micro-batches
        h = micro_x[m] if s == 0 else np.empty((len(micro_x[m]), WIDTH))
        if s > 0:
            comm.Recv(h, source=s - 1, tag=m)
        out = np.tanh(h @ w)
        inputs.append(h)
        outputs.append(out)
        if s < n - 1:
            comm.Send(out, dest=s + 1, tag=m)
    for m in reversed(range(MICRO)):                        # backward: in reverse order
        if s == n - 1:
            g = 2 * (outputs[m] - micro_t[m])               # d(sum of squared errors)/d output
        else:
            g = np.empty_like(outputs[m])
            comm.Recv(g, source=s + 1, tag=m)
        g = g * (1 - outputs[m] ** 2)                       # back through tanh
        grad_w += inputs[m].T @ g
        if s > 0:
            comm.Send(g @ w.T, dest=s - 1, tag=m)

    # the reference: the whole model, whole batch, in one process
    hs = [x]
    for wl in weights:
        hs.append(np.tanh(hs[-1] @ wl))
    g = 2 * (hs[-1] - target)
    for layer in reversed(range(n)):
        g = g * (1 - hs[layer + 1] ** 2)
        if layer == s:
            expected = hs[layer].T @ g
        g = g @ weights[layer].T
    say(comm, f"{n} stages, batch {BATCH} in {MICRO} micro-batches; bubble = (N-1)/(M+N-1) = "
              f"{(n - 1) / (MICRO + n - 1):.0%} of the ticks", *gpipe_chart(n, MICRO))
    check(comm, bool(np.allclose(grad_w, expected, rtol=1e-12, atol=1e-12)),
          "each stage's accumulated weight gradient equals the single-process gradient")


if __name__ == "__main__":
    main()
