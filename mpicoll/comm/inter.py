"""An intercommunicator's state and how its calls run: the agreement, then stages, blocking, ``I*`` or ``*_init``.

On an intercommunicator of groups A and B, MPI's collectives move data *between* the groups; mpicoll
writes each one as *stages* (:mod:`mpicoll.comm.inter_stages`): collectives of one group, on that group's
private communicator, and exchanges between the groups, on a private communicator of both groups (the two
groups merged, never the user's).  This module holds what every call shares: the state
(:class:`InterState`), and running a call: its stages (:class:`Stages`) made one plan
(:func:`mpicoll.program.plan.composed`), run as any plan is, blocking or as a request.

Every call starts with an **agreement** over both groups of whether some rank's arguments failed their checks.
A rank whose check fails takes part in it, then raises; every other rank raises :class:`~mpicoll.ArgumentError`
naming it, so that an error one rank detects never leaves the other group waiting.  A blocking call's agreement
(:class:`Agreement`) is a dissemination of empty messages on the merged communicator, ceil(lg(n + m)) rounds with
no local step, posted from C: a rank whose checks failed plays it with its messages *marked*, one byte long
(:mod:`mpicoll.engine.standin`), and a rank that receives a marked message marks the rest of its own, so every
rank learns of it; then, and only then, every rank runs a second, naming all-reduce of which ranks failed
(:meth:`Stages.agreement`), which nonblocking calls and the object collectives run as their agreement.  A
persistent request checks its arguments when it is made, as an intracommunicator's does.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll import errors
from mpicoll.bounded import Bounded
from mpicoll.calls.table import VALUE_ARGS
from mpicoll.comm.inter_build import Stages, build, message
from mpicoll.comm.inter_stages import STAGES
from mpicoll.engine import inflight, requests
from mpicoll.engine.forms import NONBLOCKING, PERSISTENT, number
from mpicoll.engine.mismatch import CallNote, join, sig_of
from mpicoll.engine.recorder import Called, Noted, named
from mpicoll.engine.requests import Prequest, Request
from mpicoll.engine.rounds import CommRound, post, revoke_together
from mpicoll.engine.standin import TIMEOUT, Agreeing, drain, is_mark, run_marked
from mpicoll.program.callkey import held, shape_key
from mpicoll.program.plan import Plan, composed
from mpicoll.program.plancache import Entry
from mpicoll.program.state import CommState

__all__ = ["InterState", "Agreement", "Stages", "state_of", "run", "execute", "start", "init", "noted"]


def _ranks_in(merged: MPI.Comm, local: MPI.Comm) -> list[int]:
    """Each rank of ``merged``'s rank in ``local`` (-1 for the remote group's)."""
    group, there = merged.Get_group(), local.Get_group()
    ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())), there)
    group.Free()
    there.Free()
    return [-1 if r == MPI.UNDEFINED else r for r in ranks]


def state_of(comm: Any) -> InterState:
    """The state of intercommunicator ``comm`` (an :class:`mpicoll.Intercomm`)."""
    state = comm._state
    if state is None:
        raise ValueError("the communicator is MPI.COMM_NULL")
    return state


class InterState:
    """mpicoll's data for one intercommunicator: the two private communicators its stages travel on.

    Attributes
    ----------
    merged : mpicoll.Comm
        Both groups merged (mpicoll's own; never the user's): the agreement and the exchanges between groups.
    local : mpicoll.Comm
        This rank's group (mpicoll's own): the local stages.
    remote : tuple of int
        The rank in ``merged`` of each rank of the remote group.
    rank, size, remote_size : int
        This rank in its group, the group's size, the remote group's size.
    """

    __slots__ = ("merged", "local", "remote", "rank", "size", "remote_size", "calls", "entries",
                 "agreement", "tags", "recorder", "notes", "__weakref__")

    @staticmethod
    def slow_path(state: InterState, method: str, algorithm: str, args: tuple, tag: int, key: Any) -> None:
        """How every blocking call runs (:func:`run`), with the tag and the key the hot path drew for it."""
        run(state, method, args, algorithm, tag, key)

    def __init__(self, merged: Any, local: Any, remote: tuple[int, ...]) -> None:
        self.merged, self.local, self.remote = merged, local, remote
        self.rank, self.size = local.Get_rank(), local.Get_size()
        self.remote_size = len(remote)
        #: blocking calls kept built: call key -> :class:`~mpicoll.program.plancache.Entry` (the entry of any
        #: communicator's cache), oldest first; at most CACHED_CALLS of them, whose messages hold at most
        #: CACHED_BYTES in all (see :func:`run`)
        self.calls = Bounded(CACHED_CALLS, CACHED_BYTES)
        #: what the blocking hot path reads (:data:`mpicoll.program.state.HOT_FIELDS`): the kept calls, whose
        #: ``run(tag)`` it calls on a hit (None with a timeout: every call then takes :meth:`slow_path`, watched);
        #: its tags and its flight recorder are the merged communicator's
        self.entries: dict[Any, Entry] | None = self.calls.data if merged.timeout is None else None
        self.agreement = Agreement(merged._state)
        #: the merged communicator's tag sequences (the same list): a blocking call's messages carry the tag the
        #: hot path draws from them
        self.tags: list[int] = merged._state.tags
        revoke_together([merged._state.private, local._state.private])   # a process failure stops both
        join(merged._state.private, local._state.private, _ranks_in(merged._state.private, local._state.private),
             remote)
        #: the merged communicator's flight recorder notes this one's calls (numbered by the tags they draw
        #: there, as any communicator's calls are), marked with the sizes of the groups in its rank order
        self.recorder = merged._state.recorder
        #: method -> what its calls are noted as and compared by (:func:`_note`)
        self.notes: dict[str, CallNote] = {}
        if self.recorder is not None:
            self.recorder.groups = (self.remote_size, self.size) if 0 in remote else (self.size, self.remote_size)

    @property
    def timeout(self) -> float | None:
        return self.merged.timeout

    def release(self) -> None:
        """Free both private communicators (and what mpicoll keeps for them)."""
        self.calls.clear()
        for comm in (self.local, self.merged):
            if comm != MPI.COMM_NULL and not MPI.Is_finalized():
                comm.Free()

    def __del__(self) -> None:
        # the last wrapper of an unfreed intercommunicator is gone: free mpicoll's communicators for it
        try:
            self.release()
        except Exception:   # at interpreter exit MPI may be gone: nothing is left to free
            pass


class Agreement:
    """A blocking call's agreement: a dissemination of empty messages over both groups (the merged communicator).

    In round k (k = 0 .. K-1, K = ceil(lg N) for the N ranks of both groups) rank r sends to rank (r + 2^k) mod N
    and receives from rank (r - 2^k) mod N.  After round k, rank r has heard, directly or through others, from
    the 2^(k+1) ranks r - 2^(k+1) + 1 .. r; after round K-1 from all N.  A correct rank's messages are empty; a
    rank whose checks failed sends one byte (a mark), which ends its receiver's empty receive with MPI's
    truncation error, and that receiver marks the rest of its agreement
    (:func:`mpicoll.engine.standin.continue_marked`, told by :class:`~mpicoll.engine.standin.Agreeing` where
    the agreement ends): so a mark reaches every rank, as the flags of a dissemination barrier would.  Nothing is
    computed: a correct call's agreement is K message exchanges, posted from C with the call's first stages.
    """

    __slots__ = ("comm", "rounds")

    def __init__(self, merged: CommState) -> None:
        n, r = merged.size, merged.rank
        empty = message(np.empty(0, np.uint8))
        self.comm = merged.private
        self.rounds: list[CommRound] = []
        distance = 1
        while distance < n:
            self.rounds.append((self.comm, [(empty, (r + distance) % n)], [(empty, (r - distance) % n)], []))
            distance *= 2


def _kept(state: InterState, method: str, stages: list[CommRound], refs: list[Any]) -> Entry:
    """A blocking call built (the agreement's rounds, then its stages', one plan), as its cache keeps it: an
    :class:`~mpicoll.program.plancache.Entry` whose ``run(tag)`` runs it on the hot path, its messages carrying
    ``tag`` plus its signature's hash (``what.sig``)."""
    plan = composed(_with_agreement(state, stages), _note(state, method))
    return Entry(plan, _runner(state, method, plan), refs, plan.what())


def _with_agreement(state: InterState, stages: list[CommRound]) -> list[CommRound]:
    """The agreement's rounds, then the stages'.

    Between two ranks (groups of one), where the agreement is one exchange with the other rank, the first stage
    (one round with that rank, at most one message from it) travels in the agreement's round, after its empty
    messages (so each side matches the agreement's message first): the call then waits for one exchange, not
    two.  A rank whose checks failed knows nothing of its stages, so it sends, after its mark, one empty message
    in place of any that was expected of it (a receive of fewer bytes than posted ends without error, and the
    mark has told of the failure), and receives into scratch whatever was sent to it (:func:`_refuse`); the
    other rank receives the empty message where it expected none (:func:`_name`).
    """
    agreement = state.agreement.rounds
    if len(agreement) == 1 and stages:
        comm, sends, recvs, steps = stages[0]
        if comm is agreement[0][0] and len(recvs) <= 1:
            _, agreed_sends, agreed_recvs, _ = agreement[0]
            return [(comm, agreed_sends + sends, agreed_recvs + recvs, steps), *stages[1:]]
    return agreement + stages


def _runner(state: InterState, method: str, plan: Plan) -> Callable[[int], None]:
    """``run(tag)``: the call, blocking, where no timeout is set and no request is outstanding (the hot path
    checks): the plan's runner (stretch by stretch, each posted from C where it can be), its first stretch, the
    agreement's rounds and the stages on the merged communicator that follow them, bound as
    :class:`~mpicoll.engine.standin.Agreeing` rounds, so that a marked agreement ends in :func:`_name`.  A call of
    one stretch (groups of one rank) is that stretch's runner itself: a hit is one call into C."""
    owner = weakref.ref(state)    # (the state keeps its kept calls: no cycle)

    def refused(tag: int, exc: BaseException) -> None:
        _name(owner(), method, tag, None, exc)   # type: ignore[arg-type]

    stretches = plan.stretches()
    comm, first = stretches[0]
    stretches[0] = comm, Agreeing(first, len(state.agreement.rounds), refused)
    return plan.runner(None)


def _refuse(state: InterState, method: str, tag: int, error: BaseException) -> None:
    """What a rank whose checks raised ``error`` does: play the agreement marked, then the naming all-reduce
    (:func:`_name`), which raises ``error`` here and ArgumentError naming this rank on the others.  Meanwhile it
    receives, into scratch, any message a peer sent it with the call's tag (a first stage sent in the agreement's
    round, see :func:`_with_agreement`): such a send completes, and the peer goes on to the naming, only once it
    is received."""
    agreement = state.agreement
    limit = state.timeout or TIMEOUT
    try:
        run_marked([r[1:] for r in agreement.rounds], agreement.comm, tag, limit=limit, what=method)
    except Exception:      # the peers did something else (their calls do not match): no naming to join
        raise error from None
    instead = []     # between two ranks: the empty message in place of a stage's (see _with_agreement)
    if len(agreement.rounds) == 1:
        peer = agreement.rounds[0][1][0][1]
        instead += post(agreement.comm, tag, [(message(np.empty(0, np.uint8)), peer)], [])
    named = composed(Stages(state).agreement(method, error))
    naming = Request(named.rounds(), named.comms or [], state.merged._state.next_tag(NONBLOCKING), None)
    naming._launch()
    deadline = time.monotonic() + limit
    try:
        while not naming.Test() or not MPI.Request.Testall(instead):
            drain(agreement.comm, tag)
            if time.monotonic() > deadline:   # the peers did something else: stop waiting for them
                raise error from None
    finally:
        drain(agreement.comm, tag)
    raise error


def execute(state: InterState, method: str, plan: Plan, tag: int, agreed: int = 0) -> None:
    """Run a composed call blocking, its messages carrying ``tag`` plus its signature's hash (``plan.sig``).

    With a timeout (every wait watched), or while nonblocking requests are outstanding (they must keep moving),
    it runs as a request that is waited for.  ``agreed``: how many of its first rounds are the agreement; a
    marked message arriving in one of them is handled as the blocking executor handles it
    (:func:`mpicoll.engine.standin.continue_marked`): the rest of the agreement played marked, then the naming
    all-reduce."""
    if state.timeout is None and not inflight.outstanding():
        plan.runner(None)(tag)
        return
    rounds = plan.rounds()
    if not rounds:
        return
    tag += plan.sig
    req = Request(rounds, plan.comms or [], tag, None)
    if state.timeout is not None:
        req.watch = (method, state.timeout, state.merged._state.rank)
    req._launch()
    try:
        req.Wait()
    except MPI.Exception as exc:
        failed = req._round
        if not is_mark(exc) or failed >= agreed:
            raise
        run_marked(rounds[:agreed], state.agreement.comm, tag, failed + 1, limit=state.timeout or TIMEOUT,
                   what=method)
        _name(state, method, tag, None, exc)


def _name(state: InterState, method: str, tag: int, error: BaseException | None, marked: BaseException | None) -> None:
    """After a marked agreement, which every rank then runs: the all-reduce over both groups of which ranks'
    checks failed (:meth:`~mpicoll.comm.inter_build.Stages.agreement`, with a tag of its own, drawn alike by every
    rank), whose verdict raises ArgumentError naming the ranks at fault (the rank at fault runs it in
    :func:`_refuse`).  Where no rank says it failed (a call that does not match sent the mark), the mark's
    ``marked`` error is raised."""
    try:
        execute(state, method, composed(Stages(state).agreement(method, error)),
                state.merged._state.next_tag(NONBLOCKING))
    finally:      # the empty message a rank at fault sent in place of a stage's, where none was expected
        drain(state.agreement.comm, tag)
    raise error if error is not None else errors.ArgumentError(
        f"{method} on an intercommunicator: a marked message arrived, but no rank's arguments were rejected: the "
        "ranks' calls do not match", method) from marked


def start(state: InterState, method: str, args: tuple, algorithm: str,
          stages: dict[str, Callable[..., None]] = STAGES) -> Request:
    """A nonblocking intercommunicator call: the agreement, then the call's stages, started."""
    merged = state.merged._state
    tag = merged.next_tag(NONBLOCKING)
    st, error = build(state, method, args, algorithm, stages=stages)
    return requests.start(st.program(_note(state, method), st.agreement(method, error) + st.rounds), merged, tag,
                          keep=args)


def _note(state: InterState, method: str) -> CallNote:
    """What the flight recorder notes of a call of ``method`` and the mismatch check compares
    (:mod:`mpicoll.engine.mismatch`): its collective, ``intercomm`` for the algorithm (its stages' own differ
    by group), no size (a root's buffers and its group's differ), its signature (the collective only: the
    groups' counts and roots legitimately differ) and every rank of both groups as peers (the agreement's
    messages reach them all).  Its calls' messages carry the signature's hash in their tag."""
    note = state.notes.get(method)
    if note is None:
        signature = f"{method} on an intercommunicator"
        note = state.notes[method] = CallNote(method.lower(), "intercomm", -1, signature,
                                              sig_of(signature, state.tags[2]), tuple(range(state.merged.size)))
    return note


def noted(state: InterState, method: str, tag: int) -> Noted:
    """The flight recorder's note of blocking call ``tag`` made outside :func:`run`'s hot path (an object
    collective, a reproducible sum): a context around the whole call (:class:`~mpicoll.engine.recorder.Noted`).
    Their messages carry no signature, so the mismatch check does not compare them."""
    return Noted(state.recorder, number(state.tags, tag), _note(state, method)[:3])


#: per intercommunicator: the most blocking calls kept built, and the most bytes their messages hold in all
CACHED_CALLS, CACHED_BYTES = 16, 1 << 24


def run(state: InterState, method: str, args: tuple, algorithm: str, tag: int, key: Any,
        stages: dict[str, Callable[..., None]] = STAGES) -> None:
    """A blocking intercommunicator call: the agreement (:class:`Agreement`) and the stages, run in order.

    A call made again with the same arguments (the plan cache's key: the same buffers, counts, datatypes, op
    and root) runs the rounds built the first time (such a call passed its checks when it was built): the hot
    path (:func:`mpicoll.comm.dispatch.run_blocking`) finds it in :attr:`InterState.entries`, an
    :class:`~mpicoll.program.plancache.Entry` as a plan's, and calls its runner, so that only the messages and
    the stages' steps cost anything.  Kept rounds view the caller's buffers by address, holding none of them;
    their scratch is their own: at most ``CACHED_CALLS`` calls, whose messages span at most ``CACHED_BYTES`` in
    all (:class:`~mpicoll.bounded.Bounded`).  ``tag`` (of the merged communicator's blocking sequence) and
    ``key`` (:func:`~mpicoll.program.callkey.call_key`) are drawn by the hot path.  A rank whose checks fail
    plays the agreement marked (:func:`_refuse`).
    """
    values = VALUE_ARGS.get(method, ())
    note = _note(state, method)
    named(state.recorder, number(state.tags, tag), Called(note))
    kept = state.calls.get(key) if key is not None else None
    if kept is None:
        st, error = build(state, method, args, algorithm,
                          shape_key(method, args, algorithm, values)[1] if key else None, stages)
        if error is not None:
            _refuse(state, method, tag + note.sig, error)
        kept = _kept(state, method, st.rounds, held(args, values))
        if key is not None and not st.before:   # (packed datatypes: built every time)
            state.calls.keep(key, kept, _message_bytes(st.rounds))
    kept.used = True
    if state.timeout is None and not inflight.outstanding():
        kept.run(tag)
    else:
        execute(state, method, kept.program, tag, len(state.agreement.rounds))


def _message_bytes(rounds: list[CommRound]) -> int:
    """The bytes of every message of ``rounds``."""
    return sum(MPI.buffer(buf[0] if isinstance(buf, list) else buf).nbytes
               for _, sends, recvs, _ in rounds for buf, _ in (*sends, *recvs))


def init(state: InterState, method: str, args: tuple, algorithm: str,
         stages: dict[str, Callable[..., None]] = STAGES) -> Prequest:
    """A persistent intercommunicator call: its arguments checked and its messages bound now."""
    merged = state.merged._state
    tag = merged.next_tag(PERSISTENT)
    st, error = build(state, method, args, algorithm, stages=stages)
    if error is not None:
        raise error
    plan = st.program(_note(state, method))
    return requests.persistent(plan, merged, tag, plan.before, keep=args)
