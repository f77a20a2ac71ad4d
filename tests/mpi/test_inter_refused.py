"""Bad input on one rank of an intercommunicator call: that rank raises its error, every other rank raises
``ArgumentError`` naming it, none waits, no buffer of another rank is written, and the next calls are right.

The blocking calls' agreement is a dissemination of empty messages, marked by the rank at fault
(:class:`mpicoll.comm.inter.Agreement`); between two ranks the first stage travels in its round
(:func:`mpicoll.comm.inter._with_agreement`).  So each case is run after the same call was made correctly
(the other ranks then run it from the cache of kept calls, from C), on fresh buffers (a rank at fault whose
call is not cached), and on the paths that are not the hot one: a communicator with a timeout (every round a
watched request) and a call made while a request is outstanding.  At p = 2 the groups are 1 + 1 (the folded
round), at p = 3 and 4, 2 + 1 and 2 + 2 (several rounds of marks).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll

from conftest import WORLD, check

pytestmark = [pytest.mark.mpi, pytest.mark.skipif(WORLD.size < 2, reason="an intercommunicator needs 2 ranks")]

P, R = WORLD.size, WORLD.rank
COLOR = R % 2
OTHERS = [q for q in range(P) if q % 2 != COLOR]
AT_FAULT = P - 1          # the world rank whose arguments are bad (group 1 at p = 2 and 4, group 0 at p = 3)


def _inter(timeout: float | None = None) -> mpicoll.Intercomm:
    world = mpicoll.Comm(WORLD, timeout=timeout)
    half = world.Split(COLOR, R)
    inter = half.Create_intercomm(0, world, 1 - COLOR)
    half.Free()
    return inter


def _root_of(inter: mpicoll.Intercomm, world_root: int) -> object:
    """This rank's root argument of a rooted call from world rank ``world_root``."""
    if COLOR == world_root % 2:
        return MPI.ROOT if R == world_root else MPI.PROC_NULL
    return world_root // 2


def _outcome(call) -> BaseException | None:
    try:
        call()
    except Exception as exc:   # noqa: BLE001
        return exc
    return None


def _cases(inter: mpicoll.Intercomm, nbytes: int) -> dict:
    """name -> (good call, the same call with this rank's bad arguments, the error class the rank at fault
    raises, the buffers of the good call no rank may find written when it failed)."""
    n = max(nbytes // 8, 1)
    x, y, buf = np.ones(n), np.full(n, -1.0), np.full(n, 7.0)
    frozen = np.full(n, -1.0)
    frozen.flags.writeable = False
    to_it = 1 - AT_FAULT % 2                    # a root in the other group: the rank at fault receives
    into = [buf] if COLOR != to_it % 2 else []
    from_it = [buf] if COLOR != AT_FAULT % 2 else []
    return {
        "Allreduce recvbuf read-only": (lambda: inter.Allreduce(x, y), lambda: inter.Allreduce(x, frozen),
                                        ValueError, [y]),
        "Allreduce IN_PLACE": (lambda: inter.Allreduce(x, y), lambda: inter.Allreduce(MPI.IN_PLACE, y),
                               ValueError, [y]),
        "Bcast from it, bad buffer": (lambda: inter.Bcast(buf, _root_of(inter, AT_FAULT)),
                                      lambda: inter.Bcast("not a buffer", MPI.ROOT), TypeError, from_it),
        "Bcast to it, read-only": (lambda: inter.Bcast(buf, _root_of(inter, to_it)),
                                   lambda: inter.Bcast(frozen, _root_of(inter, to_it)), ValueError, into),
        "Bcast to it, bad root": (lambda: inter.Bcast(buf, _root_of(inter, to_it)), lambda: inter.Bcast(buf, 99),
                                  MPI.Exception, into),
        "Bcast from it, bad root": (lambda: inter.Bcast(buf, _root_of(inter, AT_FAULT)),
                                    lambda: inter.Bcast(buf, -99), MPI.Exception, from_it),
        "Barrier algorithm": (inter.Barrier, lambda: inter.Barrier(algorithm="ring"), ValueError, []),
    }


def _refused_everywhere(inter: mpicoll.Intercomm, nbytes: int, warm: bool) -> None:
    for name, (good, bad, error, untouched) in _cases(inter, nbytes).items():
        if warm:
            good()
            good()      # the other ranks now run it kept built
        for a in untouched:
            a[...] = -1.0       # (a refused call that wrote them would write what the good ones did)
        before = [a.copy() for a in untouched]
        _run_refused(name, good, bad, error, untouched, before)
        y = np.empty(1)
        inter.Allreduce(np.ones(1), y)       # the communicator works afterwards, and no message was left over
        check(y[0] == len(OTHERS), f"{name}: {y}")
        WORLD.Barrier()      # (no rank has started another call: any message still there is one left over)
        left = [comm._state.private.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG) for comm in (inter._state.merged,
                                                                                      inter._state.local)]
        check(not any(left), f"{name}: a message was left unreceived: {left}")
        if warm:
            good()


def _run_refused(name: str, good, bad, error: type, untouched: list, before: list) -> None:
    outcome = _outcome(bad if R == AT_FAULT else good)
    if R == AT_FAULT:
        ok = isinstance(outcome, error) and not isinstance(outcome, mpicoll.ArgumentError)
    else:
        at_fault = f"[{AT_FAULT // 2}] of {'the remote group' if AT_FAULT % 2 != COLOR else 'this group'}"
        ok = (isinstance(outcome, mpicoll.ArgumentError) and "were rejected" in str(outcome)
              and at_fault in str(outcome) and all(np.array_equal(a, b) for a, b in zip(untouched, before)))
    check(ok, f"{name}: {outcome!r}")     # (every rank checks once: check is collective)


@pytest.mark.parametrize("warm", [True, False], ids=["others-kept", "fresh"])
def test_bad_arguments_on_one_rank_every_rank_raises_and_goes_on(warm):
    inter = _inter()
    try:
        _refused_everywhere(inter, 8, warm)
    finally:
        inter.Free()


def test_large_messages_sent_to_the_rank_at_fault_are_received():
    """1 MiB (sent by rendezvous, not buffered): the root's message to a receiver at fault completes."""
    inter = _inter()
    try:
        _refused_everywhere(inter, 1 << 20, True)
    finally:
        inter.Free()


def test_with_a_timeout_every_round_watched():
    inter = _inter(timeout=30.0)
    try:
        _refused_everywhere(inter, 8, True)
    finally:
        inter.Free()


def test_while_a_request_is_outstanding():
    """A blocking call made while this rank's request is unfinished runs as requests (they keep moving)."""
    inter = _inter()
    other = mpicoll.Comm(WORLD)
    try:
        request = other.Ibarrier()
        _refused_everywhere(inter, 8, True)
        request.Wait()
    finally:
        inter.Free()


def test_a_kept_call_is_one_entry_of_the_hot_path():
    """The second identical call is found in ``entries`` (the compiled hot path's cache) and the flight recorder
    notes each call as an intercommunicator one."""
    inter = _inter()
    try:
        x, y = np.ones(2), np.empty(2)
        inter.Allreduce(x, y)
        state = inter._state
        check(len(state.entries) == 1 and state.entries is state.calls.data, len(state.entries))
        kept = next(iter(state.entries.values()))
        used = kept.used = False
        inter.Allreduce(x, y)
        used = kept.used
        check(used and np.all(y == len(OTHERS)), (used, y))
        if state.recorder is not None:
            seq = state.tags[1]
            slot = state.recorder.calls[seq % len(state.recorder.calls)]
            check(slot[1] == seq and slot[2][:3] == ("allreduce", "intercomm", -1), slot)
    finally:
        inter.Free()
