"""Showing a sweep's results: sizes in words, the progress bar, the text table, flat rows, CSV and the plot."""

from __future__ import annotations

import csv
import sys
import time

from mpicoll.bench.variants import AUTO, BUILTIN, PERSISTENT

__all__ = ["human", "Progress", "rows", "table", "plot", "write_csv"]


def human(nbytes: float) -> str:
    """``65536`` as ``64 KiB``."""
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{int(nbytes)} B"


class Progress:
    """A one-line progress bar on stderr (rank 0 only)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled and total > 1
        self.t0 = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        fill = int(width * self.done / self.total)
        elapsed = time.perf_counter() - self.t0
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} {label:<30} "
                         f"{elapsed:6.1f} s")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def rows(results: list[dict]) -> list[dict]:
    """One flat row per (collective, size, variant)."""
    out = []
    for res in results:
        for entry in res["sizes"]:
            fastest = min((s["median_s"], n) for n, s in entry["stats"].items()
                          if n not in ("memcpy", BUILTIN, PERSISTENT) and "median_s" in s and s["ok"])
            for name, s in entry["stats"].items():
                row = {"collective": res["collective"], "p": res["p"], "dtype": res["dtype"], "bytes": entry["bytes"],
                       "variant": name, **s}
                if name == AUTO and "median_s" in s:
                    row["auto_vs_fastest"] = s["median_s"] / fastest[0]
                    row["fastest"] = fastest[1]
                out.append(row)
    return out


def table(res: dict) -> str:
    """The text table of one collective's sweep."""
    lines = [f"# {res['collective']}  p = {res['p']}  dtype = {res['dtype']}  "
             f"(times: slowest rank, median [min] over {res['iters']} rounds; ratio = median / built-in median)"]
    if res["p"] > res.get("cores", res["p"]):
        lines.append(f"# NOISY: {res['p']} ranks on {res['cores']} cores (oversubscribed)")
    for note in res["notes"]:
        lines.append(f"# note: {note}")
    head = f"{'size':>9} {'variant (auto: what ran)':<26} {'median us':>11} {'min us':>10} {'algbw GB/s':>10} " \
           f"{'busbw GB/s':>10} {'ratio':>6} {'check':>5}"
    lines.append(head)
    for entry in res["sizes"]:
        stats = entry["stats"]
        algs = [(s["median_s"], n) for n, s in stats.items()
                if n not in ("memcpy", BUILTIN, PERSISTENT) and "median_s" in s]
        fastest = min(algs) if algs else None
        for name, s in stats.items():
            if "error" in s:
                lines.append(f"{human(entry['bytes']):>9} {name:<26} error: {s['error']}")
                continue
            ratio = "" if name == "memcpy" else f"{s['ratio']:.2f}" if "ratio" in s else ""
            flag = ""
            if name == AUTO and fastest is not None and s["median_s"] > 1.10 * fastest[0]:
                flag = f"  auto {s['median_s'] / fastest[0]:.2f}x the fastest ({fastest[1]})"
            label = ("memcpy (device)" if res.get("device") else "memcpy (np.copyto)") if name == "memcpy" else name
            if "ran" in s:
                label = f"{name} ({s['ran']})"
            lines.append(f"{human(entry['bytes']):>9} {label:<26} {s['median_s'] * 1e6:11.2f} {s['min_s'] * 1e6:10.2f} "
                         f"{s['algbw_GBs']:10.2f} {s['busbw_GBs']:10.2f} {ratio:>6} "
                         f"{'' if name == 'memcpy' else 'ok' if s['ok'] else 'WRONG':>5}{flag}")
    return "\n".join(lines)


def plot(results: list[dict], path: str) -> None:
    """busbw and time against size, one line per variant, one row of panels per collective."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise SystemExit("--plot needs matplotlib (pip install matplotlib)") from None
    fig, axes = plt.subplots(len(results), 2, figsize=(12, 4.2 * len(results)), squeeze=False)
    for (ax_bw, ax_t), res in zip(axes, results):
        names = list(res["sizes"][0]["stats"])
        # red is auto's alone: the algorithms take the other tab10/tab20 colours, each its own
        others = [c for j, c in enumerate(plt.get_cmap("tab20").colors) if j not in (6, 7)]  # 6, 7: the reds
        others = others[0::2] + others[1::2]                                                 # dark shades first
        for i, name in enumerate(names):
            pts = [(e["bytes"], e["stats"][name]) for e in res["sizes"] if "median_s" in e["stats"].get(name, {})]
            if not pts:
                continue
            x = [b for b, _ in pts]
            style = {"memcpy": dict(color="black", linestyle=":"), BUILTIN: dict(color="black", linewidth=2),
                     AUTO: dict(color="tab:red", linewidth=2)}.get(name, dict(color=others[i % len(others)]))
            label = "memcpy (np.copyto)" if name == "memcpy" else name
            ax_bw.plot(x, [s["busbw_GBs"] for _, s in pts], marker=".", label=label, **style)
            if name != "memcpy":
                ax_t.plot(x, [s["median_s"] * 1e6 for _, s in pts], marker=".", label=label, **style)
        title = f"{res['collective']}, p = {res['p']}, {res['dtype']}"
        for ax, ylabel in ((ax_bw, "busbw (GB/s)"), (ax_t, "time (us, median of slowest rank)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("bytes")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
        ax_t.set_yscale("log")
        ax_bw.set_yscale("log")
        ax_bw.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_csv(flat: list[dict], path: str) -> None:
    """One CSV row per dict of ``flat``; the columns are every key that appears, in order of appearance."""
    keys = list(dict.fromkeys(k for r in flat for k in r))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(flat)
