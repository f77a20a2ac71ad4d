"""Space-time diagrams of a schedule: ranks as rows, rounds as columns.

Each rank's blocks are drawn after every round as a strip of squares, colored
by block (hue) and by how many ranks' contributions the block holds (from pale
to full), from :mod:`mpicoll.analysis.trace`; every message is an arrow from the
sender's strip to the receiver's next strip, labelled with its block.  Needs
matplotlib (the ``plot`` extra: ``python3 -m pip --python .venv/bin/python install -e ".[plot]"``).
"""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from mpicoll.analysis.trace import holdings, latest, trace
from mpicoll.ir.contracts import spec as get_spec

__all__ = ["draw", "legible", "palette", "MAX_RANKS", "MAX_CELLS"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"draw needs matplotlib (the [plot] extra): python3 -m pip --python {sys.executable} "
                          "install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


MAX_RANKS = 32        # more rows than this are unreadable on a page
# the phases of composed algorithms: (first round, name) for p ranks, marked on their drawings
PHASES = {
    ("allreduce", "ring"): lambda p: [(0, "reduce-scatter"), (p - 1, "all-gather")],
}
MAX_CELLS = 1100      # block squares per row (columns x blocks): a ring at p = 16 has 31 x 16 = 496


def palette(n: int) -> list[tuple[float, float, float]]:
    """``n`` distinct colours: tab10/tab20 while they last, else evenly spaced hues (no colour repeats)."""
    from matplotlib import colormaps, colors

    if n <= 10:
        return [colors.to_rgb(c) for c in colormaps["tab10"].colors[:n]]
    if n <= 20:
        return [colors.to_rgb(c) for c in colormaps["tab20"].colors[:n]]
    return [colors.hsv_to_rgb((i / n, 0.75 if i % 2 else 0.55, 0.9 if i % 2 else 0.75)) for i in range(n)]


def legible(collective: str, algorithm: str, size: int, nrounds: int, nblocks: int) -> None:
    """Raise ValueError with what to do instead when a drawing would be unreadable."""
    if size > MAX_RANKS:
        raise ValueError(f"-p: a drawing is readable for up to {MAX_RANKS} ranks (best up to 16), got {size}; "
                         f"print the table instead: python -m mpicoll show {collective} {algorithm} -p {size}")
    cells = (nrounds + 1) * min(nblocks, 32)
    if cells > MAX_CELLS:
        raise ValueError(f"-p: {collective}/{algorithm} at p = {size} has {nrounds + 1} columns of "
                         f"{min(nblocks, 32)} blocks ({cells} squares per row, at most {MAX_CELLS} are readable); "
                         f"draw a smaller p, or print the table: python -m mpicoll show {collective} {algorithm} "
                         f"-p {size}")


def draw(collective: str, algorithm: str, size: int, path: str, **params: Any) -> str:
    """Draw ``algorithm`` on ``size`` ranks into ``path`` (.png or .svg); returns the path.

    Raises
    ------
    ValueError
        For a file name that is not .png or .svg, a folder that does not exist, or
        a size whose drawing would be unreadable (see :func:`legible`).
    ImportError
        Without matplotlib.
    """
    import os

    if not str(path).lower().endswith((".png", ".svg")):
        raise ValueError(f"-o/path: expected a file name ending in .png or .svg, got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"-o/path: folder {folder!r} does not exist")
    if size < 1:
        raise ValueError(f"-p/size: expected a positive number of ranks, got {size}")
    tr = trace(collective, algorithm, size, **params)
    nblocks = tr.schedules[0].nblocks
    legible(collective, algorithm, size, tr.nrounds, nblocks)
    plt = _pyplot()
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    reduces = get_spec(collective).reduces
    shown = min(nblocks, 32)              # long pipelines: the first 32 blocks
    hues = palette(shown)
    cell = 0.32                           # width of one block square
    strip = shown * cell
    gap = max(1.1, 0.45 * strip)          # room for arrows between columns
    colw = strip + gap
    ncols = tr.nrounds + 1
    labels = size * ncols * shown <= 2500  # numbers in the squares while they stay readable
    fig_w = min(40.0, 1.5 + ncols * colw * 0.9)
    fig_h = min(24.0, 1.9 + size * 0.62)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))

    def y(rank: int) -> float:
        return float(size - 1 - rank)

    rects, faces = [], []
    marks = _Labels()      # the numbers in the squares and on the arrows
    for t, states in enumerate(tr.states):
        x0 = t * colw
        for r in range(size):
            if reduces:  # color = block position, shade and number = how many contributions it holds
                cells = [(b, len(h) / size, str(len(h))) if h else None
                         for b, h in enumerate(holdings(states[r], nblocks))]
            else:        # color = the block's identity, number = the rank it comes from
                cells = [(v[0], 1.0, ",".join(map(str, v[1][:2])) + ("+" if len(v[1]) > 2 else "")) if v else None
                         for v in latest(states[r], nblocks)]
            for b in range(shown):
                c = cells[b]
                face = (1.0, 1.0, 1.0)
                if c:
                    base = hues[c[0] % shown]
                    face = tuple(1 - (1 - v) * (0.15 + 0.85 * c[1]) for v in base)
                rects.append(Rectangle((x0 + b * cell, y(r) - 0.22), cell * 0.92, 0.44))
                faces.append(face)
                if labels and c:
                    marks.add(x0 + (b + 0.46) * cell, y(r), c[2], "black" if c[1] < 0.7 else "white")
        label = "start" if t == 0 else f"after round {t - 1}"
        ax.text(x0 + strip / 2, y(0) + 0.55, label, ha="center", va="bottom", fontsize=8)
    ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors="0.35", linewidths=0.5))
    xs, ys, us, vs, cols = [], [], [], [], []
    for t in range(tr.nrounds):
        for s in tr.schedules:
            if t >= len(s.rounds):
                continue
            for m in s.rounds[t].sends:
                x_from, x_to = t * colw + strip + 0.05, (t + 1) * colw - 0.05
                xs.append(x_from)
                ys.append(y(s.rank))
                us.append(x_to - x_from)
                vs.append(y(m.peer) - y(s.rank))
                cols.append(hues[m.block.lo % shown] if m.block.nblocks == 1 else (0.3, 0.3, 0.3))
                lab = f"{m.block.lo}" if m.block.nblocks == 1 else f"{m.block.lo}:{m.block.hi}"
                # next to the sender, before the arrows of other ranks cross it (a wrap-around arrow's
                # label at a third of its way sat on its neighbour's)
                marks.add(x_from + 0.1 * us[-1], y(s.rank) + 0.1 * vs[-1] + (0.1 if vs[-1] >= 0 else -0.1), lab,
                          "0.15", va="bottom" if vs[-1] >= 0 else "top")
    marks.draw(ax, fontsize=6)
    if xs:  # one artist for all messages
        ax.quiver(xs, ys, us, vs, color=cols, angles="xy", scale_units="xy", scale=1, width=0.0012,
                  headwidth=6, headlength=7, alpha=0.85)
    ax.set_yticks([y(r) for r in range(size)], [f"rank {r}" for r in range(size)], fontsize=8)
    ax.set_xticks([])
    ax.set_xlim(-0.3, ncols * colw - gap + 0.3)
    ax.set_ylim(-0.7, y(0) + 1.0)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    if reduces:
        what = "blocks colored by block, shade and number = ranks whose contributions they hold"
    else:
        what = "blocks colored by their destination block, number = the rank they come from (recv, else scratch)"
    phases = PHASES.get((collective, algorithm), lambda p: [])(size)
    for start, name in phases:   # a dashed line before the phase's first round, its name above the arrows
        x = start * colw + strip + gap / 2 if start else -0.2
        if start:
            ax.axvline(x, color="0.4", linestyle="--", linewidth=0.8)
        ax.text(x + 0.15, y(0) + 0.95, f"{name} \u2192", ha="left", va="bottom", fontsize=8, color="0.25",
                style="italic")
    title = f"{collective} / {algorithm}, p = {size}: {what}; arrows = messages (label: block)"
    lines = textwrap.wrap(title, max(40, int(fig_w * 13)))   # about 13 characters per inch at 9 points
    ax.set_title("\n".join(lines), fontsize=9)
    top = (0.45 + 0.17 * len(lines) + (0.25 if phases else 0)) / fig_h
    fig.subplots_adjust(left=0.5 / fig_w + 0.03, right=0.99, top=1 - top, bottom=0.02)
    fig.savefig(path, dpi=min(110, int(1800 / fig_w)))   # at most about 1,800 pixels wide
    plt.close(fig)
    return str(path)


class _Labels:
    """Many small labels drawn as one artist (their glyphs' outlines, in one collection).

    A matplotlib ``Text`` artist takes about a millisecond to lay out and draw, and a
    drawing at p = 16 has thousands of labels; one collection of paths takes milliseconds.
    """

    def __init__(self) -> None:
        self.items: list[tuple[float, float, str, Any, str]] = []

    def add(self, x: float, y: float, text: str, color: Any, va: str = "center") -> None:
        """A label centred on x, its ink centred on (``va="center"``), above or below y."""
        self.items.append((x, y, text, color, va))

    def draw(self, ax: Any, fontsize: float) -> None:
        if not self.items:
            return
        from matplotlib.collections import PathCollection
        from matplotlib.font_manager import FontProperties
        from matplotlib.textpath import TextPath
        from matplotlib.transforms import Affine2D

        font = FontProperties(size=fontsize)
        shapes: dict[tuple[str, str], Any] = {}
        for _, _, text, _, va in self.items:
            if (text, va) not in shapes:
                raw = TextPath((0, 0), text, prop=font)   # in points
                box = raw.get_extents()
                dy = {"center": -(box.y0 + box.y1) / 2, "bottom": -box.y0, "top": -box.y1}[va]
                shapes[text, va] = raw.transformed(Affine2D().translate(-(box.x0 + box.x1) / 2, dy))
        labels = PathCollection([shapes[text, va] for _, _, text, _, va in self.items],
                                offsets=[(x, y) for x, y, _, _, _ in self.items], offset_transform=ax.transData,
                                facecolors=[color for _, _, _, color, _ in self.items], edgecolors="none")
        labels.set_transform(Affine2D().scale(1 / 72) + ax.figure.dpi_scale_trans)   # points, at any dpi
        ax.add_collection(labels, autolim=False)


def draw_trees(size: int, path: str) -> str:
    """Draw the two binary trees of the double binary tree over ``size`` ranks, side by side, as trees.

    Ranks sit in rank order from left to right at the depth of their tree; a rank drawn
    filled has children in that tree.  The leaves of one tree are inner ranks of the
    other, so that summed over both trees every rank has at most two children.
    """
    from mpicoll.families.trees import tree

    if not 1 <= size <= MAX_RANKS:
        raise ValueError(f"-p: the trees are readable for 1 to {MAX_RANKS} ranks, got {size}")
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(max(6.0, 1.0 + 0.9 * size), 3.4))
    for which, ax in enumerate(axes):
        tr = tree(size, which)
        for r in range(size):
            for c in tr.children[r]:
                ax.plot([r, c], [-tr.depth[r], -tr.depth[c]], color="0.45", linewidth=1.2, zorder=1)
        for r in range(size):
            inner = bool(tr.children[r])
            ax.scatter([r], [-tr.depth[r]], s=420, zorder=2, edgecolors="0.2",
                       color=palette(2)[which] if inner else "white")
            ax.text(r, -tr.depth[r], str(r), ha="center", va="center", fontsize=9, zorder=3,
                    color="white" if inner else "black")
        how = "" if which == 0 else (" (tree 0 mirrored: r -> p-1-r)" if size % 2 == 0 else
                                     " (tree 0 shifted: r -> r+1 mod p)")
        ax.set_title(f"tree {which}{how}, root {tr.root}", fontsize=9)
        ax.set_xlim(-0.7, size - 0.3)
        ax.set_ylim(-max(tr.depth) - 0.6, 0.6)
        ax.axis("off")
    lines = textwrap.wrap(f"double binary tree, p = {size}: each half of the data is reduced up one tree and "
                          "broadcast back down it; filled = has children in that tree (over both trees every rank "
                          "has at most two children)", max(40, int(fig.get_figwidth() * 13)))
    fig.suptitle("\n".join(lines), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.07 * len(lines)))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
