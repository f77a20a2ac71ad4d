"""A process dies during a collective (MPI's fault-tolerance extension, ULFM): every survivor raises and goes on.

Run under ``mpirun --with-ft ulfm`` on 4 processes (``tests/fault/test_deaths.py`` does)::

    python -m mpicoll.launch -n 4 --with-ft ulfm tests/fault/deaths.py CASE WHEN IMPL

``CASE`` names a call (``allreduce-ring``, ``bcast-binomial``, ``iallreduce``, ``allreduce_init``, ``allreduce-obj``,
``iallreduce-mpi-waitall``: an ``Iallreduce`` completed by mpi4py's own ``MPI.Request.Waitall``, ...), ``WHEN`` is
``before`` (rank 2 dies before the call) or ``during`` (20 ms into it), ``IMPL`` is ``mpicoll`` or ``builtin`` (a
``Dup`` of ``COMM_WORLD`` with MPI's own collectives).  Every survivor prints ``RAISED rank=R <error class>
<exception type> <seconds from the death to its error>``, then shrinks the communicator, runs an
``Allreduce`` on it and prints ``NEXT rank=R ok`` when its sum is the survivors' (or ``NEXT rank=R wrong``), and
returns: the job ends when the survivors do (``mpicoll.launch --with-ft ulfm`` has Open MPI leave out the barrier
of ``MPI_Finalize`` that could wait for ever for the dead process: see ``docs/faults.md``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np
from mpi4py import MPI

import mpicoll

VICTIM = 2
COUNT = 1 << 21        # doubles per rank in the large calls (16 MiB)


def _calls(comm: MPI.Comm, impl: str) -> dict:
    x, y = np.ones(COUNT), np.empty(COUNT)
    size = comm.Get_size()
    many = np.ones(COUNT // size * size)
    a = {} if impl == "builtin" else None

    def algo(name: str) -> dict:
        return {} if a is not None else {"algorithm": name}

    def persistent() -> None:
        req = comm.Allreduce_init(x, y)
        req.Start()
        req.Wait()

    return {
        **{f"allreduce-{name}": (lambda name=name: comm.Allreduce(x, y, **algo(name)))
           for name in ("ring", "recursive_doubling", "rabenseifner", "double_binary_tree", "auto")},
        "bcast-binomial": lambda: comm.Bcast(x, 0, **algo("binomial")),
        "bcast-pipelined_chain": lambda: comm.Bcast(x, 0, **algo("pipelined_chain")),
        "reduce": lambda: comm.Reduce(x, y, MPI.SUM, 0),
        "allgather": lambda: comm.Allgather(x[: COUNT // size], many),
        "alltoall": lambda: comm.Alltoall(many, np.empty_like(many)),
        "reduce_scatter_block": lambda: comm.Reduce_scatter_block(many, np.empty(COUNT // size)),
        "barrier": lambda: [comm.Barrier() for _ in range(200)],
        "iallreduce": lambda: comm.Iallreduce(x, y).Wait(),
        "iallreduce-mpi-waitall": lambda: MPI.Request.Waitall([comm.Iallreduce(x, y)]),
        "allreduce_init": persistent,
        "allreduce-obj": lambda: [comm.allreduce(np.ones(1000)) for _ in range(50)],
        "inter-allreduce": lambda: _intercomm(comm).Allreduce(x, y),
        "inter-bcast": lambda: _intercomm(comm).Bcast(x, MPI.ROOT if comm.Get_rank() == 0 else
                                                      MPI.PROC_NULL if comm.Get_rank() % 2 == 0 else 0),
    }


_INTER: dict = {}


def _intercomm(comm: MPI.Comm) -> MPI.Intercomm:
    """The even and the odd ranks of ``comm`` joined (made once: by mpicoll where ``comm`` is mpicoll's)."""
    if "made" not in _INTER:
        color = comm.Get_rank() % 2
        half = comm.Split(color, comm.Get_rank())
        _INTER["made"] = half.Create_intercomm(0, comm, 1 - color, tag=11)
    return _INTER["made"]


def main() -> None:
    case, when, impl = sys.argv[1:4]
    world = MPI.COMM_WORLD
    base = world.Dup()
    base.Set_errhandler(MPI.ERRORS_RETURN)
    comm = mpicoll.Comm(base) if impl == "mpicoll" else base
    rank = world.Get_rank()
    call = _calls(comm, impl)[case]
    call()          # once for real: plans made, caches warm, every rank alive
    world.Barrier()
    died = time.time() + (0.02 if when == "during" else 0.0)
    if rank == VICTIM:
        if when == "during":
            threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGKILL)).start()
            try:
                while True:
                    call()
            finally:
                os.kill(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    if when == "before":
        time.sleep(0.2)     # the victim is gone
        died = time.time() - 0.2
    try:
        while True:
            call()
    except MPI.Exception as exc:
        name = {MPI.ERR_PROC_FAILED: "ERR_PROC_FAILED", MPI.ERR_REVOKED: "ERR_REVOKED",
                MPI.ERR_IN_STATUS: "ERR_IN_STATUS"}.get(
            exc.Get_error_class(), f"class {exc.Get_error_class()}")
        kind = "ProcFailedError" if isinstance(exc, mpicoll.ProcFailedError) else type(exc).__name__
        print(f"RAISED rank={rank} {name} {kind} {max(0.0, time.time() - died):.3f}", flush=True)
    print(f"SHRINKING rank={rank}", flush=True)
    shrunk = comm.Shrink()
    print(f"SHRUNK rank={rank}", flush=True)
    out = np.empty(1)
    shrunk.Allreduce(np.ones(1), out)
    print(f"NEXT rank={rank} {'ok' if out[0] == shrunk.Get_size() == world.Get_size() - 1 else 'wrong'}",
          flush=True)
    # and the program ends as any does (MPI_Finalize at exit): the job must end with the survivors


if __name__ == "__main__":
    main()
