"""Every ``MPICOLL_*`` environment variable, parsed in one place, once.

mpicoll reads its environment when it first needs it and keeps what it read
(:func:`current`).  A program or test that changes a variable afterwards calls
:func:`reload`: the variables are read again, the tuning and calibration files
are forgotten, and the cached plans of every communicator are chosen anew
(their keys carry :func:`generation`).  Communicators made before a reload keep
the path their calls take (a timeout, ``MPICOLL_DEBUG``), which is decided when
a communicator is made.

A malformed value is an error that names the variable and says what it
accepts, raised by the first call that reads the environment: never silently
ignored.

=========================  ==============================================================  ===========
variable                   value                                                           default
=========================  ==============================================================  ===========
``MPICOLL_ALGO``           ``collective=algorithm[,...]``: forces "auto"'s choice           none
``MPICOLL_DEBUG``          0 (off), 1 (ranks agree on each call first), 2 (1 and a log)     0
``MPICOLL_TIMEOUT``        seconds a collective may wait (a positive number); 0: none      none
``MPICOLL_NODE_SIZE``      ranks per node (a positive integer)                             shared memory
``MPICOLL_TUNING``         the tuning file's path                                          see below
``MPICOLL_CALIBRATION``    the calibration file's path                                     see below
``MPICOLL_GPU_TRANSPORT``  ``auto``, ``ipc``, ``staged`` or ``cuda-aware``                  ``auto``
``MPICOLL_CUDA_AWARE``     1 or 0: whether the MPI library takes device buffers            asked
``MPICOLL_GPU_SEGMENT``    bytes of the staged transport's pipeline unit (positive)        1 MiB
``MPICOLL_NO_EXTENSIONS``  1: run the Python definitions of the compiled hot path          0
``MPICOLL_PROGRESS``       1 or 0: a thread advances outstanding requests (needs            1
                           ``MPI_THREAD_MULTIPLE``; see ``docs/nonblocking.md``)
``MPICOLL_TORCH_THREAD``   1 or 0: torch's asynchronous calls are mpicoll requests (1) or  1
                           run to completion in the caller (0); see ``docs/torch.md``
``MPICOLL_TORCH_NO_ENV``   1: importing ``mpicoll.torch`` leaves ``RANK``,                   0
                           ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` alone
``MPICOLL_REPRODUCIBLE``   1 or 0: the summing collectives default to                       0
                           ``reproducible=True`` (see ``docs/reproducible.md``)
``MPICOLL_TRACE``          a folder: every rank writes its flight record there on a        none
                           timeout, a failure, ``SIGUSR1`` and at exit (see
                           ``docs/diagnostics.rst``)
``MPICOLL_TRACE_CALLS``    calls the flight recorder keeps per communicator (0: none)      64
``MPICOLL_TAG_UB``         the largest tag mpicoll's messages carry (a positive integer;    ``MPI.TAG_UB``
                           more than ``MPI.TAG_UB`` is ``MPI.TAG_UB``): to see what the
                           mismatch check does where a library's tag range is small
=========================  ==============================================================  ===========

One setting comes from the MPI launcher rather than from mpicoll: whether the job runs with MPI's
fault-tolerance extension (:func:`fault_tolerant`: ``mpirun --with-ft ulfm`` sets ``OMPI_MCA_mpi_ft_enable``,
MPICH's ``MPIR_CVAR_ENABLE_FT`` does the same), under which mpicoll completes the requests of a round one
at a time (see :func:`mpicoll.engine.rounds.waitall`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Config", "current", "reload", "generation", "read", "fault_tolerant", "GPU_TRANSPORTS"]

GPU_TRANSPORTS = ("auto", "ipc", "staged", "cuda-aware")


@dataclass(frozen=True)
class Config:
    """What the ``MPICOLL_*`` variables say (see the module's table)."""

    algo: Mapping[str, str] = field(default_factory=dict)   # collective (lower case) -> algorithm (lower case)
    debug: int = 0
    timeout: float | None = None
    node_size: int | None = None
    tuning: str | None = None
    calibration: str | None = None
    gpu_transport: str = "auto"
    cuda_aware: bool | None = None
    gpu_segment: int = 1 << 20
    no_extensions: bool = False
    progress: bool = True      # a progress thread advances outstanding requests (mpicoll.engine.progress)
    torch_thread: bool | None = None   # torch backend: asynchronous calls as requests (None: unset, i.e. yes)
    torch_no_env: bool = False         # torch backend: leave torch's env:// variables alone
    reproducible: bool = False  # the summing collectives' default for reproducible=None (mpicoll.comm.reproducible)
    trace: str | None = None    # where the flight recorder writes (mpicoll.engine.recorder), or None
    trace_calls: int = 64       # calls the flight recorder keeps per communicator (0: it records nothing)
    tag_ub: int | None = None   # the largest tag mpicoll uses (None: MPI.TAG_UB; see mpicoll.engine.mismatch)


# -- one parser per kind of value ---------------------------------------------------------------------

def _text(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def _fail(name: str, text: str, accepted: str) -> ValueError:
    return ValueError(f"{name}={text!r}: expected {accepted}")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    text = _text(env, name).lower()
    if not text:
        return default
    if text not in choices:
        raise _fail(name, text, "one of " + ", ".join(choices))
    return text


def _flag(env: Mapping[str, str], name: str) -> bool | None:
    """1 or 0; None when unset."""
    text = _text(env, name)
    if not text:
        return None
    if text not in ("0", "1"):
        raise _fail(name, text, "1 or 0")
    return text == "1"


def _positive_int(env: Mapping[str, str], name: str) -> int | None:
    text = _text(env, name)
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise _fail(name, text, "a positive integer")
    return value


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    """A count, 0 included; unset: ``default``."""
    text = _text(env, name)
    if not text:
        return default
    if not text.isdigit():
        raise _fail(name, text, "a count (0 or a positive integer)")
    return int(text)


def _level(env: Mapping[str, str], name: str) -> int:
    text = _text(env, name)
    if not text:
        return 0
    if not text.isdigit() or int(text) > 2:
        raise _fail(name, text, "0, 1 or 2")
    return int(text)


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    """A positive number of seconds; 0 or unset: None."""
    text = _text(env, name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value == 0:
        return None
    if not (value > 0 and math.isfinite(value)):
        raise _fail(name, text, "a positive number of seconds (0: no timeout)")
    return value


def _path(env: Mapping[str, str], name: str) -> str | None:
    return _text(env, name) or None


def _algorithms(env: Mapping[str, str], name: str) -> dict[str, str]:
    """``collective=algorithm`` items separated by commas; the first item for a collective wins.

    Only the form is checked here; that each collective and algorithm exists is
    checked where the registry is known (:func:`mpicoll.selection.choose.forced_by_environment`).
    """
    text = _text(env, name)
    forced: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = (part.strip().lower() for part in item.partition("="))
        if not sep or not key or not value:
            raise _fail(name, text, "collective=algorithm items separated by commas (allreduce=ring,bcast=binomial)")
        forced.setdefault(key, value)
    return forced


def read(env: Mapping[str, str] | None = None) -> Config:
    """The configuration ``env`` (default: ``os.environ``) describes; ValueError naming a malformed variable."""
    env = os.environ if env is None else env
    segment = _positive_int(env, "MPICOLL_GPU_SEGMENT")
    return Config(
        algo=_algorithms(env, "MPICOLL_ALGO"),
        debug=_level(env, "MPICOLL_DEBUG"),
        timeout=_seconds(env, "MPICOLL_TIMEOUT"),
        node_size=_positive_int(env, "MPICOLL_NODE_SIZE"),
        tuning=_path(env, "MPICOLL_TUNING"),
        calibration=_path(env, "MPICOLL_CALIBRATION"),
        gpu_transport=_choice(env, "MPICOLL_GPU_TRANSPORT", GPU_TRANSPORTS, "auto"),
        cuda_aware=_flag(env, "MPICOLL_CUDA_AWARE"),
        gpu_segment=segment if segment is not None else 1 << 20,
        no_extensions=bool(_flag(env, "MPICOLL_NO_EXTENSIONS")),
        progress=_flag(env, "MPICOLL_PROGRESS") is not False,
        torch_thread=_flag(env, "MPICOLL_TORCH_THREAD"),
        torch_no_env=bool(_flag(env, "MPICOLL_TORCH_NO_ENV")),
        reproducible=bool(_flag(env, "MPICOLL_REPRODUCIBLE")),
        trace=_path(env, "MPICOLL_TRACE"),
        trace_calls=_count(env, "MPICOLL_TRACE_CALLS", 64),
        tag_ub=_positive_int(env, "MPICOLL_TAG_UB"),
    )


def fault_tolerant(env: Mapping[str, str] | None = None) -> bool:
    """Whether the launcher runs the job with MPI's fault-tolerance extension (see the module's last
    paragraph); read apart from the ``MPICOLL_*`` variables, which it never makes fail."""
    env = os.environ if env is None else env
    return any(_text(env, name).lower() in ("1", "true", "yes", "on")
               for name in ("OMPI_MCA_mpi_ft_enable", "MPIR_CVAR_ENABLE_FT"))


# -- the process's configuration ----------------------------------------------------------------------

_LOCK = threading.Lock()
_CURRENT: list[Config] = []        # the configuration read, once (empty until first needed)
#: ``[n]``: how many times the configuration was (re)read; part of every plan cache key.  A list, so that
#: the compiled hot path reads the number without a call (``mpicoll.program._callkey``).
GENERATION = [0]
_FORGET: list = []                 # what reload() also clears (files read on behalf of the configuration)


def current() -> Config:
    """The configuration, read from the environment on first use."""
    if _CURRENT:
        return _CURRENT[0]
    with _LOCK:
        if not _CURRENT:
            _CURRENT.append(read())
    return _CURRENT[0]


def generation() -> int:
    """How many times the configuration (or the tuning data) was read again; see :func:`reload`."""
    return GENERATION[0]


def reload() -> None:
    """Make mpicoll read the environment again, forget the tuning and calibration files read so far, and
    make every communicator's cached plans be prepared anew.

    Local: each process that changed its environment calls it.  The variables
    are read by the next call that needs them, which raises ValueError (naming
    the variable) for a malformed value.
    """
    with _LOCK:
        _CURRENT.clear()
        GENERATION[0] += 1
    for forget in _FORGET:
        forget()


def on_reload(forget) -> None:
    """Register ``forget()``, run by :func:`reload` (caches of what the configuration points to)."""
    _FORGET.append(forget)
