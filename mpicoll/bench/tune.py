"""``--tune``: the crossovers between algorithms that a sweep measured, written to the tuning file "auto" reads."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from mpicoll.bench.variants import AUTO, BUILTIN, PERSISTENT
from mpicoll.selection import choose as selection

__all__ = ["tune", "write_tuning"]


def tune(results: list[dict]) -> dict[str, Any]:
    """Crossovers from a sweep: per collective and p, bands ``[upper_bytes, algorithm]`` of the fastest.

    A band ends halfway (geometrically) between the last size where its algorithm
    won and the next measured size; the last band is open (``null``).
    """
    out: dict[str, Any] = {}
    for res in results:
        best = []
        for entry in res["sizes"]:
            algs = [(s["median_s"], n) for n, s in entry["stats"].items()
                    if n not in ("memcpy", BUILTIN, PERSISTENT, AUTO) and "median_s" in s and s["ok"]]
            if algs:
                best.append((entry["bytes"], min(algs)[1]))
        bands: list[list] = []
        for i, (nbytes, name) in enumerate(best):
            if bands and bands[-1][1] == name:
                continue
            if bands:
                bands[-1][0] = int(math.sqrt(best[i - 1][0] * nbytes))
            bands.append([None, name])
        if bands:
            out.setdefault(res["collective"], {})[str(res["p"])] = bands
    return out


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
