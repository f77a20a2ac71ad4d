"""The flight recorder notes every kind of intercommunicator call: blocking, ``I*``, ``*_init``, the object
collectives and the reproducible sums, each once, numbered as the calls draw their tags, named with its
collective and ``intercomm``; a call that raised is noted as failed, with its error.

An intercommunicator's calls are noted in its merged private communicator's recorder (``inter._state.recorder``),
which ``python -m mpicoll doctor`` reads with the groups' sizes (``tests/fault/test_trace.py`` runs the doctor on
a missing rank).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll import config

from conftest import WORLD, check

pytestmark = [pytest.mark.mpi, pytest.mark.skipif(WORLD.size < 2, reason="an intercommunicator needs 2 ranks"),
              pytest.mark.skipif(config.current().trace_calls == 0, reason="MPICOLL_TRACE_CALLS=0: no record")]

P, R = WORLD.size, WORLD.rank
COLOR = R % 2


def _inter() -> mpicoll.Intercomm:
    world = mpicoll.Comm(WORLD)
    half = world.Split(COLOR, R)
    inter = half.Create_intercomm(0, world, 1 - COLOR)
    half.Free()
    return inter


def _root() -> object:
    """This rank's root argument of a rooted call from world rank 0."""
    if COLOR == 0:
        return MPI.ROOT if R == 0 else MPI.PROC_NULL
    return 0


def _noted(inter: mpicoll.Intercomm) -> list[tuple]:
    """(kind, seq, collective, algorithm, ended, error) of every call on record, oldest first."""
    return [(e["kind"], e["seq"], e["collective"], e["algorithm"], e["end"] is not None, e.get("error"))
            for e in inter._state.recorder.slots()]


def test_every_kind_of_call_is_noted():
    inter = _inter()
    try:
        x, y = np.ones(4), np.empty(4)
        inter.Allreduce(x, y)
        inter.Iallreduce(x, y).Wait()
        persistent = inter.Allreduce_init(x, y)
        persistent.Start()
        persistent.Wait()
        persistent.Free()
        inter.Barrier()
        inter.allreduce(R)
        inter.bcast("hello", root=_root())
        inter.allgather(R)
        inter.Bcast(x, root=_root())
        inter.Allreduce(x, y, reproducible=True)
        inter.Iallreduce(x, y, reproducible=True).Wait()
        noted = _noted(inter)
    finally:
        inter.Free()
    want = [("blocking", 1, "allreduce"), ("nonblocking", 2, "allreduce"), ("persistent", "3.1", "allreduce"),
            ("blocking", 4, "barrier"), ("blocking", 5, "allreduce"), ("blocking", 7, "bcast"),
            ("blocking", 9, "allgather"), ("blocking", 11, "bcast"), ("blocking", 12, "allreduce"),
            ("nonblocking", 13, "allreduce")]   # (one sequence for every form; each object call's agreement
    #                                              drew a number before the call's own: 6, 8, 10)
    check([n[:3] for n in noted] == want and all(n[3] == "intercomm" and n[4] and n[5] is None for n in noted),
          f"{noted}")


def test_a_failed_object_call_is_noted_with_its_error():
    inter = _inter()
    try:
        raised = None
        try:
            inter.bcast("x", root=P + 5)      # no such root anywhere: every rank raises, after the agreement
        except Exception as exc:  # noqa: BLE001
            raised = exc
        inter.allreduce(1)                    # the next call is right, and noted after it
        noted = _noted(inter)
    finally:
        inter.Free()
    check(raised is not None and len(noted) == 2 and noted[0][:3] == ("blocking", 1, "bcast") and noted[0][4]
          and noted[0][5] is not None and noted[1][:3] == ("blocking", 3, "allreduce") and noted[1][5] is None,
          f"{raised!r} {noted}")
