"""``Work`` objects for the mpicoll backend: what ``async_op=True`` returns and what DDP waits on.

:class:`CollectiveWork` completes when the process group's executor has run the
call (see :mod:`mpicoll.torch.executor`); :class:`P2PWork` wraps the MPI
requests of a send or receive, made in the caller's thread.  Both carry a
``torch.futures.Future`` (DDP's reducer and comm hooks chain on it) and hand an
exception raised by the call to whoever waits: ``wait()`` raises it, the future
is set with it, ``exception()`` returns it.  ``wait(timeout)`` raises
:class:`torch.distributed.DistBackendError` when the call is not done in time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist
from mpi4py import MPI

__all__ = ["CollectiveWork", "P2PWork", "completed_work"]


def _seconds(timeout: timedelta | float | None, default: float | None) -> float | None:
    """A wait's limit in seconds: ``timeout`` if positive, else ``default`` (None: no limit)."""
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    return float(timeout) if timeout is not None and timeout > 0 else default


class _BaseWork(dist.Work):
    """The state every Work of this backend shares: done or not, the exception, the future."""

    def __init__(self, name: str, outputs: Sequence[torch.Tensor], timeout: float | None) -> None:
        super().__init__()
        self.name = name
        self._outputs = list(outputs)
        self._timeout = timeout
        self._exception: BaseException | None = None
        self._future: torch.futures.Future = torch.futures.Future()

    def _settle(self, exc: BaseException | None) -> None:
        """Record the outcome and complete the future (callbacks run in this thread)."""
        self._exception = exc
        if exc is None:
            self._future.set_result(self._outputs)
        else:
            self._future.set_exception(exc)

    def _timed_out(self, seconds: float) -> dist.DistBackendError:
        return dist.DistBackendError(f"mpicoll backend: {self.name} did not complete within {seconds:g} s "
                                     "(the process group's timeout, or wait's)")

    def is_success(self) -> bool:
        """Whether the call completed without an exception."""
        return self.is_completed() and self._exception is None

    def exception(self) -> BaseException | None:
        """The exception the call raised, if any."""
        return self._exception

    def get_future(self) -> torch.futures.Future:
        """A future completed with the output tensors (or the exception) when the call completes."""
        return self._future

    def result(self) -> list[torch.Tensor]:
        """The output tensors (after :meth:`wait`)."""
        return self._outputs

    def synchronize(self) -> None:
        """Nothing to do on the CPU."""

    def _source_rank(self) -> int:
        raise ValueError(f"mpicoll backend: {self.name} has no source rank (only recv from any source has one)")

    def source_rank(self) -> int:
        return self._source_rank()


class CollectiveWork(_BaseWork):
    """A collective queued on (or already run by) a process group's executor.

    Parameters
    ----------
    name : str
        The torch call, for messages.
    outputs : sequence of torch.Tensor
        What the future's value is once the call completes.
    timeout : float, optional
        Seconds :meth:`wait` waits by default (the process group's timeout).
    """

    def __init__(self, name: str, outputs: Sequence[torch.Tensor], timeout: float | None) -> None:
        super().__init__(name, outputs, timeout)
        self._done = threading.Event()

    def finish(self, exc: BaseException | None) -> None:
        """Called by the executor when the call returned (``exc`` None) or raised."""
        self._settle(exc)
        self._done.set()

    def is_completed(self) -> bool:
        """Whether the call has completed (successfully or not)."""
        return self._done.is_set()

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Block until the call completes; raise its exception, or DistBackendError after the timeout."""
        seconds = _seconds(timeout, self._timeout)
        if not self._done.wait(seconds):
            raise self._timed_out(seconds)
        if self._exception is not None:
            raise self._exception
        return True


class P2PWork(_BaseWork):
    """The MPI requests of a send or receive, and what to do once they complete.

    Parameters
    ----------
    name : str
        ``send``, ``recv`` or ``recv_anysource``, for messages.
    requests : sequence of MPI.Request
        Nonblocking sends or receives, one per tensor.
    outputs : sequence of torch.Tensor
        The tensors (the future's value).
    timeout : float, optional
        Seconds :meth:`wait` waits by default.
    finish : callable, optional
        Run once after the requests complete (copies a staged receive into a strided tensor).
    """

    def __init__(self, name: str, requests: Sequence[MPI.Request], outputs: Sequence[torch.Tensor],
                 timeout: float | None, finish: Callable[[], None] | None = None) -> None:
        super().__init__(name, outputs, timeout)
        self._requests = list(requests)
        self._status = MPI.Status()
        self._finish = finish
        self._lock = threading.Lock()  # is_completed and wait may race from two threads
        self._complete = False

    def _conclude(self) -> None:
        try:
            if self._finish is not None:
                self._finish()
            self._settle(None)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            self._settle(exc)
        self._complete = True

    def _test(self) -> bool:
        if len(self._requests) == 1:  # keep the status: a receive from any source reports its source
            return self._requests[0].Test(self._status)
        return MPI.Request.Testall(self._requests)

    def is_completed(self) -> bool:
        """Test the requests (this drives MPI's progress); True once all completed."""
        with self._lock:
            if not self._complete and self._test():
                self._conclude()
            return self._complete

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Block until the requests complete; DistBackendError after the timeout."""
        seconds = _seconds(timeout, self._timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        pause = 0.0
        while not self.is_completed():
            if deadline is not None and time.monotonic() > deadline:
                raise self._timed_out(seconds)
            # spin briefly, then back off to at most 1 ms: short messages stay fast, long waits idle
            time.sleep(pause)
            pause = min(1e-3, pause * 2 or 1e-6)
        if self._exception is not None:
            raise self._exception
        return True

    def _source_rank(self) -> int:
        if self.name != "recv_anysource":
            return super()._source_rank()
        self.wait()
        return self._status.Get_source()


def completed_work(name: str, outputs: Sequence[torch.Tensor] = ()) -> CollectiveWork:
    """A Work that is already complete (for calls with nothing to do)."""
    work = CollectiveWork(name, outputs, None)
    work.finish(None)
    return work
