"""What every rank of a communicator decides "auto" from: rank 0's tuning and calibration files.

"auto" reads two files: the tuning file (``python -m mpicoll.bench --tune``,
:func:`tuning_path`) and the calibration file (``python -m mpicoll calibrate``,
:func:`mpicoll.analysis.presets.calibration_path`).  Each process reads its own,
and nodes need not share a file system, so two ranks could read different data
and choose different algorithms for the same call: a hang.  So a
communicator's ranks never decide from their own files: when a communicator is
wrapped, its rank 0's :func:`local` data travel to every rank with the setup
exchange (:mod:`mpicoll.comm.setup`), and communicators derived from it inherit
them.  A malformed file on rank 0 makes every rank raise the same error, naming
the file.

This module reads files and sends nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from mpicoll import config
from mpicoll.analysis.cost import Machine

__all__ = ["Shared", "Bands", "local", "forget", "tell", "tuning_path", "tuning_file"]

# (upper bound in bytes or None, algorithm or None: not measured there), by increasing size
Bands = tuple[tuple[int | None, str | None], ...]
_KEYS: dict[tuple, Any] = {}    # constants -> the small number that names them in decision caches
_KEY_ENTRIES = 1024


@dataclass(frozen=True)
class Shared:
    """The data "auto" decides from, the same on every rank of a communicator.

    ``machine`` holds the cost-model constants (calibrated, or the built-in
    default), ``source`` says where they came from, ``tuning`` maps a
    collective and a process count to the tuning file's bands, ``key``
    identifies the constants in caches (equal constants, equal key), and
    ``tuning_from`` names the tuning file (what "auto" says when a band decided).
    """

    machine: Machine
    source: str
    tuning: dict[str, dict[int, Bands]]
    key: Any
    tuning_from: str = "the tuning file"

    def bands(self, collective: str, size: int) -> Bands | None:
        """The tuning file's bands for ``collective`` at ``size`` ranks, if it has any."""
        return self.tuning.get(collective, {}).get(size)

    @classmethod
    def make(cls, machine: Machine, source: str, tuning: dict[str, Any], where: str = "the tuning file") -> Shared:
        """Checks the tuning data's form: ``collective -> str(p) -> [[upper_bytes or null, algorithm], ...]``."""
        bands = {str(coll): {int(p): _bands(rows, f"{where}: {coll}, p = {p}") for p, rows in by_p.items()}
                 for coll, by_p in _mapping(tuning, where).items() if _mapping(by_p, f"{where}: {coll}")}
        full = tuple((f.name, _hashable(getattr(machine, f.name))) for f in dataclasses.fields(machine))
        key = _KEYS.get(full)
        if key is None:   # a small number names the constants (cheap to hash on every call); bounded
            key = full
            if len(_KEYS) < _KEY_ENTRIES:
                key = _KEYS[full] = len(_KEYS)
        return cls(machine, source, bands, key, where)

    def to_json(self) -> str:
        return json.dumps({"machine": dataclasses.asdict(self.machine), "source": self.source,
                           "tuning_from": self.tuning_from,
                           "tuning": {c: {str(p): [list(b) for b in rows] for p, rows in by_p.items()}
                                      for c, by_p in self.tuning.items()}})

    @classmethod
    def from_json(cls, text: str) -> Shared:
        data = json.loads(text)
        if "error" in data:
            raise ValueError(data["error"])
        return cls.make(Machine(**data["machine"]), data["source"], data["tuning"],
                        data.get("tuning_from", "the tuning file"))


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {json.dumps(value)[:60]}")
    return value


def _bands(rows: Any, where: str) -> Bands:
    """``[[upper or null, algorithm], ...]`` checked: a clear error naming ``where`` for anything else."""
    out = []
    for row in rows if isinstance(rows, list) else [None]:
        ok = isinstance(row, (list, tuple)) and len(row) == 2
        upper, name = row if ok else (None, None)
        if not ok or not (name is None or isinstance(name, str)) or not (upper is None or (isinstance(upper, int)
                                                                           and not isinstance(upper, bool))):
            raise ValueError(f"{where}: expected [[upper bytes (an integer) or null, algorithm name or null], ...], "
                             f"got {json.dumps(rows)[:80]}")
        out.append((upper, name))
    return tuple(out)


def _hashable(value: Any) -> Any:
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def tuning_path() -> str:
    """The tuning file: ``$MPICOLL_TUNING``, else ``~/.config/mpicoll/tuning.json``."""
    return config.current().tuning or os.path.join(os.path.expanduser("~"), ".config", "mpicoll", "tuning.json")


_READ: dict[str, Any] = {}   # "tuning": this process's tuning file, "local": its Shared (see forget)


def tuning_file() -> dict[str, Any]:
    """This process's tuning file, parsed (``{}`` when there is none); ValueError naming it when malformed."""
    if "tuning" not in _READ:
        path = tuning_path()
        try:
            with open(path) as fh:
                data = json.load(fh)
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"the tuning file {path}: {exc}") from None
        _mapping(data, f"the tuning file {path}")
        _READ["tuning"] = data
    return _READ["tuning"]


def local() -> Shared:
    """What this process's own files say (read once, until :func:`forget`); ValueError naming a malformed file."""
    hit = _READ.get("local")
    if hit is not None:
        return hit
    from mpicoll.analysis.presets import DEFAULT_LOCAL, calibration_path, load_local  # noqa: PLC0415

    path = calibration_path()
    if path.exists():
        machine, source = load_local(path), f"calibration file {path}"
    else:
        machine, source = DEFAULT_LOCAL, f"built-in preset {DEFAULT_LOCAL.name!r}"
    shared = _READ["local"] = Shared.make(machine, source, tuning_file(), f"the tuning file {tuning_path()}")
    return shared


_TOLD: set[tuple] = set()   # the tuning decisions MPICOLL_DEBUG=2 has reported (bounded below)


def tell(collective: str, size: int, nbytes: int, name: str, where: str) -> None:
    """``MPICOLL_DEBUG=2``: say, once per collective, p, size and file, that a tuning file chose ``name``."""
    key = (collective, size, nbytes, name, where)
    if config.current().debug < 2 or key in _TOLD or len(_TOLD) > 4096:
        return
    _TOLD.add(key)
    sys.stderr.write(f"mpicoll INFO pid {os.getpid()}: {collective} auto -> {name} at p = {size}, {nbytes} bytes: "
                     f"decided by {where} (not the cost model)\n")


def forget() -> None:
    """Drop what :func:`local` and :func:`tuning_file` read (communicators keep what they agreed on)."""
    _READ.clear()


config.on_reload(forget)
