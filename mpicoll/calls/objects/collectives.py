"""The lowercase collectives of ``mpicoll.Comm``: mpi4py's signatures and results, mpicoll's schedules.

Each call checks what every rank can see (the root, the op).  With
``algorithm="auto"`` it then hands the call to
:mod:`~mpicoll.calls.objects.buffered` (pickles through the communicator's own
buffer collectives; a reduction folds the gathered objects up to
``FOLD_MAX`` ranks).  Otherwise it chooses the algorithm
(:mod:`~mpicoll.calls.objects.choice`), fills its blocks with pickled objects,
runs the schedule on the private duplicate with a fresh tag
(:mod:`~mpicoll.calls.objects.engine`) and unpickles its result.  Results are
mpi4py's: every object a rank gets is unpickled afresh (the root of ``bcast``
or ``gather`` gets a copy of its own object too), non-roots get ``None``, and
rank 0 of ``exscan`` gets ``None``.

A failure one rank meets (an object that does not pickle, a root's sequence of
the wrong length, an op that raises) does not leave the others waiting: that
rank plays its part with a failed block, which travels like data, then raises
the error; a rank whose result depends on that block raises
:class:`~mpicoll.errors.PeerFailure`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls._checks import check_root
from mpicoll.calls._neighbors import degrees, topology_of
from mpicoll.calls.objects import buffered, engine
from mpicoll.calls.objects.choice import choose
from mpicoll.calls.objects.slots import Failed, pickled
from mpicoll.engine.forms import BLOCKING, number
from mpicoll.engine.mismatch import CallNote, sig_of
from mpicoll.engine.recorder import Noted
from mpicoll.families import registry
from mpicoll.program.state import CommState

__all__ = ["bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "scan", "exscan",
           "barrier", "neighbor_allgather", "neighbor_alltoall", "ordered"]


def ordered(op: Any) -> bool:
    """Whether ``op`` must be applied in rank order: any callable but a commutative ``MPI.Op``."""
    return not (isinstance(op, MPI.Op) and op != MPI.OP_NULL and op.Is_commutative())


class _Call:
    """One object collective on one rank: its schedule, its blocks, and what failed here."""

    def __init__(self, state: CommState, collective: str, algorithm: str, op: Any = None, **params: Any) -> None:
        self.state, self.collective = state, collective
        rank, size = state.rank, state.size
        is_ordered = op is not None and ordered(op)
        if "nodes" not in params:
            params["nodes"] = state.nodes
        self.name = choose(collective, algorithm, size, is_ordered, **params)
        self.root = params.get("root")
        alg = registry.get(collective, self.name)
        self.schedule = registry.schedule(collective, self.name, rank, size,
                                          **{k: v for k, v in params.items() if k in alg.params})
        self.bufs = engine.buffers(self.schedule)
        self.steps = engine.Steps(self.bufs, op, rank)
        self.error: BaseException | None = None

    def put(self, buf: str, block: int, obj: Any) -> None:
        """Block ``block`` of ``buf`` holds ``obj``, pickled (or fails here if it cannot be)."""
        slot, exc = pickled(obj, self.state.rank)
        self.fail(exc)
        self.bufs[buf][block] = slot

    def put_sequence(self, sendobj: Any, count: int) -> None:
        """Block k of ``send`` holds object k of ``sendobj``, a sequence of ``count`` objects; a wrong sequence
        fails here and every block says so (the ranks that read them raise ``PeerFailure``)."""
        items, exc = buffered.items(sendobj, count, "sendobj")
        self.fail(exc)
        for k, item in enumerate(items):
            if exc is None:
                self.put("send", k, item)
            else:
                self.bufs["send"][k] = Failed(self.state.rank)

    def fail(self, exc: BaseException | None) -> None:
        if exc is not None and self.error is None:
            self.error = exc

    def run(self) -> None:
        state = self.state
        if state.private == MPI.COMM_NULL:
            raise ValueError("the communicator was freed")
        tag = state.next_tag(BLOCKING)
        what = self.what()
        with Noted(state.recorder, number(state.tags, tag), what):
            engine.run(self.schedule, self.bufs, self.steps, state.private, tag + what.sig, state.timeout)
        self.fail(self.steps.error)

    def what(self) -> CallNote:
        """What the flight recorder notes of this call and the mismatch check compares
        (:mod:`mpicoll.engine.mismatch`): its collective, algorithm and root (a Python op cannot be compared
        across ranks; the objects' sizes legitimately differ), its hash carried in the messages' tag, and the
        ranks the schedule exchanges messages with."""
        signature = f"{self.collective}(algorithm={self.name}" + (f", root={self.root})" if self.root is not None
                                                                   else ")")
        peers = {m.peer for rnd in self.schedule.rounds for m in (*rnd.sends, *rnd.recvs)}
        return CallNote(self.collective, self.name, -1, signature, sig_of(signature, self.state.tags[2]),
                        tuple(sorted(peers)))

    def result(self, block: int, buf: str = "recv") -> Any:
        """The object block ``block`` holds, after raising this rank's own failure or a peer's."""
        self.check()
        slot = self.bufs[buf][block]
        if isinstance(slot, Failed):
            raise errors.PeerFailure(self.collective, slot.rank)
        return None if slot is None else slot.load()

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def _null() -> CommState:
    """Raise: the communicator is ``MPI.COMM_NULL`` (its state is None; ``comm._state or _null()``)."""
    raise ValueError("the communicator is MPI.COMM_NULL")


def barrier(comm: Any, *, algorithm: str = "auto") -> None:
    """Block until every rank has called it (``Barrier``: no object moves)."""
    comm.Barrier(algorithm=algorithm)


def bcast(comm: Any, obj: Any, root: int = 0, *, algorithm: str = "auto") -> Any:
    """Broadcast the Python object ``obj`` from ``root``; every rank (the root too) gets an unpickled copy."""
    state = comm._state or _null()
    root = check_root(root, state.size, "bcast")
    if algorithm == "auto":
        return buffered.bcast(comm, state, obj, root)
    call = _Call(state, "bcast", algorithm, root=root)
    if state.rank == root:
        call.put("recv", 0, obj)
    call.run()
    return call.result(0)


def gather(comm: Any, sendobj: Any, root: int = 0, *, algorithm: str = "auto") -> list | None:
    """Gather every rank's object at ``root`` as a list in rank order (None elsewhere)."""
    state = comm._state or _null()
    root = check_root(root, state.size, "gather")
    if algorithm == "auto":
        return buffered.gather(comm, state, sendobj, root)
    call = _Call(state, "gather", algorithm, root=root)
    call.put("send", state.rank, sendobj)
    call.run()
    if state.rank != root:
        call.check()
        return None
    return [call.result(b) for b in range(state.size)]


def scatter(comm: Any, sendobj: Any, root: int = 0, *, algorithm: str = "auto") -> Any:
    """Scatter the root's sequence of size objects (None: all None): rank i gets item i."""
    state = comm._state or _null()
    root = check_root(root, state.size, "scatter")
    if algorithm == "auto":
        return buffered.scatter(comm, state, sendobj, root)
    call = _Call(state, "scatter", algorithm, root=root)
    if state.rank == root:
        call.put_sequence(sendobj, state.size)
    call.run()
    return call.result(state.rank)


def allgather(comm: Any, sendobj: Any, *, algorithm: str = "auto") -> list:
    """Every rank's object, as a list in rank order, on every rank."""
    state = comm._state or _null()
    if algorithm == "auto":
        return buffered.allgather(comm, state, sendobj)
    call = _Call(state, "allgather", algorithm)
    call.put("send", state.rank, sendobj)
    call.run()
    return [call.result(b) for b in range(state.size)]


def alltoall(comm: Any, sendobj: Any, *, algorithm: str = "auto") -> list:
    """Item j of rank i's sequence of size objects becomes item i of rank j's list."""
    state = comm._state or _null()
    if algorithm == "auto":
        return buffered.alltoall(comm, state, sendobj)
    call = _Call(state, "alltoall", algorithm)
    call.put_sequence(sendobj, state.size)
    call.run()
    return [call.result(b) for b in range(state.size)]


def _checked_op(state: CommState, collective: str, op: Any, algorithm: str) -> bool:
    """Whether the reduction folds the gathered objects (:mod:`~mpicoll.calls.objects.buffered`), after checking
    ``op`` (every rank sees it) and ``algorithm``."""
    if not callable(op):
        raise errors.OpError(f"op: {collective} needs an MPI.Op or a callable op(a, b), got {op!r}")
    return algorithm == "auto" and buffered.folds(state.size)


def _reduction(comm: Any, collective: str, sendobj: Any, op: Any, algorithm: str, **params: Any) -> _Call:
    call = _Call(comm._state or _null(), collective, algorithm, op, **params)
    call.put("send", 0, sendobj)
    call.run()
    return call


def reduce(comm: Any, sendobj: Any, op: Callable | MPI.Op = MPI.SUM, root: int = 0,
           *, algorithm: str = "auto") -> Any:
    """``op`` (an ``MPI.Op`` or a callable ``op(a, b)``) over every rank's object in rank order, at ``root``
    (None elsewhere)."""
    state = comm._state or _null()
    root = check_root(root, state.size, "reduce")
    if _checked_op(state, "reduce", op, algorithm):
        return buffered.reduce(comm, state, sendobj, op, root)
    call = _reduction(comm, "reduce", sendobj, op, algorithm, root=root)
    if state.rank != root:
        call.check()
        return None
    return call.result(0)


def allreduce(comm: Any, sendobj: Any, op: Callable | MPI.Op = MPI.SUM, *, algorithm: str = "auto") -> Any:
    """``op`` over every rank's object in rank order, on every rank."""
    state = comm._state or _null()
    if _checked_op(state, "allreduce", op, algorithm):
        return buffered.allreduce(comm, state, sendobj, op)
    return _reduction(comm, "allreduce", sendobj, op, algorithm).result(0)


def scan(comm: Any, sendobj: Any, op: Callable | MPI.Op = MPI.SUM, *, algorithm: str = "auto") -> Any:
    """On rank i, ``op`` over the objects of ranks 0 .. i."""
    state = comm._state or _null()
    if _checked_op(state, "scan", op, algorithm):
        return buffered.scan(comm, state, sendobj, op)
    return _reduction(comm, "scan", sendobj, op, algorithm).result(0)


def exscan(comm: Any, sendobj: Any, op: Callable | MPI.Op = MPI.SUM, *, algorithm: str = "auto") -> Any:
    """On rank i > 0, ``op`` over the objects of ranks 0 .. i - 1; None on rank 0."""
    state = comm._state or _null()
    if _checked_op(state, "exscan", op, algorithm):
        return buffered.exscan(comm, state, sendobj, op)
    call = _reduction(comm, "exscan", sendobj, op, algorithm)
    if state.rank == 0:
        call.check()
        return None
    return call.result(0)


def neighbor_allgather(comm: Any, sendobj: Any, *, algorithm: str = "auto") -> list:
    """The in-neighbours' objects, in the virtual topology's order (None from ``MPI.PROC_NULL``)."""
    state = comm._state or _null()
    topology = topology_of(state.private, "neighbor_allgather")
    call = _Call(state, "neighbor_allgather", algorithm, topology=topology)
    call.put("send", 0, sendobj)
    call.run()
    return [call.result(k) for k in range(degrees(topology, state.rank)[0])]


def neighbor_alltoall(comm: Any, sendobj: Any, *, algorithm: str = "auto") -> list:
    """Item k of ``sendobj`` to out-neighbour k; item k of the result from in-neighbour k."""
    state = comm._state or _null()
    topology = topology_of(state.private, "neighbor_alltoall")
    indegree, outdegree = degrees(topology, state.rank)
    call = _Call(state, "neighbor_alltoall", algorithm, topology=topology)
    call.put_sequence(sendobj, outdegree)
    call.run()
    return [call.result(k) for k in range(indegree)]
