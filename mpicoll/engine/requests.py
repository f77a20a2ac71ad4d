"""The requests mpicoll's ``I*`` and ``*_init`` calls return, and how they start.

- :class:`Request` (``comm.Iallreduce(...)``) posts ``Irecv``/``Isend`` round by round
  (:func:`mpicoll.engine.rounds.post`);
- :class:`Prequest` (``comm.Allreduce_init(...)``) binds everything once: views,
  peers, its tag, scratch buffers and one MPI persistent request (``Recv_init``,
  ``Send_init``) per message; ``Start()`` only ``Startall``'s round 0.

Both are advanced by the request loop of :mod:`mpicoll.engine.nonblocking`.  Each round
travels on a communicator of its own (``comms[t]``): a plan's rounds all on the
communicator's private duplicate, a composed plan's each on its own
(:attr:`mpicoll.program.plan.Plan.comms`: an intercommunicator's stages on the
private communicators of one group or of both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mpi4py import MPI

from mpicoll.engine import direct, progress
from mpicoll.engine.forms import NONBLOCKING, PERSISTENT, number
from mpicoll.engine.inflight import ACTIVE, COMPLETE, FREED, INACTIVE, RUNNING
from mpicoll.engine.mixed import MixedWaits
from mpicoll.engine.nonblocking import (
    _WAKE,
    _Collective,
    _empty,
    _mpi_bool,
    _startall,
)
from mpicoll.engine.recorder import Recorder, Traced
from mpicoll.engine.rounds import Round, post, post_persistent

if TYPE_CHECKING:
    from mpicoll.program.plan import Plan
    from mpicoll.program.state import CommState as Comm

__all__ = ["Request", "Prequest", "start", "persistent"]


_WAKE.append(progress.first_request)   # the first request's start decides whether the progress thread runs

_NAMES = {INACTIVE: "inactive", RUNNING: "running", COMPLETE: "complete", FREED: "freed"}


class Request(MixedWaits, _Collective):
    """A nonblocking collective in flight (``comm.Iallreduce(...)`` and the like).

    ``rounds`` are bound rounds, round ``t`` posted on ``comms[t]``; ``steps`` (when given) replace the
    rounds' own local steps (a lent plan's, made once).
    """

    __slots__ = ("_rounds",)

    def __init__(self, rounds: list[Round], comms: list[MPI.Comm], tag: int, finish: Callable[[], None] | None,
                 steps: list[list[Callable[[], None]]] | None = None, lent: Any = None, keep: Any = None) -> None:
        super().__init__([steps for _, _, steps in rounds] if steps is None else steps, finish, tag, lent, keep)
        self._rounds, self._comms = rounds, comms

    def _post(self, t: int) -> list[MPI.Request]:
        sends, recvs, _ = self._rounds[t]
        return post(self._comms[t], self.tag, sends, recvs)

    def __repr__(self) -> str:
        return f"<mpicoll.Request tag={self.tag} state={_NAMES[self._state]}>"


class Prequest(MixedWaits, _Collective, MPI.Prequest):
    """A persistent collective (``comm.Allreduce_init(...)``): ``Start()``, then ``Wait()``/``Test()``, repeatedly.

    Everything is bound once at creation: the schedule's views of the buffers,
    the scratch space, the tag, and one MPI persistent request per message
    (round ``t``'s on ``comms[t]``).  The buffers' *contents* may change between
    starts, the buffers may not.  ``before`` runs at every ``Start`` (GPU buffers
    staged in, non-contiguous datatypes packed again), ``finish`` at every completion.
    """

    __slots__ = ("_requests", "_before", "_held")

    def __init__(self, rounds: list[Round], comms: list[MPI.Comm], tag: int,
                 finish: Callable[[], None] | None = None, before: Callable[[], None] | None = None,
                 keep: Any = None) -> None:
        super().__init__([steps for _, _, steps in rounds], finish, tag)
        self._comms = comms
        self._held = keep       # the call's arguments: every start reads and writes their memory, until Free
        self._before = before
        # the MPI persistent requests of every round (receives first, as the blocking executor posts them)
        self._requests: list[list[MPI.Prequest]] = [
            post_persistent(comm, tag, sends, recvs) for comm, (sends, recvs, _) in zip(comms, rounds)]
        # the same rounds started and completed from C (mpicoll.engine.direct), where they travel on one
        # communicator; None: mpi4py's Startall and Waitall
        self._direct = (direct.persistent(rounds, comms[0], self._requests)
                        if comms and all(comm is comms[0] for comm in comms) else None)

    def _free_requests(self) -> None:
        self._direct = None
        for reqs in self._requests:
            for req in reqs:
                req.Free()
        self._requests = []

    def _post(self, t: int) -> list[MPI.Request]:
        reqs = self._requests[t]
        if reqs:
            _startall(reqs)
        return reqs

    def Start(self) -> None:
        """Run the collective once more with the buffers' current contents.

        Raises
        ------
        RuntimeError
            The request was freed, or is still active (``Wait()`` or ``Test()`` it to completion first).
        """
        state = self._state
        if state != INACTIVE and not (state == COMPLETE and not _mpi_bool(self)):   # (completed by MPI's Wait)
            raise RuntimeError(f"{self!r} cannot be started: " + ("it was freed" if state == FREED else
                               "it is still active (Wait() or Test() it to completion first)"))
        if self._before is not None:
            self._before()
        if self._nrounds and (self._requests[0] or self._direct is not None):   # the common case, kept lean
            with self._guard:
                self._arm()
                self._state, self._round = RUNNING, 0
                self._pending = reqs = self._requests[0]
                self._enter()
                try:
                    if self._direct is None:
                        _startall(reqs)
                    else:
                        self._direct.start()
                except MPI.Exception as exc:     # e.g. the communicator was revoked: the request ends with it
                    self._fail(exc, reqs)
        else:
            self._launch()

    def Free(self) -> None:
        """Release the MPI persistent requests; the request cannot be started again.

        Raises
        ------
        RuntimeError
            The request is active (started and not yet completed).
        """
        super().Free()
        self._free_requests()
        self._held = None

    def __bool__(self) -> bool:
        """As for ``MPI.Prequest``: true until freed (MPI's own functions see an inactive one as a null request)."""
        return self._state != FREED

    def __repr__(self) -> str:
        return f"<mpicoll.Prequest tag={self.tag} state={_NAMES[self._state]}>"

    def __del__(self) -> None:
        if self._state == INACTIVE and MPI.Is_initialized() and not MPI.Is_finalized():
            self._free_requests()




#: a cached plan's request started again from C (see mpicoll.comm.dispatch._compiled_start), or None; where it
#: is not None, the C forms of ``Prequest.Start`` and both classes' ``Wait`` replace the methods above, which
#: stay their definition and what the C forms hand the uncommon cases to
RESTART = direct.fast_requests(Prequest, Request, ACTIVE, _WAKE, _empty, Traced, Recorder)


# -- entry points used by mpicoll.Comm ------------------------------------------------

def start(plan: Plan | None, comm: Comm, tag: int, lent: bool = False, keep: Any = None) -> Request:
    """Start ``plan`` nonblocking on ``comm``'s private communicator with the call's ``tag``.

    ``mpicoll.Comm`` draws the tag before it checks the call's arguments, so that
    every rank's tag sequence stays in step even when ``plan`` is None (nothing
    to do) or one rank's checks fail.  A ``lent`` plan is a cached one: the
    request runs its rounds bound once and marks it in use (:attr:`Plan.lent`)
    until it finishes or an error drops it (a user op that raised: the round's
    messages are complete then, so the plan is free to serve the next call).
    The plan keeps that request (``Plan.spare``): the compiled ``start`` runs it
    again for the next equal call once nothing else holds it (the program has
    dropped it), as if it were new.

    ``keep`` (the call's arguments) is held by the request until the collective
    completes: a cached plan views the user's memory by address only, so a
    temporary buffer handed to the call (``comm.Iallreduce(np.ones(n), y)``)
    would otherwise be freed while its messages are in flight.
    """
    if plan is None:
        req = Request([], [], tag, None)
    elif lent:
        plan.lent = True
        rounds, steps, posted_from_c, comms = plan.request_parts(comm.private)
        # (the messages carry the plan's signature too: C adds it to the tag it is given, Python here)
        req = plan.spare = Request(rounds, comms, tag if posted_from_c is not None else tag + plan.sig, plan.finish,
                                   steps, plan, keep)
        req._direct = posted_from_c
    else:
        plan.begin()      # GPU buffers: stage the inputs in
        rounds = plan.bound()
        req = Request(rounds, plan.comms or [comm.private] * len(rounds), tag + plan.sig, plan.finish, keep=keep)
    if comm.recorder is not None:
        req.trace = _traced(comm, NONBLOCKING, tag, plan)
    req._launch()
    return req


def persistent(plan: Plan | None, comm: Comm, tag: int, before: Callable[[], None] | None = None,
               keep: Any = None) -> Prequest:
    """An inactive persistent request for ``plan`` on ``comm`` with a tag of its own for its whole life;
    ``before`` runs at every ``Start`` (for GPU buffers: it stages the device buffers' current contents in)."""
    rounds = plan.bound() if plan is not None else []
    comms = plan.comms if plan is not None and plan.comms is not None else [comm.private] * len(rounds)
    req = Prequest(rounds, comms, tag + (plan.sig if plan is not None else 0),
                   plan.finish if plan is not None else None, before, keep)
    req.trace = _traced(comm, PERSISTENT, tag, plan)
    return req


def _traced(comm: Comm, kind: int, tag: int, plan: Plan | None) -> Traced | None:
    """What a request of ``kind`` notes in its communicator's flight recorder (None: nothing to do, or no
    record kept)."""
    if plan is None or comm.recorder is None:
        return None
    return Traced(comm.recorder, kind, number(comm.tags, tag), plan)
