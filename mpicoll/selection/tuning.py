"""What every rank of a communicator decides "auto" from: read on rank 0, broadcast once.

"auto" reads two files: the tuning file (``python -m mpicoll.bench --tune``,
:func:`tuning_path`) and the calibration file (``python -m
mpicoll calibrate``, :func:`mpicoll.analysis.presets.calibration_path`).  Each process
reads its own, and nodes need not share a file system or a home directory, so
two ranks could read different constants and choose different algorithms for
the same call: a hang.  So a communicator's ranks never decide from their own
files.  On the first ``algorithm="auto"`` call on a communicator its rank 0
reads the files (:func:`local`) and broadcasts what it read, once, with a
collective ``Bcast`` on the communicator's private duplicate (a collective,
so it can never match mpicoll's point-to-point messages, whatever their tag);
every rank keeps the same :class:`Shared` for the life of the communicator
(:func:`of_comm`).  Every rank makes that first "auto" call at the same point,
since every rank calls a communicator's collectives in the same order.  A
malformed calibration file on rank 0 makes every rank raise the same error.

Without a communicator (the model tools, unit tests) :func:`local` alone is used.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpicoll.analysis.cost import Machine

__all__ = ["Shared", "local", "of_comm", "forget"]

ATTR = "_mpicoll_agreed"     # where a communicator keeps its Shared
_LOCAL: OrderedDict[int, Shared] = OrderedDict()   # local(size), by size (bounded; cleared by forget())
_LOCAL_ENTRIES = 64
_KEYS: dict[tuple, Any] = {}    # constants -> the small number that names them in decision caches
_KEY_ENTRIES = 1024


@dataclass(frozen=True)
class Shared:
    """The data "auto" decides from, the same on every rank of a communicator.

    ``machine`` holds the cost-model constants (calibrated, or the built-in
    default), ``source`` says where they came from, ``tuning`` maps a
    collective to the tuning file's bands for this communicator's size, and
    ``key`` identifies the constants in caches (equal constants, equal key).
    """

    machine: Machine
    source: str
    tuning: dict[str, tuple[tuple[int | None, str], ...]]
    key: tuple

    @classmethod
    def make(cls, machine: Machine, source: str, tuning: dict[str, Any]) -> Shared:
        bands = {coll: tuple((None if upper is None else int(upper), str(name)) for upper, name in rows)
                 for coll, rows in tuning.items()}
        full = tuple((f.name, _hashable(getattr(machine, f.name))) for f in dataclasses.fields(machine))
        key = _KEYS.get(full)
        if key is None:   # a small number names the constants (cheap to hash on every call); bounded
            key = full
            if len(_KEYS) < _KEY_ENTRIES:
                key = _KEYS[full] = len(_KEYS)
        return cls(machine, source, bands, key)

    def to_json(self) -> str:
        return json.dumps({"machine": dataclasses.asdict(self.machine), "source": self.source,
                           "tuning": {c: [list(b) for b in rows] for c, rows in self.tuning.items()}})

    @classmethod
    def from_json(cls, text: str) -> Shared:
        data = json.loads(text)
        if "error" in data:
            raise ValueError(data["error"])
        return cls.make(Machine(**data["machine"]), data["source"], data["tuning"])


def _hashable(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def tuning_path() -> str:
    """The tuning file: ``$MPICOLL_TUNING``, else ``~/.config/mpicoll/tuning.json``."""
    return os.environ.get("MPICOLL_TUNING") or os.path.join(os.path.expanduser("~"), ".config", "mpicoll",
                                                             "tuning.json")


_TUNING: dict[str, Any] | None = None   # this process's tuning file, parsed once (see forget)


def tuning_file() -> dict[str, Any]:
    """This process's tuning file, parsed (``{}`` when there is none; a malformed one is ignored with a warning)."""
    global _TUNING
    if _TUNING is None:
        try:
            with open(tuning_path()) as fh:
                _TUNING = json.load(fh)
            if not isinstance(_TUNING, dict):
                raise ValueError("expected a JSON object")
        except FileNotFoundError:
            _TUNING = {}
        except (OSError, ValueError) as exc:
            import warnings  # noqa: PLC0415

            warnings.warn(f"mpicoll: ignoring the tuning file {tuning_path()}: {exc}", stacklevel=2)
            _TUNING = {}
    return _TUNING


def _tuning_for(size: int) -> dict[str, Any]:
    """This process's tuning file: the bands of every collective at ``size`` ranks (malformed ones dropped)."""
    out: dict[str, Any] = {}
    for coll, by_p in tuning_file().items():
        rows = by_p.get(str(size)) if isinstance(by_p, dict) else None
        if isinstance(rows, list) and all(isinstance(r, (list, tuple)) and len(r) == 2 for r in rows):
            out[coll] = rows
    return out


def local(size: int) -> Shared:
    """What this process's own files say for ``size`` ranks (cached until :func:`forget`)."""
    hit = _LOCAL.get(size)
    if hit is not None:
        return hit
    from mpicoll.analysis.presets import DEFAULT_LOCAL, calibration_path, load_local  # noqa: PLC0415

    path = calibration_path()
    if path.exists():
        machine, source = load_local(path), f"calibration file {path}"
    else:
        machine, source = DEFAULT_LOCAL, f"built-in preset {DEFAULT_LOCAL.name!r}"
    shared = Shared.make(machine, source, _tuning_for(size))
    _LOCAL[size] = shared
    while len(_LOCAL) > _LOCAL_ENTRIES:
        _LOCAL.popitem(last=False)
    return shared


def forget() -> None:
    """Drop what :func:`local` and :func:`tuning_file` read (communicators keep what they agreed on)."""
    global _TUNING
    _TUNING = None
    _LOCAL.clear()


def of_comm(comm: Any, timeout: float | None = None) -> Shared:
    """Rank 0's :class:`Shared`, on every rank of ``comm`` (collective on its first call for ``comm``).

    Kept on ``comm`` (an :class:`mpicoll.Comm`) afterwards.  The broadcast runs
    on ``comm.private`` when there is one; with a ``timeout`` (seconds) it is
    nonblocking and watched, and a rank left waiting raises
    :class:`mpicoll.CollectiveTimeout`.
    """
    store = getattr(comm, "__dict__", None)
    if store is not None:
        hit = store.get(ATTR)
        if hit is not None:
            return hit
    talk = getattr(comm, "private", comm)
    if timeout is None:
        timeout = getattr(comm, "timeout", None)
    text = ""
    if talk.Get_rank() == 0:
        try:
            text = local(talk.Get_size()).to_json()
        except (OSError, ValueError) as exc:   # every rank raises it, below
            text = json.dumps({"error": f"mpicoll: algorithm='auto' on rank 0: {exc}"})
    shared = Shared.from_json(_bcast_text(talk, text, timeout))
    if store is not None:
        store[ATTR] = shared
    return shared


def _bcast_text(comm: Any, text: str, timeout: float | None) -> str:
    """Rank 0's ``text`` on every rank: its length, then its bytes (two ``Bcast`` of ``comm``)."""
    from mpi4py import MPI  # noqa: PLC0415

    rank = comm.Get_rank()
    data = np.frombuffer(text.encode(), np.uint8).copy() if rank == 0 else None
    length = np.array([data.size if data is not None else 0], np.int64)
    _wait(comm, comm.Ibcast(length, root=0) if timeout else None, lambda: comm.Bcast(length, root=0), timeout)
    if data is None:
        data = np.empty(int(length[0]), np.uint8)
    buf = [data, MPI.BYTE]
    _wait(comm, comm.Ibcast(buf, root=0) if timeout else None, lambda: comm.Bcast(buf, root=0), timeout)
    return data.tobytes().decode()


def _wait(comm: Any, request: Any, blocking: Any, timeout: float | None) -> None:
    if request is None:
        blocking()
        return
    from mpicoll.runtime.watchdog import wait_mpi  # noqa: PLC0415 (only with a timeout)

    wait_mpi(request, "algorithm='auto' (agreeing on rank 0's tuning and calibration data)", timeout,
             [0] if comm.Get_rank() else list(range(1, comm.Get_size())), comm.Get_rank())
