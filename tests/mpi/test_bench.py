"""Smoke tests of ``python -m mpicoll.bench``: tiny sizes, one round, every rank in-process."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
from mpi4py import MPI

from mpicoll import bench, registry, selection

from conftest import WORLD, check


def _shared_tmp(tmp_path) -> str:
    return WORLD.bcast(str(tmp_path), root=0)


def test_parse_sizes():
    assert bench.parse_sizes("8:128") == [8, 16, 64, 128]
    assert bench.parse_sizes("8:100:2") == [8, 16, 32, 64, 100]
    assert bench.parse_sizes("8,64K,1M") == [8, 65536, 1 << 20]
    with pytest.raises(ValueError, match="--sizes"):
        bench.parse_sizes("8:4x")


def test_allreduce_sweep_times_every_algorithm_and_checks_them(tmp_path):
    out = _shared_tmp(tmp_path)
    results = bench.main(["allreduce", "--sizes", "8,4K", "--iters", "2", "--warmup", "1", "--quiet",
                          "--json", os.path.join(out, "r.json"), "--csv", os.path.join(out, "r.csv")], comm=WORLD)
    (res,) = results
    check(res["collective"] == "allreduce" and res["p"] == WORLD.size and len(res["sizes"]) == 2)
    expected = {"memcpy", bench.BUILTIN, bench.AUTO, *registry.algorithms("allreduce")}
    for entry in res["sizes"]:
        stats = entry["stats"]
        check(expected <= set(stats), f"missing variants: {expected - set(stats)}")
        for name in expected - {"memcpy"}:
            s = stats[name]
            check(s["ok"] and s["median_s"] > 0 and s["min_s"] <= s["median_s"] and s["ratio"] > 0, f"{name}: {s}")
        check(stats[bench.BUILTIN]["ratio"] == 1.0)
        check(abs(stats[bench.AUTO]["busbw_GBs"] / stats[bench.AUTO]["algbw_GBs"]
                  - (2 * (WORLD.size - 1) / WORLD.size if WORLD.size > 1 else 1.0)) < 1e-9)
    check(results == WORLD.bcast(results, root=0), "every rank returns the same (slowest-rank) figures")
    WORLD.Barrier()
    if WORLD.rank == 0:
        with open(os.path.join(out, "r.json")) as fh:
            assert json.load(fh)[0]["collective"] == "allreduce"
        with open(os.path.join(out, "r.csv")) as fh:
            rows = list(csv.DictReader(fh))
        assert {r["variant"] for r in rows} >= expected and all("ratio" in r for r in rows)


def test_forwarded_collective_is_timed_as_the_builtin_with_a_note():
    (res,) = bench.run_bench(bench.Comm(WORLD), ["alltoall"], [64], iters=1, warmup=0, progress=False)
    names = set(res["sizes"][0]["stats"])
    if res["notes"]:   # no mpicoll.calls.alltoall on this branch
        check(names == {"memcpy", bench.BUILTIN, bench.AUTO} and "built-in" in res["notes"][0])
        check(res["sizes"][0]["stats"][bench.AUTO]["ok"])
    else:
        check(bench.AUTO in names and all(s.get("ok", True) for s in res["sizes"][0]["stats"].values()))


def test_unknown_algorithm_is_refused():
    with pytest.raises(ValueError, match="--algorithms"):
        bench.run_bench(bench.Comm(WORLD), ["allreduce"], [8], algorithms=["nope"], iters=1, progress=False)


def test_tune_writes_bands_that_auto_then_uses(tmp_path, monkeypatch):
    path = os.path.join(_shared_tmp(tmp_path), "tuning.json")
    monkeypatch.setenv("MPICOLL_TUNING", path)
    selection.reload_tuning()
    try:
        bench.main(["allreduce", "--sizes", "8,64K", "--iters", "1", "--warmup", "0", "--quiet", "--tune"],
                   comm=WORLD)
        with open(path) as fh:
            bands = json.load(fh)["allreduce"][str(WORLD.size)]
        check(bands[-1][0] is None and all(name in registry.algorithms("allreduce") for _, name in bands))
        check(selection.tuned_choice("allreduce", WORLD.size, 8) == bands[0][1])
        check(selection.tuned_choice("allreduce", WORLD.size, 1 << 30) == bands[-1][1])
        name, _ = selection.choose("allreduce", "auto", size=WORLD.size, nbytes=8, count=WORLD.size)
        check(name == bands[0][1])
        # a non-commutative op never gets a tuned algorithm that reorders
        for nbytes in (8, 1 << 30):
            tuned = selection.tuned_choice("allreduce", WORLD.size, nbytes, commutative=False)
            check(tuned is None or registry.get("allreduce", tuned).keeps_order(WORLD.size))
        x = np.arange(5, dtype=np.float64)
        y = np.empty_like(x)
        bench.Comm(WORLD).Allreduce(x, y, op=MPI.SUM)
        check(np.array_equal(y, x * WORLD.size))
    finally:
        monkeypatch.delenv("MPICOLL_TUNING")
        selection.reload_tuning()


