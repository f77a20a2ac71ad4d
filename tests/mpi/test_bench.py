"""Smoke tests of ``python -m mpicoll.bench``: tiny sizes, one round, every rank in-process."""

from __future__ import annotations

import csv
import json
import os
import re

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.bench import cases as bench_cases
from mpicoll.bench import cli as bench
from mpicoll.families import registry
from mpicoll.selection import choose as selection

from conftest import WORLD, check


def _shared_tmp(tmp_path) -> str:
    return WORLD.bcast(str(tmp_path), root=0)


def test_parse_sizes():
    assert bench.parse_sizes("8:128") == [8, 16, 64, 128]
    assert bench.parse_sizes("8:100:2") == [8, 16, 32, 64, 100]
    assert bench.parse_sizes("8,64K,1M") == [8, 65536, 1 << 20]
    with pytest.raises(ValueError, match="--sizes"):
        bench.parse_sizes("8:4x")


def test_allreduce_sweep_times_every_algorithm_and_checks_them(tmp_path, capsys):
    out = _shared_tmp(tmp_path)
    capsys.readouterr()
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
        check(stats[bench.AUTO]["ran"] in registry.algorithms("allreduce"), f"auto ran {stats[bench.AUTO]}")
        check(abs(stats[bench.AUTO]["busbw_GBs"] / stats[bench.AUTO]["algbw_GBs"]
                  - (2 * (WORLD.size - 1) / WORLD.size if WORLD.size > 1 else 1.0)) < 1e-9)
    check(results == WORLD.bcast(results, root=0), "every rank returns the same (slowest-rank) figures")
    printed = capsys.readouterr().out
    check(WORLD.rank != 0 or f"auto ({res['sizes'][1]['stats'][bench.AUTO]['ran']})" in printed, printed)
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
        # bands over the measured sizes only: none below 8 B, none above 64 KiB
        check(bands[0] == [8, None] and bands[-1] == [None, None] and bands[-2][0] == (64 << 10) + 1)
        check(all(name in registry.algorithms("allreduce") for _, name in bands[1:-1]))
        check(selection.tuned_choice("allreduce", WORLD.size, 8) == bands[1][1])
        check(selection.tuned_choice("allreduce", WORLD.size, 64 << 10) == bands[-2][1])
        check(selection.tuned_choice("allreduce", WORLD.size, 4) is None)
        check(selection.tuned_choice("allreduce", WORLD.size, 1 << 30) is None)
        name, _ = selection.choose("allreduce", "auto", size=WORLD.size, nbytes=8, count=WORLD.size)
        check(name == bands[1][1])
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


# -- --style osu and --style nccl ------------------------------------------------------------------

_OSU_ROW = re.compile(r"^(\d+)\s+(built-in|mpicoll \S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+(.+)$")
_NCCL_HEAD = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
              "time", "algbw", "busbw", "#wrong", "algorithm"]


def _printed(capsys, argv: list[str], comm=None) -> tuple[list[dict], str]:
    """Run the bench command line; (results, what rank 0 printed; '' elsewhere)."""
    capsys.readouterr()
    results = bench.main(argv, comm=comm if comm is not None else WORLD)
    return results, capsys.readouterr().out


def test_parse_sizes_starts_at_zero_like_osu():
    assert bench.parse_sizes("0:8:2") == [0, 1, 2, 4, 8]
    assert bench.parse_sizes("0,1K") == [0, 1024]


@pytest.mark.parametrize("kind", ["numpy", "mmap", "bytearray"])
def test_osu_style_prints_osu_rows_for_every_kind_of_buffer(capsys, kind):
    colls = ["allreduce", "gatherv", "scatter", "alltoall", "exscan", "barrier"]
    results, out = _printed(capsys, ["--style", "osu", *colls, "--sizes", "0,4,64", "--iters", "1", "--warmup", "0",
                                     "--quiet", "--buffer", kind])
    check([r["collective"] for r in results] == colls)
    for res in results:
        want = [0] if res["collective"] == "barrier" else [0, 4, 64]
        check([e["bytes"] for e in res["sizes"]] == want, f"{res['collective']}: {res['sizes']}")
        check(res["buffer"] == kind and res["datatype"] == ("MPI_FLOAT" if res["op"] == "sum" else "MPI_BYTE"))
        for entry in res["sizes"]:
            check(set(entry["stats"]) == {"builtin", "auto"}, f"{entry['stats']}")
            for s in entry["stats"].values():
                check(s["min_us"] <= s["avg_us"] <= s["max_us"] and s["min_us"] > 0 and s["iterations"] >= 1, f"{s}")
                check(s["wrong"] in (None, 0), f"{res['collective']} {entry['bytes']} B: {s}")
    if WORLD.rank != 0:
        return
    headers = [line for line in out.splitlines() if line.startswith("# Size")]
    assert len(headers) == len(colls)
    for name in ("Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations"):
        assert name in headers[0]
    collective, rows = "", 0
    for line in out.splitlines():
        title = re.match(r"# OSU MPI (\w+) Latency Test", line)
        if title:
            collective = title[1].lower()
        if not line or line.startswith("#"):
            continue
        m = _OSU_ROW.match(line)
        assert m, line
        rows += 1
        avg, low, high, ratio = float(m[3]), float(m[4]), float(m[5]), float(m[7])
        assert 0 < low <= avg <= high and int(m[6]) >= 1, line
        if m[2] == "built-in":
            assert m[8] == "MPI library" and ratio == 1.0, line
            builtin_avg = avg
        # 0.00 only where the ratio rounds to it: a 0-byte call that mpicoll sends nothing for against a built-in
        # that still communicates (seen on MPICH at p = 5 on 2 cores: auto 0.60 us, the built-in over 120 us)
        assert ratio > 0 or avg / builtin_avg < 0.005, line
        if m[2] != "built-in":   # what auto ran: one of the collective's algorithms ("-": no message at all, 0 bytes)
            assert m[8] in registry.algorithms(collective) or (m[8] == "-" and m[1] == "0"), line
    assert rows == 2 * (3 * (len(colls) - 1) + 1), out     # built-in and auto, per size


def test_osu_style_names_the_algorithm_auto_ran(capsys, monkeypatch):
    # MPICOLL_ALGO forces what "auto" runs: the Algorithm column must follow it
    forced = "linear" if WORLD.size > 1 else registry.algorithms("allreduce")[0]
    monkeypatch.setenv("MPICOLL_ALGO", f"allreduce={forced}")
    results, _ = _printed(capsys, ["--style", "osu", "allreduce", "--sizes", "64", "--iters", "1", "--warmup", "0",
                                   "--quiet"])
    check(results[0]["sizes"][0]["stats"]["auto"]["algorithm"] == forced, f"{results[0]['sizes']}")
    monkeypatch.delenv("MPICOLL_ALGO")
    results, _ = _printed(capsys, ["--style", "osu", "allreduce", "--sizes", "64", "--algorithms", f"auto,{forced}",
                                   "--iters", "1", "--warmup", "0", "--quiet"])
    stats = results[0]["sizes"][0]["stats"]
    check(stats[forced]["algorithm"] == forced and stats["auto"]["algorithm"] in registry.algorithms("allreduce"))


def _nccl_rows(out: str, collective: str, label: str) -> tuple[list[str], list[list[str]], list[str]]:
    """(column names, rows split on blanks, summary lines) of one printed nccl-tests table."""
    block = out.split(f"# {collective}: {label},", 1)[1].split("\n\n", 1)[0].splitlines()
    head = next(line for line in block if line.startswith("#       size")).lstrip("#").split()
    rows = [line.split() for line in block[1:] if line and not line.startswith("#")]
    return head, rows, [line for line in block if line.startswith("# Out of") or line.startswith("# Avg bus")]


def test_nccl_style_columns_and_no_wrong_elements(capsys, tmp_path):
    out_dir = _shared_tmp(tmp_path)
    colls = ["allreduce", "bcast", "reduce", "gather", "allgatherv", "reduce_scatter", "alltoallv", "scan"]
    results, out = _printed(capsys, ["--style", "nccl", *colls, "--sizes", "8,256", "--iters", "1", "--warmup", "0",
                                     "--quiet", "--buffer", "bytearray", "--json", os.path.join(out_dir, "n.json"),
                                     "--csv", os.path.join(out_dir, "n.csv")])
    p = WORLD.size
    for res in results:
        # nccl-tests' sizes: the whole vector of p blocks where the collective has one per rank (float32 elements,
        # rounded down to whole blocks; a size with no element in a block is left out)
        q = p if res["collective"] in ("gather", "allgatherv", "reduce_scatter", "alltoallv") else 1
        want = [b // 4 // q * 4 * q for b in (8, 256) if b // 4 // q]
        check([e["bytes"] for e in res["sizes"]] == want, f"{res['collective']}: {res['sizes']}")
        for entry in res["sizes"]:
            in_place = [label for label in entry["stats"] if label.endswith(" in-place")]
            check(len(in_place) == (0 if res["collective"] == "bcast" else 2), f"{entry['stats'].keys()}")
            for label, s in entry["stats"].items():
                check(s["wrong"] == (None if label == "builtin" else 0), f"{res['collective']} {label}: {s}")
                factor = bench_cases.COLLS[res["collective"]].factor(p)
                check(abs(s["busbw_GBs"] - s["algbw_GBs"] * factor) < 1e-12 and s["avg_us"] > 0)
                check(s["median_us"] > 0, f"{res['collective']} {label}: the slowest rank's median round: {s}")
    WORLD.Barrier()
    if WORLD.rank != 0:
        return
    for res in results:
        for label in ("built-in", "mpicoll auto"):
            head, rows, summary = _nccl_rows(out, res["collective"], label)
            assert head == _NCCL_HEAD, head
            assert len(rows) == len(res["sizes"]) and summary[0].endswith(": 0 OK"), (rows, summary)
            assert float(summary[1].split(":")[1]) >= 0
            for row in rows:
                assert row[2] == "float" and row[3] == ("sum" if res["op"] == "sum" else "none")
                assert row[4] == ("0" if res["collective"] in ("bcast", "reduce", "gather") else "-1")
                assert float(row[5]) > 0 and row[8] == ("N/A" if label == "built-in" else "0"), row
                if res["collective"] == "bcast":
                    assert row[9:13] == ["N/A"] * 4, row
                else:
                    assert float(row[9]) > 0 and row[12] == "0", row
                assert (row[13] == "MPI" if label == "built-in" else
                        row[13] in registry.algorithms(res["collective"])), row
    with open(os.path.join(out_dir, "n.json")) as fh:
        saved = json.load(fh)
    assert [r["collective"] for r in saved] == colls
    run = saved[0]["run"]    # the run's facts, for a figure's label
    assert run["processes"] == p and run["mpi"] and run["date"] and "--style nccl" in run["command"], run
    with open(os.path.join(out_dir, "n.csv")) as fh:
        rows = list(csv.DictReader(fh))
    assert {r["label"] for r in rows} >= {"builtin", "auto", "auto in-place"} and all("wrong" in r for r in rows)


class _WrongAllreduce(mpicoll.Comm):
    """mpicoll's communicator with a deliberately wrong Allreduce: rank 0 adds 1 to its first result element."""

    def Allreduce(self, sendbuf, recvbuf, op=MPI.SUM, *, algorithm="auto"):  # noqa: N802 - mpi4py's name
        super().Allreduce(sendbuf, recvbuf, op, algorithm=algorithm)
        result = np.frombuffer(recvbuf[0] if isinstance(recvbuf, list) else recvbuf, np.float32)
        if self.rank == 0 and result.size:
            result[0] += 1


@pytest.mark.parametrize("kind", ["numpy", "mmap"])
def test_a_wrong_variant_is_counted_in_wrong(capsys, kind):
    results, out = _printed(capsys, ["--style", "nccl", "allreduce", "--sizes", "16,64", "--iters", "1",
                                     "--warmup", "0", "--quiet", "--buffer", kind], comm=_WrongAllreduce(WORLD))
    for entry in results[0]["sizes"]:
        stats = entry["stats"]
        check(stats["auto"]["wrong"] == 1 and stats["auto in-place"]["wrong"] == 1, f"{stats}")
        check(stats["builtin in-place"]["wrong"] == 0, f"{stats}")
    if WORLD.rank == 0:
        _, rows, summary = _nccl_rows(out, "allreduce", "mpicoll auto")
        assert all(row[8] == "1" and row[12] == "1" for row in rows), rows
        assert summary[0].endswith(": 4 FAILED"), summary
    _, out = _printed(capsys, ["--style", "osu", "allreduce", "--sizes", "16", "--iters", "1", "--warmup", "0",
                               "--quiet"], comm=_WrongAllreduce(WORLD))
    check(WORLD.rank != 0 or "WRONG: 1 elements differ" in out, out)


def _expected(name: str, inputs: list[np.ndarray], r: int) -> np.ndarray:
    """Rank r's result of ``name`` (blocks of 3 elements) from every rank's input, computed here."""
    if name == "allreduce":
        return sum(inputs)
    if name == "allgather":
        return np.concatenate(inputs)
    if name == "alltoall":
        return np.concatenate([x[3 * r:3 * r + 3] for x in inputs])
    if name == "reduce_scatter_block":
        return sum(inputs)[3 * r:3 * r + 3]
    if name == "scan":
        return sum(inputs[: r + 1])
    return inputs[0][3 * r:3 * r + 3]   # scatterv from rank 0


def test_the_reference_results_are_what_mpi_defines():
    # the cases' built-in results against values computed here from every rank's input: the #wrong check
    # compares with something that is right
    p, r = WORLD.size, WORLD.rank
    for kind in bench_cases.KINDS:
        for name in ("allreduce", "allgather", "alltoall", "reduce_scatter_block", "scan", "scatterv"):
            coll = bench_cases.COLLS[name]
            for in_place in (False, True):
                case = bench_cases.Case(coll, r, p, 3, kind=kind, dtype="float32", in_place=in_place)
                case.fill()
                getattr(MPI.Intracomm, coll.method)(WORLD, *case.args)
                inputs = [bench_cases.Case(coll, q, p, 3, kind=kind, dtype="float32").input for q in range(p)]
                expected = _expected(name, inputs, r)
                got = case.result()
                ok = got is None if (name == "scatterv" and in_place and r == 0) else np.array_equal(got, expected)
                check(ok, f"{kind} {name} in_place={in_place}: {got} != {expected}")


def test_styles_refuse_bad_options(capsys):
    for argv in (["--style", "osu", "nope"], ["--style", "nccl", "--algorithms", "persistent"],
                 ["--style", "osu", "--plot", "x.png"], ["--style", "nccl", "--root", str(WORLD.size)],
                 ["--buffer", "mmap"]):
        with pytest.raises(SystemExit):
            bench.main([*argv, "--quiet"], comm=WORLD)
    capsys.readouterr()
