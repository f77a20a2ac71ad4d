"""One rank's check fails: no peer hangs, and no peer whose result depends on that rank returns.

The rank at fault plays its part on scratch memory with every message marked (one byte longer, see
:mod:`mpicoll.engine.standin`); a peer that receives a marked message plays the rest of its part marked and
raises :class:`mpicoll.ArgumentError`.  Regression tests for issue 24: ``Reduce`` (SUM, PROD) and ``Gather``
where a non-root rank passes ``MPI.IN_PLACE`` returned a wrong result on the root with no error anywhere
but the faulty rank; and the same for every buffer kind (bytes-like, ``MPI.memory``, DLPack, CUDA array
interface over host memory).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import blocking
from mpicoll.program import plan

from conftest import WORLD, check

pytestmark = pytest.mark.mpi

P = WORLD.size
R = WORLD.rank
needs_peers = pytest.mark.skipif(P < 2, reason="a stand-in needs peers")


@pytest.fixture(params=["compiled", "python"])
def fresh(request, monkeypatch):
    """A fresh mpicoll communicator whose plans run on the compiled executor or the Python one."""
    if request.param == "python":
        monkeypatch.setattr(plan, "execute", blocking._execute)
    comm = mpicoll.Comm(WORLD).Dup()
    yield comm
    comm.Free()


def _outcome(call) -> str:
    try:
        call()
    except mpicoll.ArgumentError:
        return "peer"
    except Exception as exc:     # the rank at fault: its own error
        return type(exc).__name__
    return "returned"


def _still_works(comm) -> bool:
    """No message was left behind: the next call on the communicator is right."""
    x = np.full(5, R + 1.0)
    y = np.empty(5)
    comm.Allreduce(x, y, op=MPI.SUM)
    return bool(np.all(y == P * (P + 1) / 2))


@needs_peers
@pytest.mark.parametrize("op", [MPI.SUM, MPI.PROD])
def test_reduce_non_root_in_place(fresh, op):
    faulty = P - 1
    x, y = np.full(4, R + 1.0), np.zeros(4)
    if R == faulty:
        got = _outcome(lambda: fresh.Reduce(MPI.IN_PLACE, y, op=op, root=0))
    elif R == 0:
        got = _outcome(lambda: fresh.Reduce(MPI.IN_PLACE, x, op=op, root=0))
    else:
        got = _outcome(lambda: fresh.Reduce(x, y, op=op, root=0))
    expected = {faulty: "BufferValueError", 0: "peer"}
    check(got == expected.get(R, got) and got in ("returned", "peer", "BufferValueError"),
          f"rank {R}: Reduce gave {got!r}")
    check(_still_works(fresh), f"rank {R}: the next call went wrong")


@needs_peers
def test_gather_non_root_in_place(fresh):
    faulty = P - 1
    out = np.zeros(2 * P)
    send = MPI.IN_PLACE if R == faulty else np.full(2, R + 1.0)
    got = _outcome(lambda: fresh.Gather(send, out, root=0))
    # a rank that forwards the faulty rank's block (a tree) raises too, after playing its part
    expected = {faulty: "BufferValueError", 0: "peer"}
    check(got == expected.get(R, got) and got in ("returned", "peer", "BufferValueError"),
          f"rank {R}: Gather gave {got!r}")
    check(_still_works(fresh), f"rank {R}: the next call went wrong")


class _HostCAI:
    """A ``__cuda_array_interface__`` object over host memory (as CUDA-aware test suites use)."""

    def __init__(self, array: np.ndarray, readonly: bool) -> None:
        self.array = array
        self.__cuda_array_interface__ = {"shape": array.shape, "typestr": array.dtype.str, "version": 3,
                                         "data": (array.ctypes.data, readonly), "strides": None}


class _HostDLPack:
    """A DLPack producer over a NumPy array (as a torch CPU tensor is)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _readonly(kind: str, n: int):
    """A receive buffer of ``n`` doubles that one rank's checks refuse, as each kind of buffer spells it:
    read-only, or (DLPack, which exports no read-only memory) one element short."""
    data = np.zeros(n)
    if kind == "dlpack":
        return _HostDLPack(np.zeros(n - 1))
    if kind == "bytes":
        return [bytes(data.tobytes()), MPI.DOUBLE]
    if kind == "memory":
        return [MPI.memory.fromaddress(data.ctypes.data, data.nbytes, readonly=True), MPI.DOUBLE], data
    if kind == "cai":
        return _HostCAI(data, readonly=True)
    data.flags.writeable = False
    return data


@needs_peers
@pytest.mark.parametrize("kind", ["numpy", "bytes", "memory", "cai", "dlpack"])
@pytest.mark.parametrize("method", ["Allreduce", "Allgather", "Bcast"])
def test_one_rank_bad_buffer_every_kind(fresh, kind, method):
    """One rank's receive buffer is refused: it raises, and so does every rank whose result depends on it."""
    if kind == "dlpack" and method == "Bcast":
        pytest.skip("a too-small Bcast buffer gives no size for a stand-in (the rank raises at once)")
    faulty = P - 1
    n = 3
    bad = _readonly(kind, n * (P if method == "Allgather" else 1))
    if isinstance(bad, tuple):
        bad, _keep = bad
    good = np.zeros(n * (P if method == "Allgather" else 1))
    recv = bad if R == faulty else good
    send = np.full(n, R + 1.0)
    if method == "Bcast":
        got = _outcome(lambda: fresh.Bcast(recv, root=0))
        # the root's data do not depend on the faulty rank; a rank it forwards to may raise (marked data)
        expected = {0: "returned"} | ({R: got} if got in ("returned", "peer") and R else {})
    else:
        got = _outcome(lambda: getattr(fresh, method)(send, recv))
        expected = {r: "peer" for r in range(P)}
    if R == faulty:   # its own error (read-only: BufferValueError, too small: TruncateError or CountError)
        check(got not in ("returned", "peer"), f"rank {R}: the rank at fault gave {got!r}")
    else:
        check(got == expected.get(R, "returned"), f"rank {R}: {method} on a refused {kind} buffer gave {got!r}")
    check(_still_works(fresh), f"rank {R}: the next call went wrong")
