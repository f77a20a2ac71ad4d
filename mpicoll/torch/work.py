"""``Work`` objects for the mpicoll backend: what ``async_op=True`` returns and what DDP waits on.

:class:`RequestWork` wraps the requests of one torch call: mpicoll's requests
(``comm.Iallreduce(...)`` and the like), which mpicoll's progress thread
advances while the program is elsewhere, or the MPI requests of a send or
receive.  ``wait()`` waits for them, then runs what the call does afterwards
(an average, a copy into a strided output) and completes the Work.  A call that
ran to completion in the caller (every blocking call) returns a :class:`DoneWork`.

Both hand an exception raised by the call to whoever waits: ``wait()`` raises
it, the future is set with it, ``exception()`` returns it.  The future
(``get_future()``: DDP's reducer and comm hooks chain on it) is made on demand;
one asked for before the call completes is completed by
:mod:`mpicoll.torch.futures`.  ``wait(timeout)`` raises
:class:`torch.distributed.DistBackendError` ("Timed out waiting 50ms ...", as
Gloo words it) when the call is not done in time; the call goes on and a later
``wait()`` completes it.  A call that mpicoll's watchdog stops raises
:class:`Timeout` (torch's ``DistBackendError`` and mpicoll's ``CollectiveTimeout``).
While torch's profiler records, a Work ends its call's event
(:class:`mpicoll.torch.events.Span`) when the call completes.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from mpi4py import MPI

from mpicoll.engine.watchdog import CollectiveTimeout
from mpicoll.errors import MismatchError, ProcFailedError

from .events import Span

__all__ = ["DoneWork", "RequestWork", "Timeout", "Desync", "torch_error", "torch_errors"]

_Future = torch.futures.Future


def _seconds(timeout: timedelta | float | None) -> float | None:
    """A wait's limit in seconds, or None for none (torch passes 0 or a negative number for "no timeout")."""
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    return float(timeout) if timeout is not None and timeout > 0 else None


class _BaseWork(dist.Work):
    """What every Work of this backend has: a name, outputs, an outcome, and a future made on demand."""

    def __init__(self, name: str, outputs: Sequence[torch.Tensor]) -> None:
        super().__init__()
        self.name = name
        self._outputs = outputs
        self._exception: BaseException | None = None
        self._future: torch.futures.Future | None = None

    def _settle_future(self, future: torch.futures.Future) -> None:
        if self._exception is None:
            future.set_result(list(self._outputs))
        else:
            future.set_exception(self._exception)

    def is_success(self) -> bool:
        """Whether the call completed without an exception."""
        return self.is_completed() and self._exception is None

    def exception(self) -> BaseException | None:
        """The exception the call raised, if any."""
        return self._exception

    def result(self) -> list[torch.Tensor]:
        """The output tensors (after :meth:`wait`)."""
        return list(self._outputs)

    def synchronize(self) -> None:
        """Nothing to do on the CPU."""

    def _source_rank(self) -> int:   # what torch's recv(src=None) calls
        raise ValueError(f"mpicoll backend: {self.name} has no source rank (only recv from any source has one)")

    def source_rank(self) -> int:
        """The sender of a receive from any source."""
        return self._source_rank()


class DoneWork(_BaseWork):
    """A call that has completed already (it ran in the caller), successfully or with ``exception``.

    A blocking ``all_reduce`` returns the same DoneWork every time (making one costs more than the call),
    with its outputs set: torch waits on it at once and drops it.
    """

    def __init__(self, name: str, outputs: Sequence[torch.Tensor] = (), exception: BaseException | None = None) -> None:
        super().__init__(name, outputs)
        self._exception = exception

    def is_completed(self) -> bool:
        return True

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Raise the call's exception, if any; True."""
        if self._exception is not None:
            raise self._exception
        return True

    def get_future(self) -> torch.futures.Future:
        """A future completed with the output tensors (or the exception)."""
        future = _Future()
        self._settle_future(future)
        return future


class RequestWork(_BaseWork):
    """The requests of one torch call, and what to do once they all complete.

    Parameters
    ----------
    name : str
        The torch call, for messages.
    outputs : sequence of torch.Tensor
        The future's value once the call completes.
    requests : sequence of MPI.Request
        mpicoll's requests of a collective, or the MPI requests of a send or receive.
    after : callable, optional
        Run once after every request completed (an average, a copy back into a strided output).
    status : MPI.Status, optional
        Filled by the (single) request's completion: a receive from any source reports its sender there.
    event : Span, optional
        The call's profiler event (while a profiler records), ended when the call completes.
    """

    def __init__(self, name: str, outputs: Sequence[torch.Tensor], requests: Sequence[MPI.Request],
                 after: Callable[[], Any] | None = None, status: MPI.Status | None = None,
                 event: Span | None = None) -> None:
        super().__init__(name, outputs)
        self._requests = list(requests)
        self._after = after
        self._status = status
        self._event = event
        self._lock = threading.Lock()   # one thread at a time tests or waits on the requests
        self._done = False

    # -- completion (the caller holds self._lock) --------------------------------------------------------

    def _finish(self, exc: BaseException | None) -> torch.futures.Future | None:
        """Run ``after``, record the outcome; returns the future to complete (outside the lock)."""
        if exc is None and self._after is not None:
            try:
                self._after()
            except BaseException as error:  # noqa: BLE001 - handed to whoever waits
                exc = error
        self._after = None
        self._exception = torch_error(exc, self.name)
        if self._event is not None:
            self._event.end()
            self._event = None
        self._done = True
        return self._future

    def _test(self) -> torch.futures.Future | None:
        """Test the requests (this advances them); finish once all completed.  Returns a future to complete."""
        requests = self._requests
        try:
            while requests:
                if not requests[0].Test(self._status):
                    return None
                requests.pop(0)
        except BaseException as exc:  # noqa: BLE001 - e.g. mpicoll's CollectiveTimeout: the Work fails with it
            return self._finish(exc)
        return self._finish(None)

    def _block(self) -> torch.futures.Future | None:
        """Wait for the requests (blocking in MPI), then finish.  Returns a future to complete."""
        try:
            for request in self._requests:
                request.Wait(self._status)
        except BaseException as exc:  # noqa: BLE001
            return self._finish(exc)
        self._requests = []
        return self._finish(None)

    def _complete(self, future: torch.futures.Future | None) -> None:
        if future is not None:
            self._settle_future(future)   # callbacks chained on it run now, in this thread

    # -- torch's interface ------------------------------------------------------------------------------------

    def is_completed(self) -> bool:
        """Test the requests without blocking; True once the call has completed (successfully or not)."""
        if self._done:
            return True
        future = None
        if self._lock.acquire(blocking=False):
            try:
                if not self._done:
                    future = self._test()
            finally:
                self._lock.release()
        self._complete(future)
        return self._done

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Block until the call completes and raise its exception, if any.

        With ``timeout``, raise :class:`torch.distributed.DistBackendError` ("timed out") when the call is not
        complete by then (it goes on).  Without, wait as long as it takes: a group made with a timeout has
        mpicoll's watchdog on, which raises :class:`mpicoll.CollectiveTimeout` from a call stuck that long.
        """
        if not self._done:
            seconds = _seconds(timeout)
            if seconds is None:
                with self._lock:
                    future = None if self._done else self._block()
                self._complete(future)
            else:
                self._poll_until(time.monotonic() + seconds, seconds)
        if self._exception is not None:
            raise self._exception
        return True

    def _poll_until(self, deadline: float, seconds: float) -> None:
        pause = 0.0
        while not self.is_completed():
            if time.monotonic() > deadline:
                raise dist.DistBackendError(f"mpicoll backend: {self.name}: Timed out waiting {seconds * 1000:g}ms "
                                            "for the call to complete (wait's timeout); it goes on, wait() again "
                                            "for it")
            # spin briefly, then back off to at most 1 ms: short calls stay fast, long waits idle
            time.sleep(pause)
            pause = min(1e-3, pause * 2 or 1e-6)

    def get_future(self) -> torch.futures.Future:
        """A future completed with the output tensors (or the exception) when the call completes."""
        with self._lock:
            if self._future is None:
                self._future = _Future()
                pending = not self._done
                settle = self._done
            else:
                pending = settle = False
            future = self._future
        if settle:
            self._settle_future(future)
        elif pending:
            from .futures import complete_later  # noqa: PLC0415 - the completing thread starts on first need

            complete_later(self)
        return future

    def _source_rank(self) -> int:
        """The sender of a receive from any source (after waiting for it)."""
        if self.name != "recv_anysource":
            return super()._source_rank()
        self.wait()
        return self._status.Get_source()


class Timeout(dist.DistBackendError, CollectiveTimeout):
    """A call that mpicoll's watchdog stopped, in torch's words ("Timed out", as Gloo's timeouts read).

    Both torch's :class:`~torch.distributed.DistBackendError` and mpicoll's :class:`mpicoll.CollectiveTimeout`
    (with its ``collective``, ``round``, ``peers`` and ``timeout``); its ``__cause__`` is mpicoll's error.

    Parameters
    ----------
    name : str
        torch's name of the call (``"barrier"``).
    cause : mpicoll.CollectiveTimeout
        What the watchdog raised.
    """

    def __init__(self, name: str, cause: CollectiveTimeout) -> None:
        Exception.__init__(self, f"mpicoll backend: {name}: Timed out after {cause.timeout * 1000:g} ms without "
                                 f"progress ({cause})")
        self.collective, self.round, self.peers, self.timeout = (cause.collective, cause.round, cause.peers,
                                                                 cause.timeout)
        self.__cause__ = cause


#: torch's names of the MPI collectives its calls run (an ``I*`` call's name is its blocking one's)
TORCH_NAMES = {"Allreduce": "all_reduce", "Bcast": "broadcast", "Reduce": "reduce", "Allgather": "all_gather",
               "Allgatherv": "all_gather", "Gather": "gather", "Gatherv": "gather", "Scatter": "scatter",
               "Scatterv": "scatter", "Reduce_scatter": "reduce_scatter", "Reduce_scatter_block": "reduce_scatter",
               "Alltoall": "all_to_all", "Alltoallv": "all_to_all", "Alltoallw": "all_to_all",
               "Barrier": "barrier"}
_COLLECTIVE = re.compile(r"(?:nonblocking |persistent )?(\w+)\(")


class Desync(dist.DistBackendError, MismatchError):
    """The ranks of a process group made different collective calls (mpicoll's always-on check,
    :class:`mpicoll.MismatchError`), in torch's words: what each rank is running, by torch's name, with
    mpicoll's signature of it and where the program called it.

    Both torch's :class:`~torch.distributed.DistBackendError` and :class:`mpicoll.MismatchError` (with its
    ``collective`` and ``calls``); its ``__cause__`` is mpicoll's error.
    """

    def __init__(self, name: str, cause: MismatchError) -> None:
        running = []
        for rank, call in cause.calls.items():
            found = _COLLECTIVE.match(call)
            torch_name = TORCH_NAMES.get(found.group(1), found.group(1)) if found else "?"
            running.append(f"rank {rank} is running collective {torch_name}: {call}")
        MismatchError.__init__(self, f"mpicoll backend: {name}: Detected mismatch between collectives on ranks "
                                     f"(collective desync): {'; '.join(running)}", cause.collective, cause.fields,
                               cause.calls)
        self.__cause__ = cause


torch_errors = (ProcFailedError, CollectiveTimeout, MismatchError)   # the errors torch_error rewords


def torch_error(exc: BaseException | None, name: str = "") -> BaseException | None:
    """What torch expects of a backend's error: a process that died (:class:`mpicoll.ProcFailedError`, under
    MPI's fault-tolerance extension) is torch's :class:`~torch.distributed.DistBackendError`, a call the watchdog
    stopped a :class:`Timeout` (saying "Timed out"), mismatched calls found by the always-on check a
    :class:`Desync` (torch's "collective desync", in its names), each with the mpicoll error as its cause; any
    other error stays itself."""
    if isinstance(exc, ProcFailedError):
        error = dist.DistBackendError(f"mpicoll backend: {exc}")
        error.__cause__ = exc
        return error
    if isinstance(exc, CollectiveTimeout) and not isinstance(exc, Timeout):
        return Timeout(name or exc.collective, exc)
    if isinstance(exc, MismatchError) and exc.calls and not isinstance(exc, Desync):
        return Desync(name or exc.collective, exc)
    return exc
