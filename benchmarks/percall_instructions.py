"""Instructions per call of mpicoll's blocking path against the built-in, counted by callgrind.

Wall-clock timings of microsecond calls move with the machine's load; instruction
counts do not.  Run each statement N times under ``valgrind --tool=callgrind`` and
once with N = 0, and divide the difference by N (one process, p = 1, so the
figures are the Python and MPI library work of a call, not waiting for a peer)::

    bash benchmarks/percall_instructions.sh          # every statement below
    bash benchmarks/percall_instructions.sh call_key_bcast mpicoll_bcast

This file is the program each run executes: ``python percall_instructions.py NAME N``.
"""

from __future__ import annotations

import mmap
import sys

import numpy as np
from mpi4py import MPI

import mpicoll
from mpicoll.runtime.blocking import execute
from mpicoll.runtime.callkey import _call_key, call_key

world = MPI.COMM_WORLD
comm = mpicoll.Comm(world)
region = mmap.mmap(-1, 1 << 20)
x, y = np.ones(1), np.empty(1)
comm.Bcast([region, 1, MPI.BYTE], 0)
comm.Allreduce(x, y)
bcast_key = call_key("Bcast", ([region, 1, MPI.BYTE], 0), "auto")
state = comm._state
bcast_rounds = state.plans.get(bcast_key).rounds()

STATEMENTS = {
    "builtin_bcast": lambda: world.Bcast([region, 1, MPI.BYTE], 0),
    "mpicoll_bcast": lambda: comm.Bcast([region, 1, MPI.BYTE], 0),
    "builtin_allreduce": lambda: world.Allreduce(x, y),
    "mpicoll_allreduce": lambda: comm.Allreduce(x, y),
    "call_key_bcast": lambda: call_key("Bcast", ([region, 1, MPI.BYTE], 0), "auto"),
    "call_key_allreduce": lambda: call_key("Allreduce", (x, y, MPI.SUM), "auto"),
    "python_call_key_bcast": lambda: _call_key("Bcast", ([region, 1, MPI.BYTE], 0), "auto"),
    "python_call_key_allreduce": lambda: _call_key("Allreduce", (x, y, MPI.SUM), "auto"),
    "cache_lookup": lambda: state.plans.get(bcast_key),
    "execute_bcast_plan": lambda: execute(bcast_rounds, state.private, 5),
    "numpy_add_in_place": lambda: np.add(x, y, out=y),
    "loop_only": lambda: None,
}

if __name__ == "__main__":
    statement, repeat = STATEMENTS[sys.argv[1]], int(sys.argv[2])
    for _ in range(10):
        statement()
    for _ in range(repeat):
        statement()
