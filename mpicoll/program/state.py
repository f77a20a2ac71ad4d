"""Everything mpicoll keeps for one communicator, in one object: :class:`CommState`.

A state is made when a communicator is wrapped or derived (see
:mod:`mpicoll.comm.setup`, the only place that talks to the peers for it) and
released with the communicator (``Free``, ``Disconnect``, or garbage collection
of its last wrapper).  Preparing a call reads it and never sends a message:
the rank, the size, the node layout and the tuning data the ranks agreed on are
all here before the first call.

The compiled hot path (``mpicoll.program._callkey``) reads five of its fields,
``tags``, ``entries``, ``request_entries``, ``slow_path`` and ``recorder``: they are declared in :data:`HOT_FIELDS`,
and a test checks that the C module reads exactly these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll.bounded import Bounded
from mpicoll.engine import forms, inflight, mismatch, recorder
from mpicoll.errors import OutOfStepError
from mpicoll.ir.nodes import Nodes
from mpicoll.program.plancache import REQUEST_PLAN_SCRATCH, PlanCache

__all__ = ["CommState", "Preparation", "HOT_FIELDS"]

#: the fields of a CommState the compiled hot path reads (see mpicoll.program._callkey's READS)
HOT_FIELDS = ("tags", "entries", "request_entries", "slow_path", "recorder")

#: the most plans of reproducible sums one communicator keeps (see mpicoll.comm.reproducible_allreduce)
REPRODUCIBLE_PLANS = 16



class CommState:
    """mpicoll's data for one communicator: its private duplicate, tags, plan caches, agreed data, devices.

    Attributes
    ----------
    private : MPI.Intracomm
        The duplicate every message of mpicoll's collectives travels on (never
        matches a user's receive).
    rank, size : int
    timeout : float or None
        Seconds a call may wait for its peers (the watchdog), or None.
    debug : int
        ``MPICOLL_DEBUG``'s level when the communicator was made.
    agreed : mpicoll.selection.tuning.Shared
        Rank 0's tuning and calibration data, the same on every rank.
    nodes : Nodes
        The node layout (:mod:`mpicoll.ir.nodes`), the same on every rank.
    tags : list of int
        ``[per_kind, last number, sigs]`` (see :meth:`next_tag`): three forms' tags below ``tag_ub``, the largest
        tag its messages carry (``MPI.TAG_UB``, or less: ``MPICOLL_TAG_UB``), which the mismatch check's notes
        use.
    plans, request_plans : PlanCache
        Cached plans of blocking calls, and of nonblocking ones (lent to one request at a time).
    entries : dict or None
        ``plans.data`` when calls take the fast path, None when they take the careful one.
    request_entries : dict
        ``request_plans.data``, where the compiled start finds a cached plan's spare request.
    slow_path : callable
        ``slow_path(state, method, algorithm, args, tag, key)``: what runs a call the fast path does not (a
        miss, or every call on the careful path); chosen once, when the communicator is made.
    devices : dict
        What the GPU transports keep for this communicator (node-local communicator, IPC
        windows): anything with a ``Free()`` or ``close()`` is released with the state.
    recorder : mpicoll.engine.recorder.Recorder or None
        The flight recorder of the communicator's last calls (None: ``MPICOLL_TRACE_CALLS=0``).
    object_slots : mpicoll.calls.objects.buffered.Scratch or None
        The slot buffers of the lowercase object collectives, made at the first one (None until then).
    """

    __slots__ = ("private", "rank", "size", "timeout", "debug", "agreed", "nodes", "tags", "plans",
                 "request_plans", "reproducible", "reproducible_plans", "entries", "request_entries", "slow_path",
                 "devices",
                 "out_of_step", "messages_left", "recorder", "object_slots", "__weakref__")

    def __init__(self, private: MPI.Intracomm, agreed: Any, nodes: Nodes, *, timeout: float | None,
                 debug: int, tag_ub: int) -> None:
        self.private = private
        self.rank, self.size = private.Get_rank(), private.Get_size()
        self.timeout, self.debug = timeout, debug
        self.agreed, self.nodes = agreed, nodes
        sigs = mismatch.signature_bits(tag_ub)
        per_kind = (tag_ub // 3) // sigs * sigs
        self.tags = [per_kind, 0, sigs]
        self.plans = PlanCache()
        self.request_plans = PlanCache(scratch=REQUEST_PLAN_SCRATCH)
        #: the reproducible sums' plans and request stages (see mpicoll.comm.reproducible_allreduce), and their
        #: dict, which the compiled reproducible Allreduce reads
        self.reproducible = Bounded(REPRODUCIBLE_PLANS)
        self.reproducible_plans: dict = self.reproducible.data
        self.entries: dict | None = self.plans.data if timeout is None and not debug else None
        self.request_entries: dict = self.request_plans.data
        self.slow_path: Callable[..., None] | None = None
        self.devices: dict[str, Any] = {}
        self.out_of_step: str | None = None   # why the ranks no longer agree on which call is which (a timeout)
        self.messages_left = False   # a call was abandoned here: peers' messages may wait unreceived (see release)
        self.recorder = recorder.make(private)
        mismatch.watch(private, self.recorder, self.tags, tag_ub)
        self.object_slots: Any = None   # see mpicoll.calls.objects.buffered

    def went_out_of_step(self, exc: BaseException) -> None:
        """A call timed out (``exc``): the ranks no longer agree on which call is which; every later call
        raises :class:`~mpicoll.errors.OutOfStepError` at once (see :meth:`check_in_step`)."""
        if self.out_of_step is None:
            self.out_of_step = str(exc)

    def check_in_step(self) -> None:
        """Raise :class:`~mpicoll.errors.OutOfStepError` if an earlier call timed out."""
        if self.out_of_step is not None:
            raise OutOfStepError(f"rank {self.rank}: this communicator is out of step since an earlier call timed "
                                 f"out ({self.out_of_step}); make a new one on every rank (comm = comm.Dup(), "
                                 "or comm.Shrink() under --with-ft ulfm) and go on with it")

    @property
    def careful(self) -> bool:
        """Whether calls take the careful path (a timeout, or ``MPICOLL_DEBUG``)."""
        return self.entries is None

    def next_tag(self, kind: int) -> int:
        """The next call's tag, of form ``kind`` (one of :mod:`mpicoll.engine.forms`).

        Every call, of any form, takes the next number of one sequence (the same on every rank of a correct
        program: the flight recorder's and the mismatch check's numbering); its tag is ``kind * per_kind +
        number * sigs``, so that forms never share a tag, and the call's plan adds its signature (``0 ..
        sigs - 1``: see :mod:`mpicoll.engine.mismatch`).  The numbers cycle through ``1 .. per_kind / sigs
        - 1``.
        """
        return forms.draw(self.tags, kind)

    def release(self) -> None:
        """Free everything held for the communicator: plans, devices' resources, the private duplicate."""
        self.plans.clear()
        self.request_plans.clear()
        self.reproducible.clear()
        self.plans.shared = None
        for held in self.devices.values():
            closing = getattr(held, "close", None) or getattr(held, "Free", None)
            if closing is not None:
                try:
                    closing()
                except MPI.Exception:
                    pass
        self.devices.clear()
        private, self.private = self.private, MPI.COMM_NULL
        if private == MPI.COMM_NULL or MPI.Is_finalized():
            return
        if mismatch.mismatched(private):
            self.messages_left = True     # peers' messages to the mismatched calls may wait unreceived
        keep = self.messages_left or self.out_of_step is not None or _in_use(private)
        if keep:
            _keep(private)
        mismatch.unwatch(private, free=not keep)   # (its peers may still ask what its last calls were)

    def __del__(self) -> None:
        # the last wrapper of an unfreed communicator is gone: free what was kept for it
        try:
            if getattr(self, "private", MPI.COMM_NULL) != MPI.COMM_NULL:
                self.release()
        except Exception:   # at interpreter exit MPI (even the module's name) may be gone: nothing is left to free
            pass


class Preparation:
    """What preparing one call may read: its communicator's state, and where its plan's scratch comes from.

    The collectives' ``prepare(comm, ...)`` functions get one as ``comm``.  It
    sends nothing: ``private`` is there for the plan to run on later.
    ``arena(nbytes)`` (blocking calls) gives scratch memory shared by the
    communicator's cached blocking plans; None: the plan allocates its own.
    ``signature`` is filled by :func:`mpicoll.calls.debug_check`: what every rank
    must agree on (the mismatch check's, and the careful path's with ``MPICOLL_DEBUG``).
    """

    __slots__ = ("state", "rank", "size", "nodes", "agreed", "private", "devices", "debug", "arena", "signature")

    def __init__(self, state: CommState, arena: Callable[[int], Any] | None = None) -> None:
        self.state = state
        self.rank, self.size, self.nodes, self.agreed = state.rank, state.size, state.nodes, state.agreed
        self.private, self.devices, self.debug = state.private, state.devices, state.debug
        self.arena = arena
        self.signature: dict | None = None


#: private communicators on which a call was abandoned, kept instead of freed (the newest MAX_KEPT): a peer's
#: message to an abandoned call may still wait there unreceived, and MPI gives a freed communicator's context
#: to the next one made (MPICH does so at once), where that stale message would match a later call's receive
KEPT: list[MPI.Intracomm] = []
MAX_KEPT = 64


def _in_use(private: MPI.Intracomm) -> bool:
    """Whether an unfinished request posts its messages on ``private``: its state may go (the program dropped
    its last wrapper, or ended and Python collects its objects before the exit's grace), not the communicator
    the request's next rounds are posted on."""
    return any(comm == private for request in inflight.requests_outstanding() for comm in request._comms)


def _keep(private: MPI.Intracomm) -> None:
    KEPT.append(private)
    while len(KEPT) > MAX_KEPT:
        KEPT.pop(0).Free()
