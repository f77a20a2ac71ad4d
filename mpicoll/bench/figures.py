"""``python -m mpicoll.bench.figures``: the figures of the performance page, drawn from benchmarks' JSON files.

One command turns the JSON that the benchmarks write into the figures ``docs/performance.md`` shows::

    python -m mpicoll.bench.figures benchmarks/results/*.json --out docs/images/perf

It reads each file by what it holds (every one carries its run's facts under ``"run"``,
:func:`mpicoll.tools.record.run_record`) and writes, per process count p:

* ``collectives_pP.svg`` from ``python -m mpicoll bench --style osu|nccl|table --json`` and
  ``python -m mpicoll osu --json`` at p processes: one panel per collective, mpicoll's time over the
  MPI library's built-in against the message size (log-log), the 1.0 line marked;
* ``osu_geomeans.svg`` from a file of kind ``osu-geomeans`` (the geometric means of a run whose
  per-size tables were not kept): one bar per demo and size group, per process count;
* ``torch_pP.svg`` from ``python -m mpicoll.torch.bench --json``: the ``mpicoll`` backend's time over
  Gloo's, per collective;
* ``reproducible_pP.svg`` from ``benchmarks/reproducible.py --json``: ``reproducible=True``'s time over
  the ordinary call's, and the ordinary call's over the built-in's.

Every figure's title names the machine, the MPI library and the date of its run; lower is better
everywhere.  It prints one line per figure: its path and the geometric means it shows.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from mpicoll.tools.cli import Parser, guarded

__all__ = ["Series", "load", "series_of", "draw_all", "main"]

#: sizes up to SMALL bytes and from LARGE bytes on: the two groups a summary's geometric means cover
SMALL, LARGE = 1 << 10, 64 << 10

Series = tuple[str, list[tuple[int, float]]]   # (label, [(bytes, ratio)]) sorted by bytes


def load(path: str) -> tuple[str, Any]:
    """The kind of a benchmark's JSON file (``bench``, ``osu``, ``osu-geomeans``, ``torch``,
    ``reproducible``) and its contents; ``ValueError`` naming the file for anything else."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, list) and data and all(isinstance(r, dict) and "collective" in r for r in data):
        return "bench", data
    if isinstance(data, dict) and data.get("kind") in ("osu", "osu-geomeans", "torch", "reproducible"):
        return data["kind"], data
    raise ValueError(f"{path}: not the JSON of python -m mpicoll bench, osu, mpicoll.torch.bench or "
                     "benchmarks/reproducible.py")


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive ``values``; nan when there are none."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def _time(stats: dict[str, Any]) -> float | None:
    """A variant's time in one size's stats: the median over the rounds of the slowest rank's time per call
    (``median_us`` of --style osu/nccl, ``median_s`` of --style table), else --style osu's average."""
    if "median_us" in stats:
        return stats["median_us"]
    if "median_s" in stats:
        return stats["median_s"] * 1e6
    return stats.get("avg_us")


def series_of(result: dict[str, Any], variant: str = "auto") -> list[tuple[int, float]]:
    """``(bytes, time of variant / built-in's)`` of one collective of ``python -m mpicoll bench --json``,
    out of place, sizes where either failed left out (a barrier's one size is 0 bytes)."""
    points = []
    for entry in result["sizes"]:
        stats = entry["stats"]
        base, ours = _time(stats.get("builtin", {})), _time(stats.get(variant, {}))
        if base and ours:
            points.append((entry["bytes"], ours / base))
    return points


def osu_series(data: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Per demo of ``python -m mpicoll osu --json``: ``(bytes, mpicoll / built-in)``, sizes > 0."""
    out = {}
    for name, tables in data["demos"].items():
        builtin, ours = tables["builtin_us"], tables["mpicoll_us"]
        out[name] = sorted((int(s), ours[s] / t) for s, t in builtin.items() if s in ours and t > 0)
    return out


def _plot_ratios(ax: Any, points: list[tuple[int, float]], rise: float = 0.0, **style: Any) -> None:
    """A ratio line over the sizes above 0 bytes; a 0-byte point alone (a barrier) as a marker with its value
    written beside it, ``rise`` points higher (so that two such labels do not overlap)."""
    sized = [(b, r) for b, r in points if b > 0]
    if sized:
        ax.plot([b for b, _ in sized], [r for _, r in sized], markersize=3, **style)
    elif points:
        ratio = points[0][1]
        style = {k: v for k, v in style.items() if k != "linestyle"}
        ax.plot([64], [ratio], markersize=7, linestyle="none", **style)
        ax.annotate(f"{ratio:.2f}", (64, ratio), xytext=(8, rise), textcoords="offset points", color=style.get("color"),
                    va="center", fontsize=8)


def _pyplot() -> Any:
    try:
        import matplotlib  # noqa: PLC0415
    except ImportError:
        raise SystemExit("the figures need matplotlib: pip install matplotlib (the [plot] extra)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "mpicoll", "font.size": 9,
                         "axes.titlesize": 10, "axes.spines.top": False, "axes.spines.right": False})
    return plt


def _size_label(nbytes: float, _pos: Any = None) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}"


def _ratio_axes(ax: Any, plt: Any) -> None:
    """Log-log axes of ratio against bytes, the 1.0 line marked, the faster and slower halves named."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: PLC0415

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=1.0, zorder=1)
    ax.xaxis.set_major_locator(LogLocator(base=4 ** 2))
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())    # (minor ticks: most of an SVG's size, little to read)
    ax.yaxis.set_minor_locator(NullLocator())
    ax.grid(True, which="major", alpha=0.3)


def _ylimits(axes: Any, values: list[float]) -> None:
    """One y range for every panel: the ratios' range, 1.0 always inside, a margin around."""
    low, high = min([*values, 1.0]), max([*values, 1.0])
    for ax in axes:
        ax.set_ylim(low / 1.3, high * 1.3)


def _stamp(run: dict[str, Any]) -> str:
    """``machine, MPI, date, load`` of a run record (a hand-made record may say less)."""
    where = ", ".join(str(run[k]) for k in ("machine", "mpi") if run.get(k))
    when = str(run.get("date", ""))
    if run.get("load"):
        when += f", load average {run['load'][0]:.1f} at the end"
    return "\n".join(x for x in (where, when) if x)


def collectives_figure(results: list[dict[str, Any]], osu: dict[str, Any] | None, path: str) -> str:
    """One panel per collective: mpicoll ``auto`` over the built-in (the bench), and mpi4py's OSU demo where
    there is one; returns the summary line."""
    plt = _pyplot()
    demos = osu_series(osu) if osu else {}
    names = [r["collective"] for r in results] or list(demos)
    names += [d for d in demos if d not in names]
    cols = 4 if len(names) > 6 else min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.45 * cols + 0.6, 1.85 * rows + 1.1), sharex=True,
                             sharey=True, squeeze=False)
    by_name = {r["collective"]: r for r in results}
    everything: list[float] = []
    for ax, name in zip(axes.flat, names):
        _ratio_axes(ax, plt)
        if name in by_name:
            pts = series_of(by_name[name])
            everything += [r for _, r in pts]
            _plot_ratios(ax, pts, rise=7, marker="o", color="tab:red", label="python -m mpicoll bench (auto)")
        if name in demos:
            pts = demos[name]
            everything += [r for _, r in pts]
            _plot_ratios(ax, pts, rise=-7, marker="s", color="tab:blue", linestyle="--", label="mpi4py's OSU demo")
        ax.set_title(name)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    _ylimits(axes.flat, everything)
    for ax in axes[:, 0]:
        ax.set_ylabel("mpicoll / built-in")
    for ax in axes[-1, :]:
        ax.set_xlabel("bytes")
        ax.xaxis.set_tick_params(labelbottom=True)
    run = (results[0] if results else osu)["run"]
    p = run["processes"]
    handles: dict[str, Any] = {}
    for ax in axes.flat:   # each label's first line (a barrier's lone marker is drawn last)
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), loc="upper right", bbox_to_anchor=(0.985, 0.995), ncol=1,
               frameon=False)
    fig.suptitle(f"Time of mpicoll over the MPI library's own collective, p = {p} (below 1: mpicoll is faster)\n"
                 f"{_stamp(run)}", x=0.01, ha="left", fontsize=10)
    fig.tight_layout()   # (it leaves room for the suptitle)
    _save(fig, path, plt)
    return f"{path}: p = {p}, geometric mean of mpicoll / built-in " + "; ".join(
        f"{label} <= 1 KiB {small:.2f}, >= 64 KiB {large:.2f}"
        for label, pts in (("bench", [pt for r in results for pt in series_of(r)]),
                           ("OSU demos", [pt for pts in demos.values() for pt in pts])) if pts
        for small, large in [split_geomeans(pts)])


def split_geomeans(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Geometric means of the ratios over the sizes up to SMALL bytes and from LARGE bytes on."""
    return geomean([r for b, r in points if b <= SMALL]), geomean([r for b, r in points if b >= LARGE])


def geomeans_figure(data: dict[str, Any], path: str) -> str:
    """Bars of the OSU demos' geometric-mean ratios, up to 1 KiB and from 64 KiB, one group per process count."""
    plt = _pyplot()
    counts = sorted(data["geomeans"], key=int)
    demos = list(data["geomeans"][counts[0]])
    fig, axes = plt.subplots(1, len(counts), figsize=(4.6 * len(counts), 3.4), sharey=True, squeeze=False)
    values: list[float] = []
    for ax, p in zip(axes[0], counts):
        table = data["geomeans"][p]
        x = range(len(demos))
        for k, (label, colour) in enumerate((("up to 1 KiB", "tab:orange"), ("from 64 KiB", "tab:blue"))):
            heights = [table[d][k] if table[d][k] is not None else math.nan for d in demos]
            values += [h for h in heights if not math.isnan(h)]
            ax.bar([i + (k - 0.5) * 0.38 for i in x], heights, width=0.38, color=colour, label=label)
        ax.axhline(1.0, color="black", linewidth=1.0)
        ax.set_xticks(list(x), demos, rotation=30, ha="right")
        ax.set_title(f"p = {p}")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("mpicoll / built-in (geometric mean)")
    axes[0][0].set_ylim(0, max(values) * 1.15)
    axes[0][-1].legend(frameon=False)
    fig.suptitle(f"mpi4py's OSU demos, mpicoll over the built-in (below 1: mpicoll is faster)\n"
                 f"{_stamp(data['run'])}", x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    _save(fig, path, plt)
    return f"{path}: " + "; ".join(f"p = {p}: all demos {data['geomeans'][p].get('all demos', '?')}" for p in counts)


def torch_figure(data: dict[str, Any], path: str) -> str:
    """The ``mpicoll`` backend's time over Gloo's (and the inline variant's, if measured), per collective."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    _ratio_axes(ax, plt)
    ops = list(dict.fromkeys(row["op"] for row in data["rows"]))
    values = []
    for op in ops:
        rows = [r for r in data["rows"] if r["op"] == op and "gloo" in r["time_us"]]
        pts = [(r["bytes"], r["time_us"]["mpicoll"] / r["time_us"]["gloo"]) for r in rows]
        values += [v for _, v in pts]
        ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", markersize=3, label=op)
    _ylimits([ax], values)
    ax.set_xlabel("bytes")
    ax.set_ylabel("mpicoll / Gloo")
    ax.legend(frameon=False, fontsize=8, ncol=2)
    run = data["run"]
    ax.set_title(f"torch.distributed: backend \"mpicoll\" over Gloo, p = {run['processes']}, float32\n"
                 f"{_stamp(run)}", loc="left", fontsize=9)
    fig.tight_layout()
    _save(fig, path, plt)
    return f"{path}: geometric mean mpicoll / gloo {geomean(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def reproducible_figure(data: dict[str, Any], path: str) -> str:
    """``reproducible=True``'s time over the ordinary call's, per dtype."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    _ratio_axes(ax, plt)
    values = []
    summary = []
    for k, dtype in enumerate(dict.fromkeys(r["dtype"] for r in data["rows"])):
        rows = [r for r in data["rows"] if r["dtype"] == dtype]
        colour = ("tab:red", "tab:purple", "tab:green")[k % 3]
        cost = [(r["bytes"], r["reproducible_us"] / r["ordinary_us"]) for r in rows]
        values += [v for _, v in cost]
        ax.plot([b for b, _ in cost], [v for _, v in cost], marker="o", markersize=3, color=colour, label=dtype)
        ratios = [v for _, v in cost]
        summary.append(f"{dtype} reproducible / ordinary {min(ratios):.2f} to {max(ratios):.2f}")
    _ylimits([ax], values)
    ax.set_xlabel("bytes")
    ax.set_ylabel("reproducible / ordinary")
    ax.legend(frameon=False, fontsize=8)
    run = data["run"]
    ax.set_title(f"What reproducible=True costs: Allreduce ({data.get('form', 'blocking')}) with it over "
                 f"without it, p = {run['processes']}\n"
                 f"{_stamp(run)}", loc="left", fontsize=9)
    fig.tight_layout()
    _save(fig, path, plt)
    return f"{path}: " + "; ".join(summary)


def _save(fig: Any, path: str, plt: Any) -> None:
    """Write the figure (SVG or PNG by the name) without a date in it, so that a redraw changes nothing."""
    metadata = {"Date": None} if path.endswith(".svg") else {}
    fig.savefig(path, metadata=metadata, dpi=110)
    plt.close(fig)


def draw_all(paths: Sequence[str], out: str, fmt: str = "svg") -> list[str]:
    """Draw every figure the files make into the folder ``out``; one summary line per figure."""
    loaded = [load(p) for p in paths]
    os.makedirs(out, exist_ok=True)
    lines = []
    bench: dict[int, list[dict[str, Any]]] = {}
    osu: dict[int, dict[str, Any]] = {}
    for kind, data in loaded:
        if kind == "bench":
            bench.setdefault(data[0]["p"], []).extend(data)
        elif kind == "osu":
            osu[data["run"]["processes"]] = data
    for p in sorted(set(bench) | set(osu)):
        lines.append(collectives_figure(bench.get(p, []), osu.get(p),
                                        os.path.join(out, f"collectives_p{p}.{fmt}")))
    for kind, data in loaded:
        if kind == "osu-geomeans":
            lines.append(geomeans_figure(data, os.path.join(out, f"osu_geomeans.{fmt}")))
        elif kind == "torch":
            lines.append(torch_figure(data, os.path.join(out, f"torch_p{data['run']['processes']}.{fmt}")))
        elif kind == "reproducible":
            name = f"reproducible_p{data['run']['processes']}.{fmt}"
            lines.append(reproducible_figure(data, os.path.join(out, name)))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m mpicoll.bench.figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="JSON files of python -m mpicoll bench/osu --json, "
                                                  "mpicoll.torch.bench --json, benchmarks/reproducible.py --json")
    parser.add_argument("--out", default=".", help="folder for the figures (default: here)")
    parser.add_argument("--format", choices=("svg", "png"), default="svg", help="the figures' format (default svg)")
    ns = parser.parse_args(argv)
    try:
        lines = draw_all(ns.files, ns.out, ns.format)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
