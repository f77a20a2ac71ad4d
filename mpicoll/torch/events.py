"""torch profiler events for the backend's calls: ``mpicoll:all_reduce`` and the like, as Gloo shows ``gloo:...``.

A call made while torch's profiler records (``torch.profiler.profile``,
``torch.autograd.profiler.profile``) is wrapped in a ``record_function`` range
named ``mpicoll:<torch's name of the call>``: the range covers the call in the
caller (all of a blocking call; the start of an asynchronous one).  While no
profiler records, :func:`profiling` is one check of a flag and nothing else runs.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch

__all__ = ["PREFIX", "profiling", "recorded"]

PREFIX = "mpicoll:"

profiling = torch.autograd._profiler_enabled   # whether a profiler records now (a C++ flag read)


def recorded(name: str) -> AbstractContextManager:
    """The profiler range of the call ``name`` (enter it only where :func:`profiling` is true)."""
    return torch.autograd.profiler.record_function(PREFIX + name)
