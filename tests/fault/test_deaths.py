"""A process killed during a collective under MPI's fault-tolerance extension: every survivor raises, and goes on.

Each test runs ``tests/fault/deaths.py CASE WHEN mpicoll`` on 4 processes with ``--with-ft ulfm`` (Open MPI 5's
ULFM): rank 2 kills itself (SIGKILL) before, or 20 ms into, a large collective that the ranks repeat; every
survivor must raise :class:`mpicoll.ProcFailedError` within :data:`WITHIN` seconds of the death, then
``Shrink`` the communicator and get the right sum from an ``Allreduce`` on it.  They are skipped on MPICH: the
``mpich`` wheel's MPICH 5.0.2 (device ch4) has no fault tolerance (with ``MPIR_CVAR_ENABLE_FT=1`` every process
fails an assertion in ``MPI_Init``, ``ch4_request.h`` line 16; see ``docs/faults.md``).  On every MPI family a
death without the extension ends the whole job, never a hang (:func:`test_a_death_without_the_extension_ends_the_job`).
"""

from __future__ import annotations

import re

import jobs
import pytest

from mpicoll.tools.mpirun import find_mpirun, is_open_mpi

LIMIT = 120     # seconds for one job (a hang fails the test, and the job is killed)
WITHIN = 2.0    # seconds from the death to the last survivor's error (4 processes on 2 cores: 1.2-1.6 s seen
                # while another job loaded the machine)
SURVIVORS = (0, 1, 3)

CASES = ["allreduce-ring", "allreduce-recursive_doubling", "allreduce-rabenseifner", "allreduce-double_binary_tree",
         "allreduce-auto", "bcast-binomial", "bcast-pipelined_chain", "reduce", "allgather", "alltoall",
         "reduce_scatter_block", "barrier", "iallreduce", "allreduce_init", "allreduce-obj", "inter-allreduce",
         "inter-bcast"]

ULFM_ONLY = pytest.mark.skipif(not is_open_mpi(find_mpirun()),
                               reason="survived under Open MPI's ULFM (mpirun --with-ft ulfm) only: MPICH 5.0.2's ch4 "
                               "has no fault tolerance (MPIR_CVAR_ENABLE_FT=1 fails an assertion in MPI_Init)")


@pytest.mark.parametrize("case", ["allreduce-ring", "iallreduce"])
def test_a_death_without_the_extension_ends_the_job(case):
    """No ``--with-ft``: the launcher ends the whole job when rank 2 is killed in the middle of a large call
    (none hangs, no survivor goes on; on MPICH a survivor may see an error before it is killed: on 2 runs of 10,
    one raised ``MPI_ERR_OTHER`` from its ``Allreduce`` and was killed in the ``Shrink`` that followed)."""
    code, out, secs = jobs.launch("deaths.py", case, LIMIT, nprocs=4, script_args=("during", "mpicoll"))
    assert code != 0 and "NEXT" not in out, out[-3000:]
    assert secs < 60, secs


@ULFM_ONLY
@pytest.mark.parametrize("when", ["before", "during"])
@pytest.mark.parametrize("case", CASES)
def test_every_survivor_raises_and_goes_on(case, when):
    _every_survivor_raised(case, when, ("ERR_PROC_FAILED", "ERR_REVOKED"), "ProcFailedError")


@ULFM_ONLY
@pytest.mark.parametrize("when", ["before", "during"])
def test_mpi_waitall_on_a_request_raises(when):
    """``MPI.Request.Waitall([comm.Iallreduce(...)])`` (mpi4py's own, no statuses) while rank 2 dies: every survivor
    raises ``MPI_ERR_IN_STATUS`` within the limit, as ``MPI_Waitall`` does for MPI's own requests (the built-in
    ``Iallreduce`` gives the same), and goes on.  Before, Open MPI's ``MPI_Waitall`` ignored the error in the
    generalized request's status: it returned as if the call had completed, and the survivors' loop never ended."""
    _every_survivor_raised("iallreduce-mpi-waitall", when, ("ERR_IN_STATUS",), "Exception")


def _every_survivor_raised(case: str, when: str, errors: tuple[str, ...], kind: str) -> None:
    """Run ``deaths.py CASE WHEN mpicoll``: every survivor raised ``kind`` of one of ``errors`` within
    :data:`WITHIN` seconds of the death, and got the right sum on the shrunk communicator."""
    code, out, _ = jobs.launch("deaths.py", case, LIMIT, args=("--with-ft", "ulfm"), nprocs=4,
                               script_args=(when, "mpicoll"))
    raised = {int(m.group(1)): (m.group(2), m.group(3), float(m.group(4)))
              for m in re.finditer(r"^RAISED rank=(\d) (\S+) (\S+) (\S+)$", out, re.M)}
    assert sorted(raised) == list(SURVIVORS), f"not every survivor raised:\n{out[-3000:]}"
    for rank, (error, raised_kind, seconds) in raised.items():
        assert raised_kind == kind and error in errors, (rank, error, raised_kind)
        assert seconds < WITHIN, f"rank {rank} raised {seconds} s after the death"
    going_on = dict(re.findall(r"^NEXT rank=(\d) (\w+)$", out, re.M))
    assert going_on == {str(r): "ok" for r in SURVIVORS}, f"the shrunk communicator:\n{out[-3000:]}"
    _the_job_ended(code, out)


def _the_job_ended(code: int, out: str) -> None:
    """The survivors returned from the program (no ``os._exit``), and the job ended with them, successfully:
    :func:`jobs.launch` fails a job that does not end within :data:`LIMIT`.  Under ULFM, Open MPI's
    ``MPI_Finalize`` starts with a barrier over every process of the job that could wait for ever for the dead
    one (4 of the 36 jobs of one run of these cases, each survivor stuck in ``ompi_mpi_finalize``, on the 2-core
    machine); ``mpicoll.launch --with-ft ulfm`` leaves it out (``OMPI_MCA_async_mpi_finalize=1``)."""
    assert code == 0, f"the job ended with status {code}:\n{out[-3000:]}"


@ULFM_ONLY
@pytest.mark.parametrize("case", ["async", "elastic"])   # (elastic: the blocking call, then going on)
def test_torch_survivors_raise_dist_backend_error(case):
    """On the "mpicoll" torch backend, every survivor's collective raises torch's ``DistBackendError``; in
    ``elastic`` the survivors then agree that rank 2 failed, make a group of themselves and train with DDP on it."""
    pytest.importorskip("torch")
    code, out, _ = jobs.launch("torch_deaths.py", case, LIMIT, args=("--with-ft", "ulfm"), nprocs=4)
    raised = {int(m.group(1)): (m.group(2), float(m.group(3)))
              for m in re.finditer(r"^RAISED rank=(\d) (\S+) (\S+)$", out, re.M)}
    assert sorted(raised) == list(SURVIVORS), f"not every survivor raised:\n{out[-3000:]}"
    for rank, (kind, seconds) in raised.items():
        assert kind == "DistBackendError", (rank, kind)
        assert seconds < WITHIN, f"rank {rank} raised {seconds} s after the death"
    if case == "elastic":
        shrunk = dict(re.findall(r"^SHRUNK rank=(\d) (.*)$", out, re.M))
        assert shrunk == {"0": "[2] 0 3", "1": "[2] 1 3", "3": "[2] 2 3"}, f"the survivors' group:\n{out[-3000:]}"
        going_on = dict(re.findall(r"^NEXT rank=(\d) (\w+)$", out, re.M))
        assert going_on == {str(r): "ok" for r in SURVIVORS}, f"the survivors' group:\n{out[-3000:]}"
    _the_job_ended(code, out)


@ULFM_ONLY
@pytest.mark.parametrize("example", ["elastic_training", "torch_elastic"])
def test_an_elastic_example_loses_a_rank_and_finishes_right(example):
    """The examples that train, lose their last rank at step 100 and go on with the survivors (``Shrink``;
    on torch a group of the survivors, ``mpicoll.torch.failed_ranks``): rank 0 finds the least-squares weights,
    and the job ends by itself, with status 0."""
    if example == "torch_elastic":
        pytest.importorskip("torch")
    code, out, _ = jobs.launch(f"-m mpicoll.examples.{example}", "", LIMIT, args=("--with-ft", "ulfm"), nprocs=4)
    assert re.search(r"^step 100: .*going on with 3 processes$", out, re.M), out[-3000:]
    assert re.search(r"^3 process\(es\) finished 400 steps; .*solution: \S+$", out, re.M), out[-3000:]
    assert re.search(r"^OK$", out, re.M) and "WRONG" not in out, out[-3000:]
    _the_job_ended(code, out)
