"""torch profiler events for the backend's calls: ``mpicoll:all_reduce`` and so on, asynchronous as Gloo's ``gloo:...``.

A call made while torch's profiler records (``torch.profiler.profile``,
``torch.autograd.profiler.profile``) opens a :class:`Span` named
``mpicoll:<torch's name of the call>``, with the call's input tensors (their
shapes show where the profiler records shapes).  The span runs from the call's
start in the caller until the call completes: at once for a blocking call, when
its ``Work`` completes for an asynchronous one (in ``wait()``, ``is_completed()``
or the thread that completes futures).  torch's profiler marks an event
asynchronous (``event.is_async``) when it ends on another thread than the one
it started on, as Gloo's events do (Gloo runs each call on a thread of its
own); so a span always ends on one thread kept for that,
``mpicoll-torch-profiler``, and whoever ends it waits until it has ended (the
event is complete when the call returns or ``wait()`` returns).  While no
profiler records, :func:`profiling` is one check of a flag and nothing else runs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

import torch
from torch._C._profiler import _RecordFunctionFast

__all__ = ["PREFIX", "Span", "profiling", "span"]

PREFIX = "mpicoll:"

profiling = torch.autograd._profiler_enabled   # whether a profiler records now (a C++ flag read)


class _Ender:
    """The thread that ends every span (a thread that lives on: the profiler drops events ended by threads
    that exited before it collects them)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self.run, name="mpicoll-torch-profiler", daemon=True)
        self.thread.start()

    def run(self) -> None:
        while True:
            record, ended = self.jobs.get()
            try:
                record.__exit__(None, None, None)
            finally:
                ended.set()

    def end(self, record: _RecordFunctionFast) -> None:
        """End ``record`` on this thread; return once it has ended."""
        if threading.current_thread() is self.thread:
            record.__exit__(None, None, None)
            return
        ended = threading.Event()
        self.jobs.put((record, ended))
        ended.wait()


_ENDER: list[_Ender] = []
_START = threading.Lock()


def _ender() -> _Ender:
    if not _ENDER:
        with _START:
            if not _ENDER:
                _ENDER.append(_Ender())
    return _ENDER[0]


class Span:
    """The profiler event of one call, from its start to its completion.

    Parameters
    ----------
    name : str
        torch's name of the call (``"all_reduce"``): the event is ``mpicoll:<name>``.
    inputs : sequence of torch.Tensor
        The call's input tensors (the event's ``input_shapes``).
    """

    __slots__ = ("_record",)

    def __init__(self, name: str, inputs: Sequence[torch.Tensor] = ()) -> None:
        _ender()   # the ending thread exists before the event starts
        self._record: _RecordFunctionFast | None = _RecordFunctionFast(PREFIX + name, list(inputs))
        self._record.__enter__()

    def end(self) -> None:
        """End the event (once; later calls do nothing), on the ending thread."""
        record, self._record = self._record, None
        if record is not None:
            _ender().end(record)


def span(name: str, inputs: Sequence[torch.Tensor] = ()) -> Span | None:
    """A started :class:`Span` of the call ``name`` while a profiler records, else None."""
    return Span(name, inputs) if profiling() else None
