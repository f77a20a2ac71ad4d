"""``import mpicoll`` needs mpi4py only for the names that use it (PEP 562 lazy attributes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mpicoll

ROOT = Path(__file__).resolve().parents[2]
# mpi4py made unimportable: ``sys.modules[name] = None`` makes every ``import name`` raise ImportError
BLOCK = "import sys; sys.modules['mpi4py'] = None; "


def _python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, env=env,
                          timeout=120, cwd=ROOT)


def test_schedules_without_mpi4py() -> None:
    out = _python("import mpicoll; s = mpicoll.schedules('allreduce', 'ring', 4); "
                  "print(len(s[0].rounds), sorted(mpicoll.collectives())[0], 'Comm' in mpicoll.__all__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6", "allgather", "True"]   # ring at p = 4: 2 (p - 1) rounds


TOOLS = [
    ["show", "allreduce", "ring", "-p", "4"],
    ["show", "gather", "binomial", "-p", "5", "--root", "2"],
    ["show", "bcast", "binomial", "-p", "1"],
    ["verify", "allreduce", "-p", "1,2,5", "-q"],
    ["verify", "reduce_scatter", "pairwise", "-p", "1,3,4", "-q"],
    ["model", "allreduce", "-p", "6", "--bytes", "64K"],
    ["model", "alltoall", "-p", "8", "--bytes", "1K", "--json"],
]


def test_tools_without_mpi4py(tmp_path: Path) -> None:
    """show, verify, model and draw run where ``import mpi4py`` fails."""
    png, svg = tmp_path / "ring.png", tmp_path / "gather.svg"
    commands = [*TOOLS, ["draw", "allreduce", "ring", "-p", "4", "-o", str(png)],
                ["draw", "gather", "binomial", "-p", "5", "-o", str(svg)]]
    out = _python("from mpicoll.__main__ import main\n"
                  f"for argv in {commands!r}:\n"
                  "    print('exit', ' '.join(argv[:2]), main(argv), flush=True)\n"
                  "print('mpi4py loaded:', sys.modules.get('mpi4py') is not None)")
    assert out.returncode == 0, out.stderr
    exits = [line.split() for line in out.stdout.splitlines() if line.startswith("exit ")]
    assert len(exits) == len(commands) and all(e[-1] == "0" for e in exits), out.stdout + out.stderr
    assert "mpi4py loaded: False" in out.stdout
    assert "incoming[2] + send[2]" in out.stdout                  # the ring table
    assert "scratch subtree (its own layout)" in out.stdout       # the binomial gather's declared scratch
    assert "auto chooses: " in out.stdout and "auto chooses: None" not in out.stdout   # rules need no MPI
    assert png.stat().st_size > 0 and svg.read_text().lstrip().startswith("<?xml")


def test_one_rank_schedules_and_the_simulator_without_mpi4py() -> None:
    """p = 1 schedules come from the contracts (mpicoll.ir.contracts), which need no mpi4py; so does simulate."""
    out = _python("import numpy as np, mpicoll\n"
                  "from mpicoll.analysis.simulate import simulate\n"
                  "n = 0\n"
                  "for c in mpicoll.collectives():\n"
                  "    for a in mpicoll.algorithms(c):\n"
                  "        n += len(mpicoll.schedules(c, a, 1)[0].rounds) <= 1\n"
                  "print('p1', n, sum(len(mpicoll.algorithms(c)) for c in mpicoll.collectives()))\n"
                  "print(mpicoll.schedules('allreduce', 'ring', 1)[0].rounds[0])\n"
                  "x = [np.arange(4.0) * (r + 1) for r in range(3)]\n"
                  "print('sum', simulate('allreduce', 'ring', x)[1].tolist())\n"
                  "print('max', simulate('reduce', 'binomial', x, op='MAX', root=2)[2].tolist())\n"
                  "print('mpi4py loaded:', sys.modules.get('mpi4py') is not None)")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    _, n, total = lines[0].split()
    assert n == total and int(total) > 40
    assert lines[1] == "recv[0]=send[0]"                      # the one-rank contract: copy send to recv
    assert lines[2] == "sum [0.0, 6.0, 12.0, 18.0]"
    assert lines[3] == "max [0.0, 3.0, 6.0, 9.0]"
    assert lines[4] == "mpi4py loaded: False"


def test_comm_without_mpi4py_is_a_clear_import_error() -> None:
    out = _python("from mpicoll import Comm")
    assert out.returncode != 0
    assert "ImportError" in out.stderr or "ModuleNotFoundError" in out.stderr
    assert "mpi4py" in out.stderr


@pytest.mark.parametrize("name", mpicoll.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(mpicoll, name) is not None
    assert name in dir(mpicoll)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        mpicoll.no_such_name  # noqa: B018


def test_dir_lists_the_public_names_only():
    import mpicoll

    names = dir(mpicoll)
    assert "Comm" in names and "algorithms" in names and "__version__" in names
    assert not {"annotations", "importlib", "Any", "TYPE_CHECKING"} & set(names)
