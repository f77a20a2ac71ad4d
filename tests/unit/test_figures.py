"""``python -m mpicoll.bench.figures``: every kind of benchmark JSON drawn, the ratios it draws, bad files refused."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

import pytest

from mpicoll.bench import figures

pytest.importorskip("matplotlib")
ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = {"date": "2026-11-28 09:00 UTC", "machine": "Linux x86_64, 2 cores", "mpi": "Open MPI v5.0.11",
       "processes": 2, "load": [0.5, 0.5, 0.5], "command": "test"}


def bench_result(collective: str, sizes: dict[int, tuple[float, float]]) -> dict:
    """A ``--style osu`` result: per size (built-in, auto) medians in us, averages twice as long."""
    return {"style": "osu", "collective": collective, "p": 2, "run": RUN, "sizes": [
        {"bytes": b, "stats": {"builtin": {"median_us": t0, "avg_us": 2 * t0},
                               "auto": {"median_us": t1, "avg_us": 2 * t1 * 10}}}
        for b, (t0, t1) in sizes.items()]}


def write(tmp_path: pathlib.Path, name: str, data: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_series_is_the_ratio_of_medians_and_keeps_a_barrier_s_zero_bytes():
    res = bench_result("allreduce", {8: (1.0, 2.0), 1024: (4.0, 2.0)})
    assert figures.series_of(res) == [(8, 2.0), (1024, 0.5)]            # medians, not the averages
    assert figures.series_of(bench_result("barrier", {0: (2.0, 3.0)})) == [(0, 1.5)]
    table = {"builtin": {"median_s": 1e-6}, "auto": {"median_s": 3e-6}}  # --style table's seconds
    assert figures.series_of({"sizes": [{"bytes": 64, "stats": table}]}) == [(64, pytest.approx(3.0))]


def test_every_kind_is_drawn_and_summarised(tmp_path):
    files = [
        write(tmp_path, "bench.json", [bench_result("allreduce", {8: (1.0, 2.0), 65536: (10.0, 5.0)}),
                                       bench_result("barrier", {0: (1.0, 3.0)})]),
        write(tmp_path, "osu.json", {"kind": "osu", "run": RUN, "repeat": 1, "demos": {
            "bcast": {"builtin_us": {"0": 1.0, "1": 1.0, "65536": 8.0}, "mpicoll_us": {"0": 2.0, "1": 3.0,
                                                                                       "65536": 8.0}}}}),
        write(tmp_path, "geo.json", {"kind": "osu-geomeans", "run": {"date": "2026-11-27"}, "geomeans": {
            "8": {"bcast": [2.0, 0.5], "barrier": [3.0, None]}, "16": {"bcast": [2.2, 1.4], "barrier": [2.7, None]}}}),
        write(tmp_path, "torch.json", {"kind": "torch", "run": RUN, "rows": [
            {"op": "all_reduce", "bytes": 8, "time_us": {"mpicoll": 10.0, "gloo": 100.0}},
            {"op": "all_reduce", "bytes": 1024, "time_us": {"mpicoll": 20.0, "gloo": 40.0}}]}),
        write(tmp_path, "rep.json", {"kind": "reproducible", "run": RUN, "form": "blocking", "rows": [
            {"bytes": 8, "dtype": "float64", "ordinary_us": 2.0, "reproducible_us": 3.0, "builtin_us": 2.0},
            {"bytes": 1024, "dtype": "float64", "ordinary_us": 4.0, "reproducible_us": 4.0, "builtin_us": 4.0}]}),
    ]
    out = tmp_path / "figs"
    lines = figures.draw_all(files, str(out))
    assert sorted(p.name for p in out.iterdir()) == ["collectives_p2.svg", "osu_geomeans.svg",
                                                      "reproducible_p2.svg", "torch_p2.svg"]
    text = "\n".join(lines)
    # bench: <= 1 KiB the allreduce 2.0 and the barrier 3.0 -> sqrt(6); >= 64 KiB 0.5.  OSU: 2, 3 and 1.
    assert f"bench <= 1 KiB {math.sqrt(6):.2f}, >= 64 KiB 0.50" in text
    assert f"OSU demos <= 1 KiB {math.sqrt(6):.2f}, >= 64 KiB 1.00" in text
    assert "mpicoll / gloo 0.22 (min 0.10, max 0.50)" in text
    assert "float64 reproducible / ordinary 1.00 to 1.50" in text
    svg = (out / "collectives_p2.svg").read_text()
    assert "Open MPI v5.0.11" in svg and "2026-11-28" in svg and "allreduce" in svg   # labelled with its run
    again = tmp_path / "again"
    figures.draw_all(files, str(again))
    assert (again / "torch_p2.svg").read_bytes() == (out / "torch_p2.svg").read_bytes()   # a redraw is identical


def test_a_file_that_no_benchmark_wrote_is_refused(tmp_path):
    bad = write(tmp_path, "bad.json", {"kind": "something else"})
    with pytest.raises(ValueError, match="bad.json"):
        figures.load(bad)
    proc = subprocess.run([sys.executable, "-m", "mpicoll.bench.figures", bad, "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "bad.json" in proc.stderr and "Traceback" not in proc.stderr


def test_the_committed_figures_are_what_the_committed_json_draws(tmp_path):
    """docs/images/perf holds what one command draws from benchmarks/results (nothing edited by hand)."""
    import matplotlib

    files = sorted(str(p) for p in (ROOT / "benchmarks" / "results").glob("*.json"))
    assert files
    made_by = (ROOT / "docs" / "images" / "perf" / "torch_p2.svg").read_text()
    if f"Matplotlib v{matplotlib.__version__}," not in made_by:   # another version lays text out otherwise
        pytest.skip(f"the figures were drawn by another matplotlib than {matplotlib.__version__}")
    figures.draw_all(files, str(tmp_path))
    for drawn in tmp_path.iterdir():
        committed = ROOT / "docs" / "images" / "perf" / drawn.name
        assert committed.read_bytes() == drawn.read_bytes(), f"{committed} differs from what its JSON draws"
