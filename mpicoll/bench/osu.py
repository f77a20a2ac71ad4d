"""mpi4py's own OSU benchmark demos, run unchanged with the built-in and with :class:`mpicoll.Comm`, side by side.

mpi4py ships OSU-style latency demos (``demo/osu_bcast.py`` and friends) in its
sdist.  Each is a function ``osu_<name>(...)`` that reads ``comm = MPI.COMM_WORLD``
when called and prints, on rank 0, ``# Size [B]  Latency [us]`` lines.  This module
gets the demos of the installed mpi4py (see :mod:`mpicoll.tools.mpi4py_sdist`), loads a
demo file with :func:`runpy.run_path` (its ``__main__`` block does not run) and calls
its function twice per repetition: once as it is, once with the demo's global ``MPI``
swapped for a stand-in whose ``COMM_WORLD`` is ``mpicoll.Comm(MPI.COMM_WORLD)`` and
whose every other name is mpi4py's.  Only the demo sees the swap; nothing of the
demos' code is copied here.  The printed tables are parsed and shown side by side::

    python -m mpicoll.launch -n 2 -m mpicoll.bench.osu                 # the seven collective demos
    python -m mpicoll.launch -n 2 -m mpicoll.bench.osu bcast alltoallv --iters 100 --repeat 3
    python -m mpicoll.launch -n 2 -m mpicoll.bench.osu osu_bcast.py           # the demo's file name works too
    python -m mpicoll.launch -n 2 -m mpicoll.bench.osu --repeat 3 --json osu_p2.json   # and keep the tables

Columns per size: built-in latency, mpicoll latency (us, the demo's own average
per call) and their ratio; then the geometric mean of the ratios over sizes
<= 1 KiB and >= 64 KiB, per demo and over all demos (the barrier demo has one
size, 0 B).  ``--json FILE`` writes both tables of every demo and the run's facts
(:func:`mpicoll.tools.record.run_record`); :mod:`mpicoll.bench.figures` draws them.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import os
import runpy
import sys
from collections.abc import Callable, Sequence
from typing import Any

import mpi4py
from mpi4py import MPI

from mpicoll.tools.cli import Parser, guarded
from mpicoll.tools.record import run_record, write_json

#: the collective demos of mpi4py's sdist (``demo/osu_<name>.py``), in the order they run by default
DEMOS = ("bcast", "gather", "scatter", "allgather", "alltoall", "alltoallv", "barrier")
#: geomean groups: sizes up to SMALL bytes, and sizes from LARGE bytes on
SMALL, LARGE = 1 << 10, 64 << 10

Table = dict[int, float]  # message size in bytes -> latency in us


class _WorldSwapped:
    """Stands in for the ``mpi4py.MPI`` module inside a demo: ``COMM_WORLD`` is ``world``, the rest is mpi4py's."""

    def __init__(self, world: MPI.Intracomm) -> None:
        self.COMM_WORLD = world

    def __getattr__(self, name: str) -> Any:
        return getattr(MPI, name)


def demo_dir(comm: MPI.Intracomm) -> str:
    """The ``demo/`` folder of the installed mpi4py's sdist: rank 0 fetches it, every rank gets the path.

    Raises ``RuntimeError`` on every rank when it cannot be had (no network, no pip).
    """
    from mpicoll.tools.mpi4py_sdist import sdist_dir

    found: tuple[str, str] = ("", "")
    if comm.Get_rank() == 0:
        try:
            found = (sdist_dir("demo", "osu_bcast.py"), "")
        except Exception as exc:  # noqa: BLE001 - any failure is reported on every rank below
            found = ("", f"{type(exc).__name__}: {exc}")
    path, error = comm.bcast(found, root=0)
    if error:
        raise RuntimeError(f"could not get mpi4py's demos: {error}")
    return path


def demo_name(text: str) -> str:
    """A demo's short name: ``bcast``, ``osu_bcast`` and ``osu_bcast.py`` all name ``bcast``."""
    return text.removesuffix(".py").removeprefix("osu_")


def load_demo(directory: str, name: str) -> Callable[..., None]:
    """The function ``osu_<name>`` of ``<directory>/osu_<name>.py``, loaded without running its main block."""
    path = os.path.join(directory, f"osu_{name}.py")
    if not os.path.isfile(path):
        raise ValueError(f"no OSU demo {name!r} in {directory} (known: {', '.join(DEMOS)})")
    return runpy.run_path(path, run_name=f"osu_{name}")[f"osu_{name}"]


def demo_kwargs(demo: Callable[..., None], iters: int | None, max_size: int | None) -> dict[str, int]:
    """Keyword arguments for ``demo``: ``iters`` timed calls per size (a tenth of it, at least 1, untimed first)."""
    wanted: dict[str, int] = {}
    if iters is not None:
        skip = max(1, iters // 10)
        wanted.update(loop=iters, loop_large=iters, skip=skip, skip_large=skip)
    if max_size is not None:
        wanted["MAX_MSG_SIZE"] = max_size
    accepted = inspect.signature(demo).parameters
    return {key: value for key, value in wanted.items() if key in accepted}


def parse_table(text: str) -> Table:
    """The ``size latency`` rows of a demo's printed output (``#`` lines are its headers)."""
    table: Table = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.lstrip().startswith("#"):
            continue
        if len(fields) != 2:
            raise ValueError(f"unexpected line in an OSU demo's output: {line!r}")
        table[int(fields[0])] = float(fields[1])
    return table


def run_demo(demo: Callable[..., None], world: MPI.Intracomm, kwargs: dict[str, int]) -> Table:
    """Call ``demo`` with ``MPI.COMM_WORLD`` read as ``world``; its table (rank 0; empty elsewhere)."""
    namespace = demo.__globals__
    saved = namespace["MPI"]
    namespace["MPI"] = _WorldSwapped(world)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            demo(**kwargs)
    finally:
        namespace["MPI"] = saved
    return parse_table(out.getvalue())


def compare(demo: Callable[..., None], kwargs: dict[str, int], repeat: int) -> tuple[Table, Table]:
    """Built-in and mpicoll tables of ``demo``, run alternately ``repeat`` times; per size the lowest average."""
    from mpicoll import Comm

    ours = Comm(MPI.COMM_WORLD)
    builtin: Table = {}
    mpicoll: Table = {}
    for _ in range(repeat):
        for best, world in ((builtin, MPI.COMM_WORLD), (mpicoll, ours)):
            for size, latency in run_demo(demo, world, kwargs).items():
                best[size] = min(latency, best.get(size, math.inf))
    return builtin, mpicoll


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive ``values``; nan when there are none."""
    if not values:
        return math.nan
    return math.exp(sum(math.log(v) for v in values) / len(values))


def ratios(builtin: Table, mpicoll: Table) -> dict[int, float]:
    """mpicoll / built-in latency per size (sizes in both tables with a positive built-in time)."""
    return {size: mpicoll[size] / builtin[size] for size in builtin if size in mpicoll and builtin[size] > 0}


def split_geomeans(by_size: dict[int, float]) -> tuple[float, float]:
    """Geomean of the ratios over sizes <= SMALL and over sizes >= LARGE."""
    return (geomean([r for s, r in by_size.items() if s <= SMALL]),
            geomean([r for s, r in by_size.items() if s >= LARGE]))


def _fmt(value: float) -> str:
    """A geomean for the table: two decimals, or ``-`` when no size fell in its group."""
    return "-" if math.isnan(value) else f"{value:.2f}"


def format_demo(name: str, builtin: Table, ours: Table) -> list[str]:
    """OSU-style lines for one demo: a header, one row per size, the two geomeans."""
    by_size = ratios(builtin, ours)
    lines = [f"# osu_{name}", f"# {'Size [B]':<8s}{'built-in [us]':>16s}{'mpicoll [us]':>16s}{'ratio':>10s}"]
    for size in sorted(builtin):
        ratio = f"{by_size[size]:10.2f}" if size in by_size else f"{'-':>10s}"
        lines.append(f"{size:10d}{builtin[size]:16.2f}{ours.get(size, math.nan):16.2f}{ratio}")
    small, large = split_geomeans(by_size)
    lines.append(f"# geomean ratio: <= 1 KiB {_fmt(small)}   >= 64 KiB {_fmt(large)}")
    return lines


def osu_record(tables: dict[str, dict[str, Table]], processes: int, repeat: int, args: list[str]) -> dict[str, Any]:
    """What ``--json`` writes: ``{"kind": "osu", "run": ..., "repeat": ..., "demos": {name: {"builtin_us":
    {size: us}, "mpicoll_us": {size: us}}}}`` (JSON keys are strings: the sizes in bytes); ``args``: the
    command's arguments."""
    command = " ".join(["python -m mpicoll.launch", "-n", str(processes), "-m mpicoll osu", *args])
    return {"kind": "osu", "run": run_record(processes, command), "repeat": repeat,
            "demos": {name: {which: {str(size): us for size, us in table.items()} for which, table in both.items()}
                      for name, both in tables.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m mpicoll osu", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(DEMOS),
                        help=f"demos to run: <name>, osu_<name> or osu_<name>.py of mpi4py's demo/ "
                             f"(default: {' '.join(DEMOS)})")
    parser.add_argument("--iters", type=int, help="timed calls per size (default: each demo's own loop counts)")
    parser.add_argument("--max-size", type=int, help="largest message size in bytes (default: the demo's, 1 MiB)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="built-in/mpicoll runs, alternating; per size the lowest average is kept (default 1)")
    parser.add_argument("--json", help="also write every demo's two tables and the run's facts to this file")
    ns = parser.parse_args(argv)
    if ns.iters is not None and ns.iters < 1 or ns.repeat < 1 or ns.max_size is not None and ns.max_size < 0:
        parser.error("--iters and --repeat must be >= 1, --max-size >= 0")
    world = MPI.COMM_WORLD
    if world.Get_size() < 2:
        parser.error("the OSU demos need at least two processes: python -m mpicoll.launch -n 2 -m mpicoll osu")
    directory = demo_dir(world)
    names = [demo_name(name) for name in ns.names]
    try:   # every rank looks in the same folder, so every rank finds a wrong name
        demos = [load_demo(directory, name) for name in names]
    except ValueError as exc:
        parser.error(str(exc))
    rank0 = world.Get_rank() == 0
    if rank0:
        library = MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]   # Open MPI: a NUL at the end
        print(f"# {library}; mpi4py {mpi4py.__version__}; OSU demos from {directory}")
        print(f"# built-in MPI.COMM_WORLD vs mpicoll.Comm(MPI.COMM_WORLD), p = {world.Get_size()}, "
              f"repeat = {ns.repeat}; ratio = mpicoll / built-in", flush=True)
    every: dict[str, dict[int, float]] = {}
    tables: dict[str, dict[str, Table]] = {}
    for name, demo in zip(names, demos):
        builtin, mpicoll = compare(demo, demo_kwargs(demo, ns.iters, ns.max_size), ns.repeat)
        if rank0:
            print("\n".join(format_demo(name, builtin, mpicoll)), flush=True)
            every[name] = ratios(builtin, mpicoll)
            tables[name] = {"builtin_us": builtin, "mpicoll_us": mpicoll}
    if rank0 and ns.json:
        write_json(ns.json, osu_record(tables, world.Get_size(), ns.repeat, sys.argv[1:] if argv is None else argv))
    if rank0 and len(every) > 1:
        small = geomean([r for t in every.values() for s, r in t.items() if s <= SMALL])
        large = geomean([r for t in every.values() for s, r in t.items() if s >= LARGE])
        print(f"# all demos: geomean ratio <= 1 KiB {_fmt(small)}   >= 64 KiB {_fmt(large)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main))
