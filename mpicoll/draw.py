"""Space-time diagrams of a schedule: ranks as rows, rounds as columns.

Each rank's blocks are drawn after every round as a strip of squares, colored
by block (hue) and by how many ranks' contributions the block holds (from pale
to full), from :mod:`mpicoll.exec.trace`; every message is an arrow from the
sender's strip to the receiver's next strip, labelled with its block.  Needs
matplotlib (``pip install "mpicoll[plot]"``).
"""

from __future__ import annotations

from typing import Any

from .calls import spec as get_spec
from .exec.trace import holdings, latest, trace

__all__ = ["draw"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError('draw needs matplotlib: pip install "mpicoll[plot]" (or pip install matplotlib)') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(collective: str, algorithm: str, size: int, path: str, **params: Any) -> str:
    """Draw ``algorithm`` on ``size`` ranks into ``path`` (.png or .svg); returns the path."""
    if not str(path).lower().endswith((".png", ".svg")):
        raise ValueError(f"-o/path: expected a file name ending in .png or .svg, got {path!r}")
    if not 1 <= size <= 64:
        raise ValueError(f"-p/size: drawings are legible for 1 to 64 ranks (best up to 16), got {size}")
    plt = _pyplot()
    from matplotlib import colors
    from matplotlib.patches import FancyArrowPatch, Rectangle

    tr = trace(collective, algorithm, size, **params)
    reduces = get_spec(collective).reduces
    nblocks = tr.schedules[0].nblocks
    shown = min(nblocks, 32)              # long pipelines: the first 32 blocks
    cell = 0.32                           # width of one block square
    strip = shown * cell
    gap = max(1.6, 0.55 * strip)          # room for arrows between columns
    colw = strip + gap
    rowh = 1.0
    ncols = tr.nrounds + 1
    cmap = plt.get_cmap("tab20" if shown > 10 else "tab10")
    fig_w = min(60.0, 1.5 + ncols * colw * 0.9)
    fig_h = min(40.0, 1.2 + size * 0.62)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))

    def y(rank: int) -> float:
        return (size - 1 - rank) * rowh

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
                base = colors.to_rgb(cmap(cells[b][0] % cmap.N)) if cells[b] else (1, 1, 1)
                frac = cells[b][1] if cells[b] else 0.0
                face = tuple(1 - (1 - c) * (0.15 + 0.85 * frac) for c in base) if cells[b] else (1, 1, 1)
                ax.add_patch(Rectangle((x0 + b * cell, y(r) - 0.22), cell * 0.92, 0.44, facecolor=face,
                                       edgecolor="0.35", linewidth=0.5))
                if size <= 16 and cells[b] and shown <= 16:
                    ax.text(x0 + (b + 0.46) * cell, y(r), cells[b][2], ha="center", va="center",
                            fontsize=6, color="black" if frac < 0.7 else "white")
        label = "start" if t == 0 else f"after round {t - 1}"
        ax.text(x0 + strip / 2, y(0) + 0.55, label, ha="center", va="bottom", fontsize=8)
    for t in range(tr.nrounds):
        for s in tr.schedules:
            if t >= len(s.rounds):
                continue
            for m in s.rounds[t].sends:
                x_from = t * colw + strip + 0.05
                x_to = (t + 1) * colw - 0.05
                color = cmap(m.block.lo % cmap.N) if m.block.nblocks == 1 else "0.3"
                ax.add_patch(FancyArrowPatch((x_from, y(s.rank)), (x_to, y(m.peer)), arrowstyle="-|>",
                                             mutation_scale=8, color=color, linewidth=0.9, alpha=0.85))
                lab = f"{m.block.lo}" if m.block.nblocks == 1 else f"{m.block.lo}:{m.block.hi}"
                xm, ym = x_from + 0.3 * (x_to - x_from), y(s.rank) + 0.3 * (y(m.peer) - y(s.rank))
                ax.text(xm, ym + 0.08, lab, fontsize=6, ha="center", va="bottom", color="0.15")
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
    title = f"{collective} / {algorithm}, p = {size}: {what}; arrows = messages (label: block)"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return str(path)
