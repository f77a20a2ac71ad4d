"""A Sphinx extension: the pages the package writes about itself, rendered at build time.

Directives (used by the small pages tracked in ``docs/``; nothing is written
into the source tree, figures go to the build directory):

* ``.. mpicoll-concept:: NAME``: before/after tables on 4 ranks, computed with NumPy,
  and a drawing of one algorithm of the collective;
* ``.. mpicoll-algorithms:: COLLECTIVE``: one section per registered algorithm, made
  only from its docstring (idea, loop bounds, cost, when it wins, limitations) and
  generated material: the schedule table, a per-round table of the contributions
  each rank holds, a figure from :func:`mpicoll.analysis.draw.draw` and a worked example
  run by the simulator;
* ``.. mpicoll-examples::``: every example with its docstring.
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import textwrap
from typing import Any

import numpy as np
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import mpicoll
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec

P = 4
LETTERS = "abcdefgh"


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _literal(text: str) -> str:
    return ".. code-block:: text\n\n" + textwrap.indent(text.rstrip(), "    ") + "\n"


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
    text += (f"Least possible time (any algorithm; n = bytes of the whole vector): {bound} "
             "(alpha, beta, gamma: the :ref:`glossary <glossary>`).\n\n")
    blocky = name in ("allreduce", "reduce_scatter", "alltoall")
    legend = "letter = block, digit = whose data" if blocky else "xr = rank r's data, ? or - = undefined"
    text += f"Before, on {P} ranks ({legend}):\n\n"
    text += _literal(_state(before)) + "\nAfter:\n\n" + _literal(_state(after))
    key = COLLECTIVE_OF.get(name, name)
    algs = mpicoll.algorithms(key) if key in mpicoll.collectives() else []
    if algs:
        text += ("\nAlgorithms in mpicoll: " + ", ".join(f":ref:`{a} <{key}-{a}>`" for a in algs)
                 + f" (:doc:`../algorithms/{key}`).\n")
    return text


# ---------------------------------------------------------------- algorithms
COLLECTIVE_OF = {"broadcast": "bcast", "reduce_scatter": "reduce_scatter_block"}
# the algorithm drawn on each concept page
CONCEPT_FIGURE = {"broadcast": "binomial", "scatter": "binomial", "gather": "binomial", "reduce": "binomial",
                  "allreduce": "ring", "allgather": "ring", "reduce_scatter": "ring", "alltoall": "pairwise"}
PARTS = ("Cost:", "When it wins:")    # every algorithm's docstring has these paragraphs (tests/unit check it)


def docstring(collective: str, algorithm: str) -> str:
    """The algorithm's docstring, its labelled paragraphs in bold."""
    doc = inspect.cleandoc(registry.get(collective, algorithm).build.__doc__ or "")
    for label in (*PARTS, "Limitations:"):
        doc = doc.replace(f"\n{label}", f"\n**{label}**")
    return doc


def state_table(collective: str, algorithm: str, params: dict[str, Any]) -> str:
    """After each round, per rank, what each block holds: for a reduction the ranks whose
    contributions it holds (``0-3`` = ranks 0 to 3), else the rank it came from."""
    from mpicoll.analysis.trace import holdings, latest, trace

    tr = trace(collective, algorithm, P, **params)
    nblocks = tr.schedules[0].nblocks
    reduces = get_spec(collective).reduces

    def span(ranks: tuple[int, ...]) -> str:
        if not ranks:
            return "."
        rs = sorted(set(ranks))
        if rs == list(range(rs[0], rs[-1] + 1)) and len(rs) > 2:
            return f"{rs[0]}-{rs[-1]}"
        return ",".join(map(str, rs))

    rows = []
    for t, states in enumerate(tr.states):
        cells = []
        for r in range(P):
            if reduces:
                cells.append(" ".join(span(h) for h in holdings(states[r], nblocks)))
            else:
                cells.append(" ".join(f"{v[0]}:{span(v[1])}" if v else "." for v in latest(states[r], nblocks)))
        rows.append(("start" if t == 0 else f"after {t - 1}", cells))
    width = max(len(f"rank {P - 1}"), *(len(c) for _, cells in rows for c in cells)) + 2
    head = f"{'':<9}" + "".join(f"{f'rank {r}':<{width}}" for r in range(P))
    lines = [head] + [f"{label:<9}" + "".join(f"{c:<{width}}" for c in cells) for label, cells in rows]
    return "\n".join(lines)


def worked_example(collective: str, algorithm: str, params: dict[str, Any]) -> str:
    """Inputs and outputs of the simulator on P ranks, or '' if the collective needs other inputs."""
    try:
        from mpicoll.analysis.simulate import simulate

        inputs = [np.arange(P, dtype=np.float64) + 10 * r for r in range(P)]
        outputs = simulate(collective, algorithm, inputs, **params)
    except Exception:  # noqa: BLE001  (a collective whose simulator needs other arguments)
        return ""
    lines = [f"rank {r}: in {x.tolist()}  ->  out {y.tolist()}" for r, (x, y) in enumerate(zip(inputs, outputs))]
    op = ", with op = SUM" if get_spec(collective).reduces else ""
    return ("\n**Worked example.** The simulator (:func:`mpicoll.analysis.simulate.simulate`) runs the "
            f"schedule on {P} ranks in one process{op}:\n\n" + _literal("\n".join(lines)))


def figure(outdir: str, collective: str, algorithm: str, params: dict[str, Any], scroll: bool = False) -> str:
    """Draw the algorithm at P ranks into ``outdir/_mpicoll`` (once) and return raw HTML showing it."""
    from mpicoll.analysis.draw import draw

    name = f"{collective}-{algorithm}-p{P}.png"
    folder = os.path.join(outdir, "_mpicoll")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        draw(collective, algorithm, P, path, **params)
    return (".. raw:: html\n\n"
            f"   <figure class=\"mpicoll-figure{' mpicoll-scroll' if scroll else ''}\">"
            f"<a href=\"{{root}}_mpicoll/{name}\"><img src=\"{{root}}_mpicoll/{name}\" "
            f"alt=\"{collective} {algorithm} space-time diagram\"></a>"
            f"<figcaption>python -m mpicoll draw {collective} {algorithm} -p {P} -o {name} "
            "(click for full size)</figcaption></figure>\n\n")


PARAMETERS = {"root": "the root rank (0 <= root < p)",
              "segments": "how many pieces the vector is pipelined in (auto chooses it from the message size)",
              "nodes": "which ranks share a node (from the hosts, or ``MPICOLL_NODE_SIZE``)",
              "topology": "the communicator's virtual topology (its neighbours, in MPI's order)"}


def properties(collective: str, algorithm: str) -> str:
    """The registry's declared properties of the algorithm, in words (the unit tests check each one)."""
    alg = registry.get(collective, algorithm)
    items = []
    if get_spec(collective).reduces:
        items.append(f"Rank order of the reduction: {alg.order_claim()}.")
    if alg.rotates:
        items.append("Rotation: rank r's schedule is rank 0's with every peer and block shifted by r, so "
                     "the cost model costs rank 0 alone.")
    if alg.scratch:
        items.append("Scratch buffers: " + "; ".join(f"``{name}``, {decl.role}" for name, decl in alg.scratch.items())
                     + ".")
    else:
        items.append("Scratch buffers: none (it works in the caller's buffers).")
    if alg.params:
        items.append("Parameters: " + "; ".join(f"``{p}``, {PARAMETERS[p]}" for p in alg.params) + ".")
    return ("**Properties** (declared in the registry; the unit tests prove each symbolically):\n\n"
            + "\n".join(f"* {item}" for item in items))


def trees_figure(outdir: str, size: int) -> str:
    """The double binary tree's two trees at ``size`` ranks, drawn as trees (once per build)."""
    from mpicoll.analysis.draw import draw_trees

    name = f"double-binary-trees-p{size}.png"
    path = os.path.join(outdir, "_mpicoll", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        draw_trees(size, path)
    return (".. raw:: html\n\n"
            f"   <figure class=\"mpicoll-figure\"><img src=\"{{root}}_mpicoll/{name}\" "
            f"alt=\"the two trees of the double binary tree at p = {size}\">"
            f"<figcaption>The two trees at p = {size} (mpicoll.analysis.draw.draw_trees({size}, path))"
            "</figcaption></figure>\n\n")


def example_params(alg: Any) -> dict[str, Any]:
    """The parameters a page shows an algorithm with: root 0; a neighbourhood's topology: a 2 x 2 grid,
    periodic along its rows only (so both a doubled neighbour and MPI.PROC_NULL edges show)."""
    from mpicoll.ir.topology import Cart

    params: dict[str, Any] = {"root": 0} if "root" in alg.params else {}
    if "topology" in alg.params:
        params["topology"] = Cart((2, P // 2), (False, True))
    return params


def algorithm_section(outdir: str, collective: str, algorithm: str) -> str:
    alg = registry.get(collective, algorithm)
    params = example_params(alg)
    text = f".. _{collective}-{algorithm}:\n\n" + _title(algorithm, "-") + "\n" + docstring(collective, algorithm)
    text += "\n\n"
    text += properties(collective, algorithm) + "\n\n"
    text += figure(outdir, collective, algorithm, params)
    if algorithm == "double_binary_tree":
        text += trees_figure(outdir, 8)
    args = "".join(f", {k}={v!r}" for k, v in params.items())
    text += f"**Schedule** (``print(mpicoll.schedules({collective!r}, {algorithm!r}, {P}{args}))``):\n\n"
    text += _literal(str(mpicoll.schedules(collective, algorithm, P, **params)))
    what = ("the ranks whose contributions each block holds" if get_spec(collective).reduces
            else "block:origin rank of each block position (. = nothing yet)")
    text += f"\n**State after each round** ({what}; from :mod:`mpicoll.analysis.trace`):\n\n"
    text += _literal(state_table(collective, algorithm, params))
    return text + worked_example(collective, algorithm, params) + "\n"


# ---------------------------------------------------------------- examples
def examples_page() -> str:
    path = os.path.join(os.path.dirname(mpicoll.__file__), "examples")
    names = sorted(m.name for m in pkgutil.iter_modules([path]) if not m.name.startswith("_"))
    text = textwrap.dedent("""
        Every example runs as ``mpirun -n N python -m mpicoll.examples.NAME`` (or
        ``python -m mpicoll.launch -n N -m mpicoll.examples.NAME``), prints what a learner
        should see, and checks its own result: it exits with an error on every rank if the
        check fails.  ``python tests/run_all.py`` runs all of them at N = 4 and N = 2.

        """)
    for name in names:
        text += "\n" + _title(name, "-") + f"\n.. automodule:: mpicoll.examples.{name}\n   :members:\n"
    return text


class _Rst(SphinxDirective):
    """Parse generated reStructuredText in place."""

    def render(self, text: str) -> list[nodes.Node]:
        depth = self.env.docname.count("/")
        text = text.replace("{root}", "../" * depth)
        node = nodes.section()
        nested_parse_with_titles(self.state, StringList(text.splitlines(), source=f"<mpicoll {self.name}>"), node)
        return node.children


class ConceptDirective(_Rst):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        key = COLLECTIVE_OF.get(name, name)
        alg = CONCEPT_FIGURE[name]
        params = {"root": 0} if "root" in registry.get(key, alg).params else {}
        text = concept_page(name).split("\n", 2)[2]  # without the title (the page has it)
        text += f"\nOne way to do it: the ``{alg}`` algorithm (:ref:`{key}-{alg}`).\n\n"
        return self.render(text + figure(self.env.app.outdir, key, alg, params, scroll=True))


class AlgorithmsDirective(_Rst):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        collective = self.arguments[0]
        out = self.env.app.outdir
        text = ("Costs below are in p ranks, n bytes and the machine's constants alpha (per message), beta "
                "(per byte sent) and gamma (per byte reduced): see the :ref:`glossary <glossary>`; "
                ":ref:`scale` compares the algorithms at every scale.  The model has no link contention: it "
                "prices a message to a distant rank like one to a neighbour, and so leaves out why rings are "
                "used on real networks (each rank talks only to its neighbours, so a ring shares no link and "
                "pipelines its steps); :ref:`scale-ring-wins` shows the ring winning once a node's ranks share "
                "one link.\n\n")
        text += "".join(algorithm_section(out, collective, a) for a in mpicoll.algorithms(collective))
        return self.render(text)


class ExamplesDirective(_Rst):
    def run(self) -> list[nodes.Node]:
        return self.render(examples_page())


# ---------------------------------------------------------------- which algorithm at my scale
def _machine(name: str):
    """A preset by name; ``default-local`` is the built-in local constants (not the builder's calibration)."""
    from mpicoll.analysis.presets import DEFAULT_LOCAL, preset

    return DEFAULT_LOCAL if name == "default-local" else preset(name)


def scale_map_figure(grid: Any, path: str) -> None:
    """The map: one square per (p, bytes), coloured by the winning algorithm, its name written in it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mpicoll.analysis.draw import palette
    from mpicoll.tools.commands import _bytes

    names = sorted({grid.winner(p, n) for p in grid.ranks for n in grid.sizes})
    colour = dict(zip(names, palette(len(names))))
    fig, ax = plt.subplots(figsize=(1.6 * len(grid.sizes) + 1.5, 0.62 * len(grid.ranks) + 1.4))
    for i, p in enumerate(grid.ranks):
        for j, n in enumerate(grid.sizes):
            win = grid.winner(p, n)
            ax.add_patch(plt.Rectangle((j, i), 1, 1, color=colour[win], alpha=0.55))
            ax.text(j + 0.5, i + 0.5, win.replace("_", " "), ha="center", va="center", fontsize=8, wrap=True)
    ax.set_xlim(0, len(grid.sizes))
    ax.set_ylim(0, len(grid.ranks))
    ax.set_xticks([j + 0.5 for j in range(len(grid.sizes))], [_bytes(n) for n in grid.sizes])
    ax.set_yticks([i + 0.5 for i in range(len(grid.ranks))], [str(p) for p in grid.ranks])
    ax.set_xlabel("bytes per rank")
    ax.set_ylabel("processes p")
    costed = sorted(name for name, _ in grid.cells[grid.ranks[0], grid.sizes[0]])
    among = "" if len(costed) == len(mpicoll.algorithms(grid.collective)) else f" of {', '.join(costed)}"
    ax.set_title(f"{grid.collective}: fastest{among} by the cost model\nconstants: {grid.machine.name}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class ScaleMapDirective(_Rst):
    """``.. mpicoll-scale-map:: COLLECTIVE PRESET [ALGORITHM,ALGORITHM...]``: the map, the table, the assumptions."""

    required_arguments = 2
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        from mpicoll.tools.commands import scale_map

        collective, name = self.arguments[:2]
        algs = self.arguments[2].split(",") if len(self.arguments) > 2 else None
        grid = scale_map(collective, _machine(name), algorithms=algs)
        folder = os.path.join(self.env.app.outdir, "_mpicoll")
        os.makedirs(folder, exist_ok=True)
        png = f"scale-{collective}-{name}-{len(algs or [])}.png"
        scale_map_figure(grid, os.path.join(folder, png))
        command = f"python -m mpicoll model {collective} --map --preset {name.replace('default-local', 'local')}"
        command += f" --algorithms {self.arguments[2]}" if algs else ""
        text = (".. raw:: html\n\n"
                f"   <figure class=\"mpicoll-figure mpicoll-wide\"><a href=\"{{root}}_mpicoll/{png}\">"
                f"<img src=\"{{root}}_mpicoll/{png}\" alt=\"which {collective} algorithm wins where\"></a>"
                f"<figcaption>{command}</figcaption></figure>\n\n")
        return self.render(text + f"``{command}`` prints:\n\n" + _literal(grid.table()))


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("mpicoll-scale-map", ScaleMapDirective)
    app.add_directive("mpicoll-concept", ConceptDirective)
    app.add_directive("mpicoll-algorithms", AlgorithmsDirective)
    app.add_directive("mpicoll-examples", ExamplesDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": mpicoll.__version__}
