"""The lowercase object collectives of an intercommunicator: mpi4py's results, on mpicoll's stages.

Each is the group-to-group shape of :mod:`mpicoll.comm.inter` with whole objects:
an object collective of one group (``mpicoll.Comm``'s own, on that group's
private communicator) and pickles sent between the leaders (rank 0 of each
group) on the merged private communicator, with ``MPI.pickle`` (so a user's
``dumps``/``loads`` settings hold).  Every rank gets objects unpickled afresh; the
root's group gets ``None`` (as from mpi4py).

Every call starts with the all-reduce over both groups of which ranks' checks failed
(:meth:`mpicoll.comm.inter_build.Stages.agreement`, as nonblocking calls do; a root that
is not ``MPI.ROOT``, ``MPI.PROC_NULL`` or a remote rank, an object that does not
pickle, a sequence of the wrong length: every rank raises, none waits).  A
reduction op that raises fails in its group as on an intracommunicator
(:class:`~mpicoll.errors.PeerFailure` where the result depends on it), and its
group's leader tells the other side, which raises ``PeerFailure`` too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from mpicoll import errors
from mpicoll.calls.objects.engine import post_objects, receive_object, send_object, swap_objects
from mpicoll.comm import inter
from mpicoll.comm.inter import InterState, state_of
from mpicoll.comm.inter_build import Stages
from mpicoll.comm.inter_stages import IDLE, ROOT, role_of
from mpicoll.engine.forms import BLOCKING, NONBLOCKING
from mpicoll.program.plan import composed

__all__ = ["barrier", "bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce"]

_dumps, _loads = MPI.pickle.dumps, MPI.pickle.loads


class _Call:
    """One object call on one rank: its checks (made before the agreement) and its messages between leaders.

    A context around the whole call: the flight recorder notes it as one blocking call (its number drawn
    first, so that a rank that waits in the agreement is on record too: :func:`mpicoll.comm.inter.noted`).
    """

    def __init__(self, comm: Any, method: str) -> None:
        self.state: InterState = state_of(comm)
        self.method = method
        self.error: BaseException | None = None
        self.tag = self.state.merged._state.next_tag(BLOCKING)
        self.noted = inter.noted(self.state, method, self.tag)

    def __enter__(self) -> _Call:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: Any) -> None:
        self.noted.__exit__(kind, exc, traceback)

    def check(self, work: Callable[[], Any]) -> Any:
        """``work()`` (a check, a pickling): its result, or None with its error kept for the agreement."""
        if self.error is None:
            try:
                return work()
            except Exception as exc:
                self.error = exc
        return None

    def agree(self) -> None:
        """The agreement over both groups (every rank raises if any rank's checks failed)."""
        merged = self.state.merged._state
        inter.execute(self.state, self.method, composed(Stages(self.state).agreement(self.method, self.error)),
                      merged.next_tag(NONBLOCKING))

    def send_across(self, obj: Any, remote: int) -> None:
        """``obj`` to rank ``remote`` of the other group."""
        send_object(self.state.merged._state.private, obj, self.state.remote[remote], self.tag)

    def receive_across(self, remote: int) -> Any:
        """The object rank ``remote`` of the other group sends."""
        return receive_object(self.state.merged._state.private, self.state.remote[remote], self.tag)

    def swap(self, obj: Any) -> Any:
        """The leaders swap ``obj`` (one ``sendrecv`` each)."""
        return swap_objects(self.state.merged._state.private, obj, self.state.remote[0], self.tag)


def _items(sendobj: Any, count: int) -> list:
    """A sequence of ``count`` objects, each pickled (None: ``count`` Nones)."""
    items = [None] * count if sendobj is None else list(sendobj)
    if len(items) != count:
        raise errors.CountError(f"sendobj: expecting {count} items (one per rank of the remote group), "
                                f"got {len(items)}")
    return [_dumps(item) for item in items]


def _from_root(call: _Call, role: Any, payload: Any, spread: Callable[[Any, int], Any]) -> Any:
    """The root sends ``payload`` to the other group's leader, which ``spread``s it in its group (the group's
    ``bcast`` or ``scatter``): this rank's share, unpickled; None in the root's group."""
    if role is ROOT:
        call.send_across(payload, 0)
    if role is ROOT or role is IDLE:
        return None
    return _loads(spread(call.receive_across(role) if call.state.rank == 0 else None, 0))


def barrier(comm: Any) -> None:
    """``comm.barrier()``: the agreement alone."""
    with _Call(comm, "barrier") as call:
        call.agree()


def bcast(comm: Any, obj: Any, root: Any) -> Any:
    """The root's object on every rank of the other group; None in the root's group."""
    with _Call(comm, "bcast") as call:
        role = call.check(lambda: role_of(root, call.state.remote_size, "bcast"))
        data = call.check(lambda: _dumps(obj)) if role is ROOT else None
        call.agree()
        return _from_root(call, role, data, call.state.local.bcast)


def gather(comm: Any, sendobj: Any, root: Any) -> list | None:
    """At the root, every object of the other group in rank order; None elsewhere."""
    with _Call(comm, "gather") as call:
        role = call.check(lambda: role_of(root, call.state.remote_size, "gather"))
        data = call.check(lambda: _dumps(sendobj)) if role not in (ROOT, IDLE) else None
        call.agree()
        if role is ROOT:
            return [_loads(item) for item in call.receive_across(0)]
        if role is not IDLE:
            gathered = call.state.local.gather(data, 0)
            if call.state.rank == 0:
                call.send_across(gathered, role)
        return None


def scatter(comm: Any, sendobj: Any, root: Any) -> Any:
    """Object i of the root's sequence (one per rank of the other group) on that group's rank i."""
    with _Call(comm, "scatter") as call:
        role = call.check(lambda: role_of(root, call.state.remote_size, "scatter"))
        items = call.check(lambda: _items(sendobj, call.state.remote_size)) if role is ROOT else None
        call.agree()
        return _from_root(call, role, items, call.state.local.scatter)


def allgather(comm: Any, sendobj: Any) -> list:
    """Every object of the other group, in its rank order."""
    with _Call(comm, "allgather") as call:
        data = call.check(lambda: _dumps(sendobj))
        call.agree()
        gathered = call.state.local.gather(data, 0)
        theirs = call.swap(gathered) if call.state.rank == 0 else None
        return [_loads(item) for item in call.state.local.bcast(theirs, 0)]


def alltoall(comm: Any, sendobj: Any) -> list:
    """Object j of this rank's sequence to rank j of the other group; object j of the result from it."""
    with _Call(comm, "alltoall") as call:
        items = call.check(lambda: _items(sendobj, call.state.remote_size))
        call.agree()
        private, remote, tag = call.state.merged._state.private, call.state.remote, call.tag
        sent = post_objects(private, tag, [(item, remote[j]) for j, item in enumerate(items)])
        out = [_loads(receive_object(private, remote[j], tag)) for j in range(call.state.remote_size)]
        MPI.Request.waitall(sent)
        return out


def _check_op(op: Any, method: str) -> None:
    if not callable(op):
        raise errors.OpError(f"op: {method} needs an MPI.Op or a callable op(a, b), got {op!r}")


def _reduced(call: _Call, sendobj: Any, op: Any) -> tuple[int | None, Any, BaseException | None]:
    """``op`` over this group's objects, at its leader: ``(failed rank or None, pickled result, error)``."""
    try:
        value = call.state.local.reduce(sendobj, op, 0)
        return None, (_dumps(value) if call.state.rank == 0 else None), None
    except Exception as exc:   # the op raised here or on a peer: the other side must hear of it
        return getattr(exc, "rank", call.state.rank), None, exc


def reduce(comm: Any, sendobj: Any, op: Any, root: Any) -> Any:
    """At the root, ``op`` over the other group's objects in its rank order; None elsewhere."""
    with _Call(comm, "reduce") as call:
        role = call.check(lambda: role_of(root, call.state.remote_size, "reduce"))
        call.check(lambda: _check_op(op, "reduce"))
        call.agree()
        if role is ROOT:
            failed, data = call.receive_across(0)
            if failed is not None:
                raise errors.PeerFailure("reduce", failed)
            return _loads(data)
        if role is not IDLE:
            failed, data, error = _reduced(call, sendobj, op)
            if call.state.rank == 0:
                call.send_across((failed, data), role)
            if error is not None:
                raise error
        return None


def allreduce(comm: Any, sendobj: Any, op: Any) -> Any:
    """``op`` over the other group's objects in its rank order, on every rank."""
    with _Call(comm, "allreduce") as call:
        call.check(lambda: _check_op(op, "allreduce"))
        call.agree()
        failed, data, error = _reduced(call, sendobj, op)
        theirs = call.swap((failed, data)) if call.state.rank == 0 else None
        theirs_failed, theirs_data = call.state.local.bcast(theirs, 0)
        if error is not None:
            raise error
        if theirs_failed is not None:
            raise errors.PeerFailure("allreduce", theirs_failed)
        return _loads(theirs_data)
