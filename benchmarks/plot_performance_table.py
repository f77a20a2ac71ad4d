"""Draw docs/images/bench_allreduce_p2.png from the quiet run's table printed in docs/performance_notes.md.

The figure is a plot of that table (the median times of the run under "Allreduce, p = 2, float64"), not a
new measurement, so figure and table cannot disagree::

    .venv/bin/python benchmarks/plot_performance_table.py          # rewrites docs/images/bench_allreduce_p2.png
"""

from __future__ import annotations

import pathlib
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHOWN = ("builtin", "auto", "ring", "rabenseifner", "recursive_doubling", "persistent", "memcpy (np.copyto)")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}


def table(page: pathlib.Path) -> dict[str, list[tuple[int, float]]]:
    """variant -> [(bytes, median us)] from the first ``# mpicoll.bench: allreduce`` block of the page."""
    text = page.read_text(encoding="utf-8")
    block = text[text.index("# mpicoll.bench: allreduce"):]
    block = block[:block.index("```")]
    rows: dict[str, list[tuple[int, float]]] = {}
    for m in re.finditer(r"^\s*(\d+) (B|KiB|MiB) (.+?)\s{2,}([\d.]+)\s+([\d.]+)", block, re.M):
        rows.setdefault(m.group(3).strip(), []).append((int(m.group(1)) * UNITS[m.group(2)], float(m.group(4))))
    return rows


def main() -> None:
    rows = table(ROOT / "docs" / "performance_notes.md")
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name in SHOWN:
        points = rows[name]
        ax.loglog([n for n, _ in points], [t for _, t in points], marker="o", label=name,
                  linestyle="--" if name.startswith(("builtin", "memcpy")) else "-")
    ax.set_xlabel("bytes per rank")
    ax.set_ylabel("median time of the slowest rank (us)")
    ax.set_title("Allreduce, p = 2, float64: the table of docs/performance_notes.md", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = ROOT / "docs" / "images" / "bench_allreduce_p2.png"
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
