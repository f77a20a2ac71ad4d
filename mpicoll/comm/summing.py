"""Where a summing call is routed: the plain collective, or the reproducible sum, decided once for all forms.

The summing calls (``Allreduce``, ``Reduce``, ``Reduce_scatter_block``, ``Reduce_scatter``, ``Scan``,
``Exscan``) take the keyword ``reproducible``; ``None`` means ``MPICOLL_REPRODUCIBLE``
(:mod:`mpicoll.comm.reproducible_mode`).  Their methods hand the call here with the keyword, and no
method asks which mode a call runs in:

- :func:`run_summing` (blocking) and :func:`start_summing` (``I*``) run the plain call through
  :mod:`mpicoll.comm.dispatch`'s ``run_blocking`` and ``start`` where the mode is not wanted, and the
  reproducible sum (:func:`reproducible_run`, :func:`reproducible_start`) where it is.  Compiled, they are
  ``mpicoll.program._callkey.run_summing`` and ``start_summing``: the plain call then costs what the
  other collectives' calls cost (the keyword is read in C, as the call's key is);
- :func:`init_summing` (``*_init``) does the same for persistent calls.

The reproducible forms are :mod:`mpicoll.comm.reproducible_inter`'s (which hands an intracommunicator's
call to :mod:`mpicoll.comm.reproducible` and :mod:`mpicoll.comm.reproducible_requests`), after the
compiled gathered ``Allreduce``'s cached plan
(:data:`mpicoll.comm.reproducible_allreduce.run_planned`) where it has one.  A call the reproducible mode
does not take (not a sum of floats) comes back to the method with ``reproducible=False``.
"""

from __future__ import annotations

from typing import Any

from mpicoll.comm import dispatch, reproducible_inter
from mpicoll.comm.reproducible_allreduce import run_planned
from mpicoll.comm.reproducible_mode import DEFAULT, wanted
from mpicoll.compiled import extension
from mpicoll.engine.requests import Prequest, Request
from mpicoll.program import callkey

__all__ = ["run_summing", "start_summing", "init_summing", "reproducible_run", "reproducible_start"]


def reproducible_run(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> None:
    """The blocking summing call ``method`` in the reproducible mode."""
    if method == "Allreduce" and run_planned(comm, algorithm, reproducible, *args):
        return None
    return reproducible_inter.run(comm, method, algorithm, reproducible, *args)


def reproducible_start(comm: Any, method: str, args: tuple, algorithm: str, reproducible: bool | None) -> Request:
    """The nonblocking summing call ``method`` in the reproducible mode."""
    return reproducible_inter.start(comm, method, algorithm, reproducible, *args)


def _run_summing(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> None:
    """A blocking summing call (the Python definition of the compiled ``run_summing``)."""
    if not wanted(reproducible):
        return dispatch.run_blocking(comm, method, algorithm, *args)
    return reproducible_run(comm, method, algorithm, reproducible, *args)


def _start_summing(comm: Any, method: str, args: tuple, algorithm: str, reproducible: bool | None) -> Request:
    """A nonblocking summing call (the Python definition of the compiled ``start_summing``)."""
    if not wanted(reproducible):
        return dispatch.start(comm, method, args, algorithm)
    return reproducible_start(comm, method, args, algorithm, reproducible)


def init_summing(comm: Any, method: str, args: tuple, algorithm: str, reproducible: bool | None) -> Prequest:
    """A persistent summing call: the plain ``init``, or the reproducible one."""
    if not wanted(reproducible):
        return dispatch.init(comm, method, args, algorithm)
    return reproducible_inter.init(comm, method, algorithm, reproducible, *args)


def _compiled() -> tuple[Any, Any]:
    """The compiled ``run_summing`` and ``start_summing`` where the blocking and nonblocking calls they hand the
    plain call to are the compiled ``run`` and ``start`` too, else the Python definitions."""
    _callkey = extension("_callkey") if callkey.call_key is not callkey._call_key else None
    if _callkey is None or dispatch.run_blocking is not _callkey.run or dispatch.start is not _callkey.start:
        return _run_summing, _start_summing
    _callkey.init_summing(DEFAULT, wanted, run_planned, reproducible_inter.run, reproducible_start)
    return _callkey.run_summing, _callkey.start_summing


#: ``run_summing(comm, method, algorithm, reproducible, *args)`` and ``start_summing(comm, method, args,
#: algorithm, reproducible)``: what every summing method calls
run_summing, start_summing = _compiled()
