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
