"""The reproducible sums composed as one plan: the ``I*`` and ``*_init`` forms, and the blocking scattered Allreduce.

A reproducible call (:mod:`mpicoll.comm.reproducible`) is two collectives of the same communicator and
local passes between them.  Here they are composed into one plan, as an intercommunicator call's
stages are (:class:`mpicoll.program.composer.Composer`): each collective is prepared like any call (its plan's
bound rounds, on the communicator's private communicator), and each local pass is a step that runs
once the rounds before it are complete on this rank:

1. the codes (and the byte saying whether this rank's arguments failed), computed when the call
   starts (``I*``) or at every ``Start()`` (``*_init``);
2. the rounds of an ``Allreduce`` MAX of the codes;
3. a step: every rank raises :class:`~mpicoll.errors.ArgumentError` (its ``Wait`` does) where some
   rank's arguments failed, else computes its limbs;
4. the rounds of the collective itself on the limbs (``MPI.SUM``, the ``algorithm`` asked for);
5. a step: the summed limbs rounded once into the result.

A small ``Allreduce`` (at most ``GATHER_BYTES`` of contributions in all) is, as blocking, the rounds
of an ``Allgather`` of the contributions and a step that sums them; a larger one with ``algorithm="auto"``
the rounds of a flag's MAX, of an ``Alltoallv`` of the floats' blocks, a step that sums this rank's
block, and the rounds of an ``Allgatherv``.  Every round travels with the
request's one tag, posted once the round before it is complete here; a peer's messages of one stage
cannot match another's receives, because MPI keeps the order of two messages between the same ranks
with the same tag.

A larger ``Allreduce`` with ``algorithm="auto"`` runs its composed plan in its blocking form too (:func:`run`,
with the blocking call's tag and the plan's signature: the collective and the count), and a small one's
blocking form runs on the same stages (their row, table and sum, around mpicoll's own blocking ``Allgather``:
:func:`mpicoll.comm.reproducible_allreduce.run_gathered`), so both sums are written once for the three forms.

The limbs of a scan always have a column for the counts of inf and NaN (its buffers are bound before the
codes say whether some element has any, and an all-zero count changes no sum); every other call keeps
those counts in limb 0, as the blocking call does, so the bits are the blocking call's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from mpicoll.comm import reproducible as blocking
from mpicoll.comm.preparing import prepare, run_plan
from mpicoll.comm.reproducible_allreduce import (
    FLAG_BYTES,
    PLAN_BYTES,
    blocks,
    borrow,
    gathered_key,
    gathers,
    keep,
    kept_key,
    run_gathered,
    sum_gathered,
)
from mpicoll.data import fixedpoint_kernels as kernels
from mpicoll.engine.forms import BLOCKING, NONBLOCKING, PERSISTENT, number
from mpicoll.engine.mismatch import CallNote, sig_of
from mpicoll.engine.recorder import Noted
from mpicoll.engine.requests import Prequest, Request
from mpicoll.program.composer import Composer
from mpicoll.program.plan import Plan

__all__ = ["run", "start", "init", "RequestStages"]


def nonblocking_name(method: str) -> str:
    return "I" + method[0].lower() + method[1:]


def run(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> None:
    """The blocking form of ``method`` of ``comm``, reproducible where :func:`mpicoll.comm.reproducible.accept`
    takes it (else the ordinary call).  A larger ``Allreduce`` with ``algorithm="auto"`` (the scattered sum)
    runs the plan its request composes (:class:`RequestStages`), blocking, with the blocking call's tag and its
    signature; every other call is :func:`mpicoll.comm.reproducible.run`'s."""
    accepted = blocking.accept(comm, method, reproducible, args)
    if accepted is None:
        return getattr(comm, method)(*args, algorithm=algorithm, reproducible=False)
    call, failure = accepted
    state = comm._state
    size, itemsize = blocking.elements(args) if call is None else (call.values.shape[0], call.values.dtype.itemsize)
    if method == "Allreduce" and gathers(size * itemsize, state.size):
        return _run_small(comm, algorithm, args, call, failure)
    if method != "Allreduce" or algorithm != "auto":
        return blocking.run(comm, method, algorithm, args, call, failure)
    _stages(comm, method, algorithm, args, call, failure).run()
    return None


def _run_small(comm: Any, algorithm: str, args: tuple, call: Any, failure: Exception | None) -> None:
    """A small Allreduce, blocking (:func:`~mpicoll.comm.reproducible_allreduce.run_gathered`): a call with the
    usual arguments on the stages kept for its dtype and length (made and kept by the first such call; the later
    ones find them before parsing, ``run_planned``), any other on stages of its own.  A rank whose arguments
    failed sends its row with the flag set, then raises; its peers raise at their sum."""
    stages = None
    if failure is None and call.plain:
        key = gathered_key(call.values.dtype, call.values.shape[0])
        stages = comm._state.reproducible_plans.get(key)
        if stages is None:
            stages = RequestStages(comm, "Allreduce", algorithm, args, call, None)
            keep(comm, key, stages)
    run_gathered(comm, stages or RequestStages(comm, "Allreduce", algorithm, args, call, failure),
                 None if call is None else call.values, None if call is None else call.out)
    if failure is not None:
        raise failure


def start(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> Request:
    """The nonblocking form of ``method`` (``Iallreduce`` for ``"Allreduce"``, ...) of ``comm``, reproducible
    where :func:`mpicoll.comm.reproducible.accept` takes it (else the ordinary request)."""
    accepted = blocking.accept(comm, method, reproducible, args)
    if accepted is None:
        return getattr(comm, nonblocking_name(method))(*args, algorithm=algorithm, reproducible=False)
    state = comm._state
    state.check_in_step()
    tag = state.next_tag(NONBLOCKING)
    stages = _stages(comm, method, algorithm, args, *accepted)
    stages.fill()
    plan = stages.plan()
    rounds, steps, _, comms = plan.request_parts(state.private)
    req = Request(rounds, comms, tag, None, steps, lent=plan if stages.kept else None,
                  keep=(args, stages))
    _watch(req, state, method)
    req._launch()
    return req


def _stages(comm: Any, method: str, algorithm: str, args: tuple, call: Any, failure: Exception | None) -> RequestStages:
    """The stages of a request: for an ``Iallreduce`` of two NumPy arrays taken as they are (``call.plain``),
    those an earlier such request left in the communicator's ``reproducible_plans``, once the engine is done
    with it; else new ones, kept there for the next such call (at most ``PLAN_BYTES`` of contribution).

    A small call's stages are kept by dtype and length, the arrays of each call bound to them anew (its rounds
    move the stages' own row and table); a larger call's rounds move the arrays themselves, so its stages are
    kept by the call's key (the arrays' addresses, lengths and dtype, and the algorithm)."""
    if call is None or not call.plain or failure is not None:
        return RequestStages(comm, method, algorithm, args, call, failure)
    values = call.values
    if gathers(values.nbytes, comm._state.size):
        key = ("Iallreduce", *gathered_key(values.dtype, values.shape[0]))
    else:
        key = kept_key(method, args, algorithm) if values.nbytes <= PLAN_BYTES else None
        if key is None or key[1] is None:      # (None: a call the key cannot describe)
            return RequestStages(comm, method, algorithm, args, call, failure)
    stages = borrow(comm._state.reproducible_plans, key)
    if stages is None:
        stages = RequestStages(comm, method, algorithm, args, call, failure)
        stages.kept = True
        keep(comm, key, stages)
        stages.plan().lent = True
    stages.call = call
    return stages


def init(comm: Any, method: str, algorithm: str, reproducible: bool | None, *args: Any) -> Prequest:
    """The persistent form of ``method`` of ``comm`` (``Allreduce_init`` ...), reproducible where
    :func:`mpicoll.comm.reproducible.accept` takes it: every ``Start()`` computes the codes of the buffers'
    current contents, then runs the rounds and steps bound here.

    Raises
    ------
    ValueError, TypeError
        This rank's arguments failed a check (no message is sent by an ``*_init`` call, as in the
        ordinary form).
    """
    accepted = blocking.accept(comm, method, reproducible, args)
    if accepted is None:
        return getattr(comm, method + "_init")(*args, algorithm=algorithm, reproducible=False)
    call, failure = accepted
    if failure is not None:
        raise failure
    state = comm._state
    tag = state.next_tag(PERSISTENT)
    plan = RequestStages(comm, method, algorithm, args, call, None).plan()
    req = Prequest(plan.rounds(), plan.comms or [], tag, None, plan.before, keep=(args, plan))
    _watch(req, state, method)
    return req


def _watch(req: Any, state: Any, method: str) -> None:
    """A communicator with a timeout: the request's waits are watched, as its ordinary requests' are."""
    if state.timeout is not None:
        req.watch = (method, state.timeout, state.rank, state.went_out_of_step)


class RequestStages(Composer):
    """One rank's rounds ``(comm, sends, recvs, steps)`` of a reproducible request, the buffers they bind and
    the local passes; :meth:`plan` is their program, which the request runs.

    ``fill()`` writes what the first round sends (the codes, or a small Allreduce's contribution), from the
    contribution's current contents: the plan's ``before``, which a persistent request runs at every start.
    """

    #: whether the stages are kept for later requests (:func:`_stages`; their plan is lent to one at a time)
    kept = False
    _plan: Plan | None = None
    _later: Any = None     # what composes the rounds when the plan is first asked for (a gathered call's)

    def __init__(self, comm: Any, method: str, algorithm: str, args: tuple, call: Any, failure: Exception | None):
        super().__init__()
        self.state = state = comm._state
        self.method, self.call, self.failure = method, call, failure
        size, itemsize = blocking.elements(args) if call is None else (call.values.shape[0],
                                                                          call.values.dtype.itemsize)
        self.size, self.nbytes = size, size * itemsize
        if method == "Allreduce" and gathers(self.nbytes, state.size):
            self._gathered(call)
            return
        if method == "Allreduce" and algorithm == "auto":
            self._scattered(args, call)
            return
        self.head = np.zeros(size + 1, np.int8)
        self.fill = self._fill_head
        self._collective("Allreduce", (MPI.IN_PLACE, self.head, MPI.MAX), algorithm if method == "Allreduce" else
                         "auto")
        if call is None:      # this rank's arguments failed: it raises once every rank has the flags
            self.step(self._verdict)
            return
        cols = call.fmt.limbs + (method in blocking.PREFIXES)   # (a scan's counts: always their column)
        rows = blocking.summed_rows(method, call, state.rank)
        space = np.empty(8 * (size + (rows or 0)) * cols, np.uint8)
        self.limbs, self.summed = blocking.carve(space, size, rows, cols)
        self.step(self._encode)
        self._collective(method, blocking.sum_args(method, args, call, self.limbs, self.summed), algorithm)
        if self.summed is not None and call.out is not None:
            self.step(self._decode)

    def _gathered(self, call: Any) -> None:
        """A small Allreduce, in every form: this rank's row (the contribution's bytes, then ``FLAG_BYTES``, the
        first set where its arguments failed), the rounds of an ``Allgather`` of the rows into the table, and a
        step that sums the table (:meth:`sum`).  The rounds are composed when a request first asks for the
        :meth:`plan`: the blocking form runs mpicoll's own blocking ``Allgather`` of the row and table instead
        (:func:`~mpicoll.comm.reproducible_allreduce.run_gathered`), whose cached plan those rounds would repeat.

        ``hit``: what the compiled blocking hit reads of stages kept for a call with the usual arguments
        (``mpicoll/data/_gathered.c``): the row, the table, the elements and the format as the kernels take it;
        None for other calls (another dtype than float64 and float32, no element)."""
        width, p = self.nbytes + FLAG_BYTES, self.state.size
        self.row, self.table = np.zeros(width, np.uint8), np.empty((p, width), np.uint8)
        self.values = self.row[:self.nbytes].view(np.uint8 if call is None else call.values.dtype)
        self.fill, self._later = self._fill_row, self._compose_gathered
        self.hit = None if call is None or not call.plain or not self.size or call.values.dtype.char not in "df" \
            else (self.row, self.table, self.size, kernels.params(call.fmt))

    def _compose_gathered(self) -> None:
        self._collective("Allgather", (self.row, self.table), "auto")
        self.step(self.sum)

    def _scattered(self, args: tuple, call: Any) -> None:
        """A larger Allreduce with ``algorithm="auto"``, in every form (the blocking one too: :func:`run`): the
        rounds of a byte's MAX (whether some rank's arguments failed), a step that raises where one did, the
        rounds of an ``Alltoallv`` of the floats' blocks (rank ``j`` receives block ``j`` of every contribution,
        :func:`~mpicoll.comm.reproducible_allreduce.blocks`), a step that sums this rank's block's table (every
        term of an element is there, so its window, limbs and rounding are those of the two steps), the rounds
        of an ``Allgatherv`` that gives every rank every block.  It moves the floats twice, as a reduce-scatter
        and all-gather of the ordinary sum does, where the two steps move a code and ``fmt.limbs`` int64 per
        element."""
        self.head = np.zeros(1, np.int8)
        self.fill = self._fill_flag
        self._collective("Allreduce", (MPI.IN_PLACE, self.head, MPI.MAX), "auto")
        self.step(self._flagged)
        if call is None:      # this rank's arguments failed: it raises once every rank has the flags
            return
        p, rank, itemsize = self.state.size, self.state.rank, call.values.dtype.itemsize
        counts, displs = ([c * itemsize for c in column] for column in blocks(self.size, p))
        mine = counts[rank]
        self.rows = np.empty((p, mine // itemsize), call.values.dtype)
        self.block = call.out.view(np.uint8)[displs[rank]:displs[rank] + mine].view(call.values.dtype)
        table = [self.rows.view(np.uint8).reshape(-1), ([mine] * p, [mine * j for j in range(p)]), MPI.BYTE]
        self._collective("Alltoallv", ([call.values.view(np.uint8), (counts, displs), MPI.BYTE], table), "auto")
        self.step(self._sum_block)
        self._collective("Allgatherv", (MPI.IN_PLACE, [call.out.view(np.uint8), (counts, displs), MPI.BYTE]), "auto")

    def _collective(self, method: str, args: tuple, algorithm: str) -> None:
        """The bound rounds of the ordinary collective ``method(*args)`` (checked now, like any call)."""
        self.part(prepare(self.state, method, args, algorithm), self.state.private)

    def run(self) -> None:
        """The plan run blocking (the scattered sum's blocking form), with the blocking call's tag, noted with
        its signature; given back after (a kept plan serves the next call)."""
        state, plan = self.state, self.plan()
        tag = state.next_tag(BLOCKING)
        try:
            self.fill()
            with Noted(state.recorder, number(state.tags, tag), plan.what()):
                run_plan(state, plan, tag, self.method)
        finally:
            plan.lent = False

    def plan(self) -> Plan:
        """The rounds and passes as one plan (made once: kept stages serve many calls, one at a time), noted as
        the reproducible form of its collective: its signature holds the collective and the count every rank
        must agree on, which the blocking form's messages carry (:mod:`mpicoll.engine.mismatch`)."""
        if self._plan is None:
            if self._later is not None:     # (a gathered call's rounds: composed for requests only)
                self._later()
            self.before.append(self.fill)
            signature = f"{self.method}(count={self.size}, bytes={self.nbytes}, op=SUM, reproducible=True)"
            self._plan = self.program(CallNote(self.method.lower(), "reproducible", self.nbytes, signature,
                                               sig_of(signature, self.state.tags[2]), tuple(sorted(self.peers))))
        return self._plan

    # -- the local passes ----------------------------------------------------------------------------

    def _fill_head(self) -> None:
        call, size = self.call, self.size
        if call is not None:
            kernels.codes(call.values, call.fmt, out=self.head[:size])
        self.head[size] = self.failure is not None

    def _verdict(self) -> None:
        blocking.raise_any(self.method, self.failure, self.head[self.size])

    def _encode(self) -> None:
        self._verdict()
        kernels.encode(self.call.values, self.head[:self.size], self.call.fmt, out=self.limbs)

    def _decode(self) -> None:
        call = self.call
        code = self.head[call.first:call.first + call.out.shape[0]]
        kernels.decode(self.summed, code, call.fmt, self.state.size, out=call.out)

    def _fill_flag(self) -> None:
        self.head[0] = self.failure is not None

    def _flagged(self) -> None:
        blocking.raise_any(self.method, self.failure, self.head[0])

    def _sum_block(self) -> None:
        block = self.block
        if block.dtype.char in "df" and block.dtype.isnative and block.flags.c_contiguous:   # one kernel call
            kernels.sum_rows_into(self.rows, block, self.call.fmt)
        else:
            kernels.sum_rows(self.rows, out=block)

    def _fill_row(self) -> None:
        self.put(None if self.call is None else self.call.values)

    def put(self, values: np.ndarray | None) -> None:
        """A gathered call's row: ``values`` copied in, or (None: this rank's arguments failed) its flag set."""
        if values is None:
            self.row[self.nbytes] = 1
        else:
            self.values[...] = values

    def sum(self) -> None:
        """A gathered call's last step: the table summed into the result (this rank raises its own error where
        its arguments failed; its peers find its flag)."""
        if self.failure is not None:
            raise self.failure
        sum_gathered(self, self.call.out)
