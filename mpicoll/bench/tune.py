"""``--tune``: the crossovers between algorithms that a sweep measured, written to the tuning file "auto" reads."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from mpicoll.bench.report import human
from mpicoll.bench.variants import AUTO, BUILTIN, PERSISTENT
from mpicoll.selection import choose as selection

__all__ = ["tune", "bands", "describe_tuning", "write_tuning"]


def tune(results: list[dict]) -> dict[str, Any]:
    """Crossovers from a sweep: per collective and p, bands ``[upper_bytes, algorithm]`` of the fastest.

    The bands cover the measured sizes only: sizes below the smallest one measured
    and above the largest get a band whose algorithm is ``null`` (auto decides there
    as if there were no tuning file).  Between two measured sizes with different
    winners the boundary lies halfway (geometrically).  A sweep of the single size 8
    writes ``[[8, null], [9, "binomial"], [null, null]]``: 8-byte calls only.
    """
    out: dict[str, Any] = {}
    for res in results:
        best = []
        for entry in res["sizes"]:
            algs = [(s["median_s"], n) for n, s in entry["stats"].items()
                    if n not in ("memcpy", BUILTIN, PERSISTENT, AUTO) and "median_s" in s and s["ok"]]
            if algs:
                best.append((entry["bytes"], min(algs)[1]))
        if best:
            out.setdefault(res["collective"], {})[str(res["p"])] = bands(best)
    return out


def bands(best: list[tuple[int, str]]) -> list[list]:
    """``[(bytes, fastest algorithm), ...]`` by increasing size -> bands that end where the measurements end."""
    rows: list[list] = [[best[0][0], None]] if best[0][0] > 0 else []   # below the smallest size: not measured
    for i, (nbytes, name) in enumerate(best):
        if rows and rows[-1][1] == name:
            continue
        if i > 0:   # the previous winner's band ends halfway to this size
            rows[-1][0] = max(best[i - 1][0] + 1, int(math.sqrt(best[i - 1][0] * nbytes)))
        rows.append([None, name])
    rows[-1][0] = best[-1][0] + 1          # the last winner covers up to the largest size measured
    rows.append([None, None])              # above it: not measured
    return rows


def describe_tuning(found: dict[str, Any]) -> str:
    """The bands of :func:`tune` in words, one line per band that names an algorithm."""
    lines = []
    for coll, by_p in found.items():
        for p, rows in by_p.items():
            lo = 0
            for upper, name in rows:
                if name is not None:
                    top = f"below {human(upper)}" if upper is not None else "and up"
                    lines.append(f"#   {coll}, p = {p}: {name} from {human(lo)} {top}")
                lo = upper if upper is not None else lo
    return "\n".join(lines) if lines else "#   (nothing measured)"


def write_tuning(found: dict[str, Any], path: str) -> None:
    """Merge ``found`` into the tuning file at ``path`` (other collectives and p are kept)."""
    data: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as fh:
            data = json.load(fh)
    for coll, by_p in found.items():
        data.setdefault(coll, {}).update(by_p)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
    selection.reload_tuning()
