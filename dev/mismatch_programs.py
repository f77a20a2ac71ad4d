"""Issue 48's programs whose ranks make different collective calls, as a user would write them.

Run one:   python -m mpicoll.launch -n 3 dev/mismatch_programs.py CASE {mpicoll,builtin}
Run all:   python dev/mismatch_programs.py        (each case on both, 3 processes, 8 s each; a table)

Each rank prints one ``RESULT`` line: what its call did (returned, with its data, or raised, with the error).
A rank that prints nothing within the limit hung. Two cases are correct programs that must pass: a rank that is
late, and two datatypes with the same type signature (MPI allows it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
from mpi4py import MPI

CASES = {
    "other_collective": "rank 1 calls Bcast where the others call Allreduce",
    "skipped_call": "rank 1 skips an Allreduce and goes on to the Barrier after it",
    "count": "rank 1 passes 8 elements where the others pass 4",
    "root": "the ranks disagree on Bcast's root (rank 1 says 1, the others 0)",
    "op": "Allreduce with MAX on rank 0, SUM elsewhere",
    "type_signature": "rank 1 sends 8 float32 where the others send 4 float64 (the same bytes)",
    "nonblocking_vs_blocking": "rank 1 calls Iallreduce + Wait where the others call Allreduce",
    "intercommunicator": "on an intercommunicator of ranks 0, 2 | 1, the even group calls Allreduce, the odd Allgather",
    "object_algorithm": "rank 1 calls bcast(algorithm='binomial') where the others call allgather(algorithm='ring')",
    "reproducible": "rank 1 calls Allreduce(reproducible=True) where the others make the plain call",
    "late": "rank 2 comes 2 s late (correct: must pass)",
    "same_signature": "rank 1 describes its 4 doubles as one contiguous type of 4 (correct: must pass)",
}


def program(case: str, comm: MPI.Comm) -> str:
    r, p = comm.Get_rank(), comm.Get_size()
    x, y = np.full(4, r + 1.0), np.zeros(4)
    if case == "other_collective":
        if r == 1:
            comm.Bcast(x, root=0)
            return f"Bcast returned {x.tolist()}"
        comm.Allreduce(x, y)
        return f"Allreduce returned {y.tolist()}"
    if case == "skipped_call":
        if r != 1:
            comm.Allreduce(x, y)
        comm.Barrier()
        return f"returned, y = {y.tolist()}"
    if case == "count":
        n = 8 if r == 1 else 4
        x, y = np.full(n, r + 1.0), np.zeros(n)
        comm.Allreduce(x, y)
        return f"Allreduce returned {y.tolist()}"
    if case == "root":
        comm.Bcast(x, root=1 if r == 1 else 0)
        return f"Bcast returned {x.tolist()}"
    if case == "op":
        comm.Allreduce(x, y, op=MPI.MAX if r == 0 else MPI.SUM)
        return f"Allreduce returned {y.tolist()}"
    if case == "type_signature":
        if r == 1:
            x32, y32 = np.full(8, np.float32(r + 1)), np.zeros(8, np.float32)
            comm.Allreduce(x32, y32)
            return f"Allreduce returned {y32.tolist()}"
        comm.Allreduce(x, y)
        return f"Allreduce returned {y.tolist()}"
    if case == "nonblocking_vs_blocking":
        if r == 1:
            comm.Iallreduce(x, y).Wait()
        else:
            comm.Allreduce(x, y)
        return f"returned {y.tolist()}"
    if case == "intercommunicator":
        half = comm.Split(r % 2, r)
        inter = half.Create_intercomm(0, comm, 1 - r % 2)
        y = np.zeros(4 * p)
        if r % 2 == 0:
            inter.Allreduce(x, y[:4])
        else:
            inter.Allgather(x, y[:4 * ((p + 1) // 2)])
        return f"returned {y[:8].tolist()}"
    if case == "object_algorithm":
        if r == 1:
            kw = {"algorithm": "binomial"} if hasattr(comm, "_state") else {}
            return f"bcast returned {comm.bcast(r, root=1, **kw)!r}"
        kw = {"algorithm": "ring"} if hasattr(comm, "_state") else {}
        return f"allgather returned {comm.allgather(r, **kw)!r}"
    if case == "reproducible":
        kw = {"reproducible": r == 1} if hasattr(comm, "_state") else {}
        comm.Allreduce(x, y, **kw)
        return f"Allreduce returned {y.tolist()}"
    if case == "late":
        if r == 2:
            time.sleep(2)
        comm.Allreduce(x, y)
        return f"Allreduce returned {y.tolist()} (expected {[p * (p + 1) / 2] * 4})"
    if case == "same_signature":
        if r == 1:
            four = MPI.DOUBLE.Create_contiguous(4).Commit()
            comm.Allreduce([x, 1, four], [y, 1, four])
            four.Free()
        else:
            comm.Allreduce(x, y)
        return f"Allreduce returned {y.tolist()} (expected {[p * (p + 1) / 2] * 4})"
    raise ValueError(case)


def run_one(case: str, which: str) -> None:
    world = MPI.COMM_WORLD
    if which == "mpicoll":
        import mpicoll
        comm = mpicoll.Comm(world)
    else:
        comm = world.Dup()
        comm.Set_errhandler(MPI.ERRORS_RETURN)
    try:
        said = program(case, comm)
    except Exception as exc:   # (what the rank would see)
        said = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    print(f"RESULT rank {world.Get_rank()}: {said}", flush=True)
    time.sleep(1)        # let the peers print before the job ends
    os._exit(0)


def run_all(limit: float = 8.0) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for case, what in CASES.items():
        print(f"\n## {case}: {what}")
        for which in ("builtin", "mpicoll"):
            job = subprocess.Popen([sys.executable, "-m", "mpicoll.launch", "-n", "3", __file__, case, which],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                   cwd=os.path.dirname(here), start_new_session=True)
            try:
                out, _ = job.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)      # the hung ranks too, not only the launcher
                out, _ = job.communicate()
            lines = sorted(line for line in out.splitlines() if line.startswith("RESULT"))
            ranks = {int(line.split()[2].rstrip(":")) for line in lines}
            hung = [r for r in range(3) if r not in ranks]
            print(f"- {which}:")
            for line in lines:
                print(f"    {line[7:]}")
            if hung:
                print(f"    ranks {hung} hung (no answer within {limit:g} s)")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        run_one(sys.argv[1], sys.argv[2])
    else:
        run_all()
