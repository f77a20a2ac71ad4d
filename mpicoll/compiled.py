"""mpicoll's optional C extensions: where each lives, and whether it is used (the one place that decides).

Five modules are built from C by ``pip install`` when a compiler is there (see ``setup.py``):

=====================================  ===========================================================
extension                              what it accelerates
=====================================  ===========================================================
``mpicoll.program._callkey``           a call's key, its lookup in the plan cache, and the run or
                                       start of a hit (:mod:`mpicoll.program.callkey`,
                                       :mod:`mpicoll.comm.dispatch`)
``mpicoll.engine._rounds``             the blocking round loop (:mod:`mpicoll.engine.blocking`)
``mpicoll.engine._direct``             rounds and requests posted with the MPI library's own
                                       functions (:mod:`mpicoll.engine.direct`), and the lock of a
                                       thread's queue of requests (:mod:`mpicoll.engine.inflight`)
``mpicoll.data._fixedpoint``           the reproducible sums' local passes
                                       (:mod:`mpicoll.data.fixedpoint_kernels`)
``mpicoll.calls.objects._codec``       the object collectives' pickles written into and read out
                                       of their slots (:mod:`mpicoll.calls.objects.codec`)
=====================================  ===========================================================

Each has a Python definition that does the same and runs where the extension is missing.
``MPICOLL_NO_EXTENSIONS=1`` makes mpicoll use the Python definitions even where the extensions are built
(to test them, or to compare).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mpicoll import config

__all__ = ["EXTENSIONS", "extension", "extensions_disabled"]

#: each extension's short name and its module
EXTENSIONS = {"_callkey": "mpicoll.program._callkey", "_rounds": "mpicoll.engine._rounds",
              "_direct": "mpicoll.engine._direct", "_fixedpoint": "mpicoll.data._fixedpoint",
              "_codec": "mpicoll.calls.objects._codec"}


def extensions_disabled() -> bool:
    """Whether ``MPICOLL_NO_EXTENSIONS=1`` asks for the Python definitions (see :mod:`mpicoll.config`).

    Raises
    ------
    ValueError
        A malformed ``MPICOLL_*`` variable.
    """
    return config.current().no_extensions


def extension(name: str) -> ModuleType | None:
    """The extension ``name`` (a key of :data:`EXTENSIONS`), or None: not built, or disabled by
    ``MPICOLL_NO_EXTENSIONS``."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(EXTENSIONS[name])
    except ImportError:
        return None
