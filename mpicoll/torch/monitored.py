"""``monitored_barrier``: a barrier that says which ranks did not reach it in time, as Gloo's does.

torch's functional ``dist.monitored_barrier`` accepts Gloo groups only; on an
``"mpicoll"`` group, call the method of the group (``group.monitored_barrier(timeout,
wait_all_ranks=...)``).  Every rank other than 0 sends rank 0 a message and
waits for rank 0's answer; rank 0 waits for every rank's message until the
timeout, then answers every rank.  A rank that is missing at the timeout makes
rank 0 raise ``DistBackendError`` naming it (the first missing rank, or every
missing rank with ``wait_all_ranks=True``), and the other ranks, left without
an answer, raise too.  With a timeout of 0 (no time to wait for anyone), rank 0
says that it timed out itself, and which ranks had arrived, as Gloo does.
The messages travel on a communicator of their own and carry the barrier's
sequence number, so a rank that arrives after a barrier timed out is never
taken for a later barrier's.
"""

from __future__ import annotations

import time

import numpy as np
import torch.distributed as dist
from mpi4py import MPI

from mpicoll.engine.rounds import post

__all__ = ["MonitoredBarrier"]

_TAG = 1


class MonitoredBarrier:
    """The monitored barriers of one process group, over their own communicator.

    Parameters
    ----------
    comm : MPI.Intracomm
        A communicator of the group's processes for these messages only (this object frees it).
    """

    def __init__(self, comm: MPI.Intracomm) -> None:
        self._comm = comm
        self._sequence = 0
        self._leftover: list[MPI.Request] = []   # sends whose peer never took them (kept alive, never waited)
        self._missing: list[int] = []             # every peer the last wait missed

    def run(self, timeout: float, wait_all_ranks: bool = False) -> None:
        """One monitored barrier with ``timeout`` seconds.

        Raises
        ------
        torch.distributed.DistBackendError
            On rank 0: a rank did not reach the barrier in time; elsewhere: rank 0's answer did not come.
        """
        self._sequence += 1
        rank, size = self._comm.Get_rank(), self._comm.Get_size()
        deadline = time.monotonic() + timeout
        if rank == 0:
            missing = self._gather(range(1, size), deadline, wait_all_ranks)
            if missing and timeout <= 0 and not wait_all_ranks:
                # no time to wait for any rank: rank 0 itself timed out (Gloo's words), naming who had arrived
                arrived = sorted(set(range(1, size)) - set(self._missing))
                raise dist.DistBackendError(
                    f"Rank 0 timed out in monitoredBarrier after {timeout * 1000:g} ms. "
                    + (f"Successfully processed ranks: {', '.join(map(str, arrived))}" if arrived
                       else "No ranks successfully processed in monitoredBarrier."))
            if missing:
                ranks = ", ".join(map(str, missing))
                raise dist.DistBackendError(
                    f"[Rank 0]: Rank{'s' if len(missing) > 1 else ''} {ranks} failed to pass monitoredBarrier in "
                    f"{timeout * 1000:g} ms (timed out)")
            self._leftover += post(self._comm, _TAG, [(np.array([self._sequence], np.int64), peer)
                                                      for peer in range(1, size)], [])
            self._prune()
        elif size > 1:
            self._leftover += post(self._comm, _TAG, [(np.array([self._sequence], np.int64), 0)], [])
            if self._gather([0], deadline, False):
                raise dist.DistBackendError(
                    f"Rank {rank} successfully reached monitoredBarrier, but rank 0 did not answer within "
                    f"{timeout * 1000:g} ms (timed out); rank 0 names the ranks that failed to reach it")
            self._prune()

    def _gather(self, peers, deadline: float, wait_all: bool) -> list[int]:
        """Wait for this barrier's message from each of ``peers``; the peers still missing at the deadline."""
        boxes = {peer: np.zeros(1, np.int64) for peer in peers}
        requests = dict(zip(boxes, post(self._comm, _TAG, [], [(box, peer) for peer, box in boxes.items()])))
        pause = 0.0
        while requests:
            for peer, req in list(requests.items()):
                if req.Test():
                    if boxes[peer][0] == self._sequence:
                        del requests[peer]
                    else:   # a late message of an earlier barrier that timed out: take the next one
                        (requests[peer],) = post(self._comm, _TAG, [], [(boxes[peer], peer)])
            if not requests or time.monotonic() > deadline:
                break
            time.sleep(pause)
            pause = min(1e-3, pause * 2 or 1e-6)
        missing = sorted(requests)
        self._missing = missing
        for req in requests.values():
            req.Cancel()
            req.Wait()
        return missing if wait_all else missing[:1]

    def _prune(self) -> None:
        self._leftover = [r for r in self._leftover if not r.Test()]

    def free(self) -> None:
        """Free the communicator (the group shuts down)."""
        if not MPI.Is_finalized() and self._comm != MPI.COMM_NULL:
            self._comm.Free()
