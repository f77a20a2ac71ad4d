"""A rank dies under the "mpicoll" torch backend (MPI's fault-tolerance extension): every survivor's pending and
next collective raise torch's ``DistBackendError`` (not a hang).

Run under ``mpirun --with-ft ulfm`` on 4 processes (``tests/fault/test_deaths.py`` does)::

    python -m mpicoll.launch -n 4 --with-ft ulfm tests/fault/torch_deaths.py CASE

``CASE`` is ``blocking`` (``dist.all_reduce``) or ``async`` (``async_op=True``, waited on).  Rank 2 kills itself
20 ms into a loop of all-reduces of 8 MiB; each survivor prints ``RAISED rank=R <type> <seconds>``.  (Going on
in a torch group of the survivors is not supported yet: ``docs/faults.md``.)
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import mpicoll.torch  # noqa: F401 - registers "mpicoll"

VICTIM = 2


def main() -> None:
    case = sys.argv[1]
    dist.init_process_group("mpicoll")
    rank = dist.get_rank()
    t = torch.ones(1 << 20, dtype=torch.float64)

    def call() -> None:
        if case == "async":
            dist.all_reduce(t, async_op=True).wait()
        else:
            dist.all_reduce(t)

    call()
    dist.barrier()
    died = time.time() + 0.02
    if rank == VICTIM:
        threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGKILL)).start()
    try:
        while True:
            call()
    except Exception as exc:   # noqa: BLE001 - what torch raises is the point
        print(f"RAISED rank={rank} {type(exc).__name__} {max(0.0, time.time() - died):.3f}", flush=True)
    os._exit(0)     # a finalize would wait for the dead process


if __name__ == "__main__":
    main()
