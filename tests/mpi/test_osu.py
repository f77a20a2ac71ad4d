"""``python -m mpicoll.bench.osu``: mpi4py's OSU demos run unchanged against the built-in and mpicoll, at tiny sizes."""

from __future__ import annotations

import math

import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.bench import osu

from conftest import WORLD, check

pytestmark = pytest.mark.skipif(WORLD.size < 2, reason="mpi4py's OSU demos need at least two processes")


@pytest.fixture(scope="module")
def demos() -> str:
    try:
        return osu.demo_dir(WORLD)  # the same outcome on every rank (rank 0 fetches, then broadcasts)
    except RuntimeError as exc:  # no network or no pip: nothing to run the demos from
        pytest.skip(str(exc))


def test_parse_table_reads_the_demos_rows_and_rejects_others():
    text = "# MPI Broadcast Latency Test\n# Size [B]        Latency [us]\n         0                1.25\n" \
           "      1024               12.50\n"
    assert osu.parse_table(text) == {0: 1.25, 1024: 12.5}
    with pytest.raises(ValueError, match="unexpected line"):
        osu.parse_table("0 1.0 extra\n")


class _CountingComm(mpicoll.Comm):
    """mpicoll's communicator, counting the Bcast calls that reach it."""

    calls = 0

    def Bcast(self, *args, **kwargs):  # noqa: N802 - mpi4py's name
        type(self).calls += 1
        return super().Bcast(*args, **kwargs)


def test_the_demo_calls_the_swapped_in_communicator(demos):
    demo = osu.load_demo(demos, "bcast")
    kwargs = osu.demo_kwargs(demo, iters=3, max_size=16)
    table = osu.run_demo(demo, _CountingComm(WORLD), kwargs)
    check(demo.__globals__["MPI"] is MPI, "the demo's MPI global was not restored")
    sizes = [0, 1, 2, 4, 8, 16]  # the demo's message_sizes(16)
    # skip = max(1, 3 // 10) = 1 untimed call + 3 timed ones per size
    check(_CountingComm.calls == len(sizes) * (3 + 1), f"{_CountingComm.calls} Bcast calls reached mpicoll")
    check(WORLD.rank != 0 or sorted(table) == sizes, f"rank 0 parsed sizes {sorted(table)}")


def test_side_by_side_table_has_positive_ratios(demos):
    demo = osu.load_demo(demos, "alltoallv")
    builtin, ours = osu.compare(demo, osu.demo_kwargs(demo, iters=2, max_size=8), repeat=2)
    check(WORLD.rank == 0 or (builtin == {} and ours == {}), "only rank 0 prints the demo's table")
    if WORLD.rank == 0:  # plain asserts from here: only rank 0 has the tables, and no rank calls MPI any more
        ratios = osu.ratios(builtin, ours)
        assert sorted(ratios) == [0, 1, 2, 4, 8]
        assert all(r > 0 and math.isfinite(r) for r in ratios.values()), ratios
        lines = osu.format_demo("alltoallv", builtin, ours)
        assert len(lines) == 2 + 5 + 1 and lines[-1].startswith("# geomean ratio: <= 1 KiB "), lines
        small, large = osu.split_geomeans(ratios)
        assert small > 0 and math.isnan(large), (small, large)


def test_a_demo_is_named_with_or_without_its_prefix(demos, capsys):
    assert [osu.demo_name(n) for n in ("bcast", "osu_bcast", "osu_bcast.py")] == ["bcast"] * 3
    capsys.readouterr()
    osu.main(["osu_barrier", "--iters", "2"])
    out = capsys.readouterr().out
    check(WORLD.rank != 0 or ("# osu_barrier\n" in out and "osu_osu" not in out), out)


def test_json_keeps_both_tables_and_the_run(demos, tmp_path, capsys):
    """``--json``: rank 0 writes every demo's two tables (sizes as strings) and the run's facts."""
    import json
    import os

    path = WORLD.bcast(str(tmp_path / "osu.json") if WORLD.rank == 0 else None, root=0)
    osu.main(["osu_barrier", "alltoallv", "--iters", "2", "--max-size", "8", "--json", path])
    capsys.readouterr()
    WORLD.Barrier()
    if WORLD.rank != 0:
        return
    assert os.path.isfile(path)
    with open(path) as fh:
        data = json.load(fh)
    assert data["kind"] == "osu" and data["run"]["processes"] == WORLD.size and data["repeat"] == 1
    assert data["run"]["command"].endswith("-m mpicoll osu osu_barrier alltoallv --iters 2 --max-size 8 --json "
                                           + path), data["run"]["command"]
    assert set(data["demos"]) == {"barrier", "alltoallv"}
    assert sorted(data["demos"]["alltoallv"]["builtin_us"], key=int) == ["0", "1", "2", "4", "8"]
    assert all(v > 0 for v in data["demos"]["alltoallv"]["mpicoll_us"].values())

