"""What a benchmark's JSON file says about its run: when, on what machine and MPI, with which command.

Every benchmark that writes JSON (``python -m mpicoll bench --json``, ``python -m mpicoll osu --json``,
``python -m mpicoll.torch.bench --json``, ``benchmarks/reproducible.py --json``) puts :func:`run_record`
under the key ``"run"``, so that a figure drawn from the file (:mod:`mpicoll.bench.figures`) can say
where and when it was measured.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from typing import Any

__all__ = ["run_record", "write_json"]


def run_record(processes: int, command: str | None = None) -> dict[str, Any]:
    """The facts of this run: date (UTC), host, cores, load average at the end, MPI library, versions.

    Parameters
    ----------
    processes : int
        The number of MPI processes the benchmark ran on.
    command : str, optional
        The command line (default: this process's ``sys.argv``).

    Returns
    -------
    dict
        JSON-serialisable: ``date``, ``machine``, ``cores``, ``load``, ``processes``, ``mpi``,
        ``mpi4py``, ``mpicoll``, ``python``, ``command``.
    """
    import mpi4py  # noqa: PLC0415
    from mpi4py import MPI  # noqa: PLC0415

    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else []
    library = MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores",
            "cores": os.cpu_count(), "load": [round(x, 2) for x in load], "processes": processes,
            "mpi": library.split(",")[0], "mpi4py": mpi4py.__version__, "mpicoll": _version(),
            "python": platform.python_version(),
            "command": command if command is not None else " ".join(["python", *sys.argv])}


def _version() -> str:
    """mpicoll's installed version (its metadata: this layer does not import the package itself)."""
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.version("mpicoll")
    except metadata.PackageNotFoundError:
        return "not installed"


def write_json(path: str, data: Any) -> None:
    """Write ``data`` to ``path`` as indented JSON."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")
