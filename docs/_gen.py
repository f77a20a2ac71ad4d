"""Generate the documentation pages that the package draws itself.

Run by ``conf.py`` on every build (or by hand: ``python docs/_gen.py``).  It writes

* ``concepts/<primitive>.rst``: before/after tables on 4 ranks, computed with NumPy;
* ``algorithms/<collective>-<algorithm>.rst`` for every registered algorithm: the
  schedule table from :func:`mpicoll.schedules`, the cost formula, when it wins and
  a worked example run by the simulator (plus a PNG from ``python -m mpicoll draw``
  if ``docs/images/<collective>_<algorithm>_p4.png`` or ``<algorithm>_<collective>_p4.png`` exists);
* ``examples.rst``: every example with its docstring;
* ``_generated/markdown_toc.rst``: a toctree of the Markdown pages if myst-parser is there.
"""

from __future__ import annotations

import os
import pkgutil
import sys
import textwrap

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mpicoll  # noqa: E402

P = 4
LETTERS = "abcdefgh"


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _literal(text: str) -> str:
    return "::\n\n" + textwrap.indent(text.rstrip(), "    ") + "\n"


def _write(path: str, text: str) -> None:
    """Write only if changed, so that Sphinx rebuilds only what changed."""
    old = open(path).read() if os.path.exists(path) else None
    if old != text:
        with open(path, "w") as f:
            f.write(text)


# ---------------------------------------------------------------- concepts
def _state(rows: list[list[str]]) -> str:
    return "\n".join(f"rank {r}: " + "  ".join(f"{c:>11}" for c in row) for r, row in enumerate(rows))


def _blocks(r: int) -> list[str]:
    """Rank r's input: blocks a_r, b_r, c_r, d_r (one per destination rank)."""
    return [f"{LETTERS[c]}{r}" for c in range(P)]


def _sum(c: int) -> str:
    return "+".join(f"{LETTERS[c]}{r}" for r in range(P))


# name: (title, mpi4py call, torch.distributed name, what it does, lower bound, before, after)
CONCEPTS: dict[str, tuple[str, str, str, str, str, list[list[str]], list[list[str]]]] = {
    "broadcast": ("Broadcast", "comm.Bcast(buf, root=0)", "broadcast",
                  "The root's buffer is copied to every rank.  Used to start every replica of a model "
                  "from the same weights.", "ceil(log2 p) alpha + n beta",
                  [["x"] if r == 0 else ["?"] for r in range(P)], [["x"] for _ in range(P)]),
    "scatter": ("Scatter", "comm.Scatter(sendbuf, recvbuf, root=0)", "scatter",
                "The root cuts its buffer into p blocks and sends block i to rank i.",
                "ceil(log2 p) alpha + (p-1)/p n beta",
                [[LETTERS[c] for c in range(P)] if r == 0 else ["?"] for r in range(P)],
                [[LETTERS[r]] for r in range(P)]),
    "gather": ("Gather", "comm.Gather(sendbuf, recvbuf, root=0)", "gather",
               "The inverse of scatter: the root receives every rank's block, in rank order.",
               "ceil(log2 p) alpha + (p-1)/p n beta",
               [[f"x{r}"] for r in range(P)], [[f"x{q}" for q in range(P)] if r == 0 else [f"x{r}"] for r in range(P)]),
    "reduce": ("Reduce", "comm.Reduce(sendbuf, recvbuf, op=MPI.SUM, root=0)", "reduce",
               "Every rank contributes a vector; the root receives their element-wise combination "
               "(sum, max, ...).", "ceil(log2 p) alpha + n beta + (p-1)/p n gamma",
               [[f"x{r}"] for r in range(P)], [["+".join(f"x{q}" for q in range(P))] if r == 0 else ["-"]
                                              for r in range(P)]),
    "allreduce": ("All-reduce", "comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)", "all_reduce",
                  "A reduce whose result every rank receives.  The workhorse of data-parallel training: "
                  "it sums the gradients of all replicas.  It equals a reduce-scatter followed by an "
                  "all-gather, which is how the bandwidth-optimal algorithms work.",
                  "ceil(log2 p) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma",
                  [_blocks(r) for r in range(P)], [[_sum(c) for c in range(P)] for _ in range(P)]),
    "allgather": ("All-gather", "comm.Allgather(sendbuf, recvbuf)", "all_gather",
                  "Every rank contributes one block and receives all of them, in rank order (a gather "
                  "whose result every rank receives).  FSDP/ZeRO use it to rebuild sharded parameters.",
                  "ceil(log2 p) alpha + (p-1)/p n beta",
                  [[f"x{r}"] for r in range(P)], [[f"x{q}" for q in range(P)] for _ in range(P)]),
    "reduce_scatter": ("Reduce-scatter", "comm.Reduce_scatter_block(sendbuf, recvbuf, op=MPI.SUM)",
                       "reduce_scatter",
                       "Every rank contributes p blocks; rank i receives the combination of everybody's "
                       "block i.  FSDP/ZeRO use it for gradients: each rank keeps the sum of its own shard.",
                       "ceil(log2 p) alpha + (p-1)/p n (beta + gamma)",
                       [_blocks(r) for r in range(P)], [[_sum(r)] for r in range(P)]),
    "alltoall": ("All-to-all", "comm.Alltoall(sendbuf, recvbuf)  (Alltoallv for uneven counts)", "all_to_all",
                 "Every rank sends a distinct block to every rank: block j of rank i becomes block i of "
                 "rank j, a transpose.  Mixture-of-experts layers use it to send tokens to their experts.",
                 "ceil(log2 p) alpha + (p-1)/p n beta",
                 [_blocks(r) for r in range(P)], [[f"{LETTERS[r]}{q}" for q in range(P)] for r in range(P)]),
}


def concept_page(name: str) -> str:
    title, call, torch_name, what, bound, before, after = CONCEPTS[name]
    text = _title(title) + "\n" + what + "\n\n"
    text += f"mpi4py / mpicoll: ``{call}``; PyTorch: ``torch.distributed.{torch_name}``.\n\n"
    text += f"Least possible time (any algorithm; n = bytes of the whole vector): {bound}.\n\n"
    blocky = name in ("allreduce", "reduce_scatter", "alltoall")
    legend = "letter = block, digit = whose data" if blocky else "xr = rank r's data, ? or - = undefined"
    text += f"Before, on {P} ranks ({legend}):\n\n"
    text += _literal(_state(before)) + "\nAfter:\n\n" + _literal(_state(after))
    algs = mpicoll.algorithms(name) if name in mpicoll.collectives() else []
    if algs:
        text += "\nAlgorithms in mpicoll: " + ", ".join(f":doc:`../algorithms/{name}-{a}`" for a in algs) + ".\n"
    return text


# ---------------------------------------------------------------- algorithms
# (collective, algorithm): (cost, when it wins, extra prose)
ALGORITHM_NOTES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("allreduce", "ring"): (
        "2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma",
        "Large messages: its bandwidth term is the lower bound.  Its latency grows linearly with p, "
        "so on many ranks with small messages every tree beats it (see the ``tree_vs_ring`` example).",
        "The vector is cut into p chunks.  Reduce-scatter: in step s rank r sends chunk (r-s) mod p to "
        "rank r+1 and adds the chunk it receives to its own; after p-1 steps rank r owns the full sum of "
        "chunk (r+1) mod p.  All-gather: the finished chunks go around the ring once more."),
    ("allreduce", "recursive_doubling"): (
        "ceil(log2 p) alpha + n ceil(log2 p) beta + n ceil(log2 p) gamma",
        "Small messages: the fewest rounds, but every round moves the whole vector.",
        "In step k rank r exchanges its whole partial sum with rank r XOR 2^k and adds what it receives. "
        "For p not a power of two the extra ranks first fold their data into a partner and get the "
        "result back at the end."),
    ("allreduce", "rabenseifner"): (
        "2 log2 p alpha + 2 (p-1)/p n beta + (p-1)/p n gamma  (p a power of two)",
        "Medium and large messages: logarithmic latency and the optimal bandwidth term.  MPICH and Open "
        "MPI use it above a few KiB.",
        "Recursive halving performs a reduce-scatter (each step exchanges half of what is left with a "
        "partner at distance p/2, p/4, ...), recursive doubling then performs the all-gather."),
    ("allreduce", "binomial"): (
        "2 ceil(log2 p) alpha + 2 ceil(log2 p) n beta + ceil(log2 p) n gamma",
        "Rarely: it is the simple reduce-then-broadcast, kept as a reference and for ordered reductions.",
        "A binomial-tree reduce to rank 0 followed by a binomial-tree broadcast from rank 0."),
    ("allreduce", "double_binary_tree"): (
        "about 4 ceil(log2 p) alpha + pipeline fill + 2 n beta + n gamma",
        "Small and medium messages on many ranks (NCCL's tree algorithm): latency logarithmic in p, "
        "bandwidth within a constant of the ring's.",
        "Two complementary binary trees (a rank that is interior in one is a leaf in the other); each "
        "half of the data is reduced up one tree and broadcast down it, in pipelined segments."),
    ("allreduce", "linear"): (
        "2(p-1) alpha + 2(p-1) n beta + (p-1) n gamma",
        "Never for speed: it is the obvious algorithm (everyone sends to rank 0, rank 0 sends the "
        "result back), kept as the reference every other algorithm is compared with.",
        "Rank 0 receives from every rank in rank order, reduces, and sends the result to every rank."),
}


def worked_example(collective: str, algorithm: str) -> str:
    """Inputs and outputs of the simulator on P ranks, or '' if the collective needs other inputs."""
    try:
        from mpicoll.exec.simulate import simulate

        inputs = [np.arange(P, dtype=np.float64) + 10 * r for r in range(P)]
        outputs = simulate(collective, algorithm, inputs)
    except Exception:  # noqa: BLE001  (a collective whose simulator needs other arguments)
        return ""
    lines = [f"rank {r}: in {x.tolist()}  ->  out {y.tolist()}" for r, (x, y) in enumerate(zip(inputs, outputs))]
    return ("\nWorked example\n--------------\n\nThe simulator (:func:`mpicoll.exec.simulate.simulate`) runs the "
            f"schedule on {P} ranks in one process, with op = SUM:\n\n" + _literal("\n".join(lines)))


def algorithm_page(docs: str, collective: str, algorithm: str) -> str:
    alg = __import__("mpicoll.registry", fromlist=["get"]).get(collective, algorithm)
    cost, wins, how = ALGORITHM_NOTES.get((collective, algorithm), ("", "", ""))
    text = _title(f"{collective} / {algorithm}") + "\n" + (alg.summary or "") + "\n\n"
    if how:
        text += how + "\n\n"
    if cost:
        text += f"**Cost:** {cost}.\n\n**When it wins:** {wins}\n\n"
    text += ("**Reduction order:** keeps rank order (safe for non-commutative ops) at p = 4: "
             f"{'yes' if alg.keeps_order(P) else 'no'}.\n\n")
    text += f"Schedule\n--------\n\n``print(mpicoll.schedules({collective!r}, {algorithm!r}, {P}))``:\n\n"
    try:
        text += _literal(str(mpicoll.schedules(collective, algorithm, P)))
    except TypeError:  # needs parameters (root, segments) that have defaults elsewhere
        text += _literal(str(mpicoll.schedules(collective, algorithm, P, root=0)))
    for image in (f"images/{collective}_{algorithm}_p{P}.png", f"images/{algorithm}_{collective}_p{P}.png"):
        if os.path.exists(os.path.join(docs, image)):      # drawn by ``python -m mpicoll draw``
            text += f"\nSpace-time diagram (``python -m mpicoll draw``):\n\n.. image:: ../{image}\n\n"
            break
    if (collective, algorithm) == ("allreduce", "ring"):
        from mpicoll.examples.allreduce import ring_walkthrough

        text += "\nThe same schedule as chunk labels (ring_walkthrough):\n\n" + _literal(ring_walkthrough(P))
    return text + worked_example(collective, algorithm)


# ---------------------------------------------------------------- examples
def examples_page(docs: str) -> str:
    path = os.path.join(os.path.dirname(docs), "mpicoll", "examples")
    names = sorted(m.name for m in pkgutil.iter_modules([path]) if not m.name.startswith("_"))
    text = _title("Examples") + textwrap.dedent("""
        Every example runs as ``mpirun -n N python -m mpicoll.examples.NAME`` (or
        ``python -m mpicoll.launch -n N -m mpicoll.examples.NAME``), prints what a learner
        should see, and checks its own result: it exits with an error on every rank if the
        check fails.  ``python tests/run_all.py`` runs all of them at N = 4 and N = 2.

        """)
    for name in names:
        text += "\n" + _title(name, "-") + f"\n.. automodule:: mpicoll.examples.{name}\n   :members:\n"
    return text


def generate(docs: str, markdown: bool = False) -> None:
    """Write every generated page under ``docs``."""
    os.makedirs(os.path.join(docs, "_generated"), exist_ok=True)
    for name in CONCEPTS:
        _write(os.path.join(docs, "concepts", f"{name}.rst"), concept_page(name))
    for collective in mpicoll.collectives():
        for algorithm in mpicoll.algorithms(collective):
            _write(os.path.join(docs, "algorithms", f"{collective}-{algorithm}.rst"),
                   algorithm_page(docs, collective, algorithm))
    _write(os.path.join(docs, "examples.rst"), examples_page(docs))
    pages = sorted(f[:-3] for f in os.listdir(docs) if f.endswith(".md")) if markdown else []
    toc = ".. toctree::\n   :maxdepth: 2\n   :caption: More\n\n" + "".join(f"   /{p}\n" for p in pages)
    _write(os.path.join(docs, "_generated", "markdown_toc.rst"), toc if pages else "..\n   (no Markdown pages)\n")


if __name__ == "__main__":
    generate(os.path.dirname(os.path.abspath(__file__)))
