"""mpicoll's optional C extensions, or None where they are not used.

Two modules are built from C by ``pip install`` when a compiler is there:
``mpicoll.runtime._callkey`` (a blocking call's hot path: the tag, the plan cache's key,
the lookup and the run) and ``mpicoll.runtime._rounds`` (the blocking executor's round
loop).  Each has a Python definition that does the same and runs where the
extension is missing.  ``MPICOLL_NO_EXTENSIONS=1`` makes mpicoll use the Python
definitions even where the extensions are built (to test them, or to compare).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mpicoll import config

__all__ = ["extension", "extensions_disabled"]

def extensions_disabled() -> bool:
    """Whether ``MPICOLL_NO_EXTENSIONS=1`` asks for the Python definitions (see :mod:`mpicoll.config`).

    Raises
    ------
    ValueError
        A malformed ``MPICOLL_*`` variable.
    """
    return config.current().no_extensions


def extension(name: str) -> ModuleType | None:
    """The extension module ``mpicoll.runtime.<name>``, or None: not built, or disabled by ``MPICOLL_NO_EXTENSIONS``."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
