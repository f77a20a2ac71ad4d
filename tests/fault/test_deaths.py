"""A process killed during a collective under MPI's fault-tolerance extension: every survivor raises, and goes on.

Each test runs ``tests/fault/deaths.py CASE WHEN mpicoll`` on 4 processes with ``--with-ft ulfm`` (Open MPI 5's
ULFM): rank 2 kills itself (SIGKILL) before, or 20 ms into, a large collective that the ranks repeat; every
survivor must raise :class:`mpicoll.ProcFailedError` within :data:`WITHIN` seconds of the death, then
``Shrink`` the communicator and get the right sum from an ``Allreduce`` on it.  MPICH's fault tolerance is
not tested here (see ``docs/faults.md``): the tests are skipped on it.
"""

from __future__ import annotations

import re

import jobs
import pytest

from mpicoll.tools.mpirun import find_mpirun, is_open_mpi

LIMIT = 120     # seconds for one job (a hang fails the test, and the job is killed)
WITHIN = 1.0    # seconds from the death to the last survivor's error
SURVIVORS = (0, 1, 3)

CASES = ["allreduce-ring", "allreduce-recursive_doubling", "allreduce-rabenseifner", "allreduce-double_binary_tree",
         "allreduce-auto", "bcast-binomial", "bcast-pipelined_chain", "reduce", "allgather", "alltoall",
         "reduce_scatter_block", "barrier", "iallreduce", "allreduce_init", "allreduce-obj", "inter-allreduce",
         "inter-bcast"]

pytestmark = pytest.mark.skipif(not is_open_mpi(find_mpirun()),
                                reason="the death cases run under Open MPI's ULFM (mpirun --with-ft ulfm)")


@pytest.mark.parametrize("when", ["before", "during"])
@pytest.mark.parametrize("case", CASES)
def test_every_survivor_raises_and_goes_on(case, when):
    code, out, _ = jobs.launch("deaths.py", case, LIMIT, args=("--with-ft", "ulfm"), nprocs=4,
                               script_args=(when, "mpicoll"))
    raised = {int(m.group(1)): (m.group(2), m.group(3), float(m.group(4)))
              for m in re.finditer(r"^RAISED rank=(\d) (\S+) (\S+) (\S+)$", out, re.M)}
    assert sorted(raised) == list(SURVIVORS), f"not every survivor raised:\n{out[-3000:]}"
    for rank, (error, kind, seconds) in raised.items():
        assert kind == "ProcFailedError" and error in ("ERR_PROC_FAILED", "ERR_REVOKED"), (rank, error, kind)
        assert seconds < WITHIN, f"rank {rank} raised {seconds} s after the death"
    going_on = dict(re.findall(r"^NEXT rank=(\d) (\w+)$", out, re.M))
    assert going_on == {str(r): "ok" for r in SURVIVORS}, f"the shrunk communicator:\n{out[-3000:]}"


@pytest.mark.parametrize("case", ["blocking", "async"])
def test_torch_survivors_raise_dist_backend_error(case):
    """On the "mpicoll" torch backend, every survivor's collective raises torch's ``DistBackendError``."""
    pytest.importorskip("torch")
    code, out, _ = jobs.launch("torch_deaths.py", case, LIMIT, args=("--with-ft", "ulfm"), nprocs=4)
    raised = {int(m.group(1)): (m.group(2), float(m.group(3)))
              for m in re.finditer(r"^RAISED rank=(\d) (\S+) (\S+)$", out, re.M)}
    assert sorted(raised) == list(SURVIVORS), f"not every survivor raised:\n{out[-3000:]}"
    for rank, (kind, seconds) in raised.items():
        assert kind == "DistBackendError", (rank, kind)
        assert seconds < WITHIN, f"rank {rank} raised {seconds} s after the death"
