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
import os
from types import ModuleType

__all__ = ["extension", "extensions_disabled"]

VARIABLE = "MPICOLL_NO_EXTENSIONS"


def extensions_disabled() -> bool:
    """Whether ``MPICOLL_NO_EXTENSIONS`` asks for the Python definitions ("1"; "" or "0": not).

    Raises
    ------
    ValueError
        Any other value.
    """
    value = os.environ.get(VARIABLE, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{VARIABLE} must be 1 (use the Python definitions) or 0, got {value!r}")
    return value == "1"


def extension(name: str) -> ModuleType | None:
    """The extension module ``mpicoll.<name>``, or None: not built, or disabled by ``MPICOLL_NO_EXTENSIONS``."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
