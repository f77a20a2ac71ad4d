"""Erroneous programs end, quickly, with the documented error (issue 12's cases, and issue 23's raising user op).

Each test runs ``tests/fault/cases.py CASE`` on 2 processes (3 for a user op
that raises on rank 1) through ``python -m mpicoll.launch`` with a time limit,
and checks what each rank printed (see ``cases.py``).  A hang fails the test
after ``LIMIT`` seconds, and the whole job (mpirun and every rank) is killed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import jobs
import pytest
from jobs import ROOT, outcomes

from mpicoll.tools.mpirun import find_mpirun, is_open_mpi, mpi_family

LIMIT = 90          # seconds for one job; every case here ends in a few seconds when it works

def launch(case: str, *, debug: str | None = None, timeout: str | None = None,
           args: tuple = (), nprocs: int = 2) -> tuple[int, str, float]:
    """Run one case of ``cases.py`` on ``nprocs`` processes: (exit status, output, seconds)."""
    env = {name: value for name, value in (("MPICOLL_DEBUG", debug), ("MPICOLL_TIMEOUT", timeout)) if value}
    return jobs.launch("cases.py", case, LIMIT, env=env, args=args, nprocs=nprocs)


def check_next(out: str) -> None:
    assert set(outcomes(out, "NEXT").values()) == {"ok"}, out[-3000:]


# -- a check only one rank can make: that rank raises, no peer waits, the next call works --------------

# (case, the rank whose check fails, what its error says)
ONE_RANK_ERRORS = [
    ("gather_small_root", 0, "recvbuf"),
    ("gather_small_root_large", 0, "recvbuf"),
    ("bcast_readonly", 1, "buf: the buffer is read-only"),
    ("bcast_readonly_large", 1, "buf: the buffer is read-only"),
    ("reduce_readonly_root", 0, "recvbuf: the buffer is read-only"),
]


@pytest.mark.parametrize("case, at_fault, error", ONE_RANK_ERRORS)
def test_one_rank_error_does_not_strand_peers(case: str, at_fault: int, error: str) -> None:
    code, out, _ = launch(case)
    assert code == 0, out[-3000:]
    result = outcomes(out, "RESULT")
    assert result[1 - at_fault] == "ok"
    assert re.match(r"\w*Error: ", result[at_fault]) and error in result[at_fault], result   # an argument error
    check_next(out)


@pytest.mark.parametrize("case, at_fault, error", ONE_RANK_ERRORS)
def test_one_rank_error_debug_every_rank_raises(case: str, at_fault: int, error: str) -> None:
    code, out, _ = launch(case, debug="1")
    assert code == 0, out[-3000:]
    result = outcomes(out, "RESULT")
    assert result[0] == result[1], result                       # the same error on every rank
    assert result[0].startswith("ArgumentError: ") and f"rank {at_fault} rejected" in result[0], result
    assert error in result[0]
    check_next(out)


# -- ranks disagree -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case, field", [
    ("count_mismatch", "count (elements): rank 0 4, rank 1 5"),
    ("dtype_mismatch", "dtype: rank 0 float64, rank 1 float32"),
    ("algorithm_mismatch", "algorithm: rank 0 ring, rank 1 recursive_doubling"),
    ("root_mismatch", "root: rank 0 0, rank 1 1"),
])
def test_mismatch_debug_labelled_on_every_rank(case: str, field: str) -> None:
    code, out, _ = launch(case, debug="1")
    assert code == 0, out[-3000:]
    result = outcomes(out, "RESULT")
    assert result[0] == result[1], result
    assert result[0].startswith("MismatchError: ") and field in result[0], result
    check_next(out)


# (case, what the error names)
MISMATCHES = [("count_mismatch", "count=4"), ("dtype_mismatch", "dtype=float32"),
              ("algorithm_mismatch", "algorithm=ring")]


@pytest.mark.parametrize("case, field", MISMATCHES)
@pytest.mark.parametrize("timeout", [None, "30"])
def test_mismatch_raises_on_every_rank_and_a_new_communicator_works(case: str, field: str, timeout: str | None) -> None:
    """Without debug mode the always-on check (mpicoll.engine.mismatch) raises MismatchError on every rank, with
    or without the watchdog, long before its timeout; the communicator stays unusable, and a new one works."""
    code, out, secs = launch(case, timeout=timeout)
    assert code == 0, out[-3000:]
    result = outcomes(out, "RESULT")
    assert all(r.startswith("MismatchError: ") and field in r for r in result.values()), result
    assert secs < 20, secs
    check_next(out)


def test_root_mismatch_raises_at_the_next_call() -> None:
    """Two 'roots' both send: each rank's part completes; the message left unreceived is found, and every rank's
    next call on the communicator raises, naming both roots; a new communicator works."""
    code, out, _ = launch("root_mismatch")
    assert code == 0, out[-3000:]
    assert set(outcomes(out, "RESULT").values()) == {"ok"}, out[-3000:]
    again = outcomes(out, "AGAIN")
    assert all(r.startswith("MismatchError: ") and "root=0" in r and "root=1" in r for r in again.values()), again
    check_next(out)


# -- the watchdog ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["skipped_call", "skipped_wait"])
@pytest.mark.parametrize("debug", [None, "1"])
def test_watchdog_names_collective_round_and_peer(case: str, debug: str | None) -> None:
    code, out, secs = launch(case, timeout="2", debug=debug)
    result = outcomes(out, "RESULT")
    assert result[1] == "ok"
    assert result[0].startswith("CollectiveTimeout: ") and "Allreduce" in result[0], result
    assert "made no progress for 2 s" in result[0] and "waiting for rank 1" in result[0], result
    if not debug:
        assert "in round 0" in result[0], result
    # the communicator that timed out is out of step: its next call on rank 0 raises at once, before any message;
    # a new one made by every rank (comm.Dup()) works
    step = re.search(r"^STEP rank=0 OutOfStepError: (.*) after ([0-9.]+) s$", out, re.M)
    assert step and "out of step" in step.group(1) and "comm.Dup()" in step.group(1), out[-3000:]
    assert float(step.group(2)) < 0.5, step.group(2)
    check_next(out)


def test_watchdog_under_launch_aborts_the_job() -> None:
    code, out, secs = launch("timeout_uncaught", args=("--timeout", "2"))
    assert code != 0
    assert "CollectiveTimeout" in out
    if is_open_mpi(find_mpirun()):   # mpirun says "MPI_ABORT was invoked"; MPICH's line comes from the aborting
        assert "MPI_ABORT" in out     # rank itself and is sometimes lost as hydra ends the job: the time tells
    assert secs < 60, secs        # rank 1 sleeps 120 s: the abort ended it


# -- a user op that raises ends the job (as mpi4py does for MPI.Op.Create): no rank waits for the one that raised

def _aborted_by_rank_1(out: str) -> None:
    """No rank got past the call (no RESULT line), and the launcher says rank 1 aborted: Open MPI's mpirun
    prints "MPI_ABORT was invoked on rank 1"; MPICH's line comes from the aborting rank itself and is
    sometimes lost as hydra ends the job, so there the time and the status tell (asserted by the callers)."""
    assert "RESULT" not in out, out[-3000:]
    if is_open_mpi(find_mpirun()):
        assert "MPI_ABORT was invoked on rank 1" in out, out[-3000:]


@pytest.mark.parametrize("case", ["user_op_raises", "user_op_raises_nonblocking"])
def test_raising_user_op_aborts_the_job_naming_op_rank_and_error(case: str) -> None:
    code, out, secs = launch(case, nprocs=3)
    assert code != 0, out[-3000:]
    line = ("mpicoll: on rank 1 of MPI.COMM_WORLD, user op mpicoll.Op(fail_on_rank_1, commute=True) raised "
            "ValueError: rank 1 cannot reduce; aborting the job (MPI_Abort)")
    assert line in out, out[-3000:]   # (mpirun may print its abort notice first, in the middle of a line)
    trace = out[out.index(line):]     # then the traceback, down to the user's function
    assert "Traceback (most recent call last)" in trace and ", in fail_on_rank_1\n" in trace, out[-3000:]
    _aborted_by_rank_1(out)
    assert secs < 60, secs        # every rank sleeps 60 s after the call: the abort ended them


@pytest.mark.parametrize("case", ["mpi_op_raises", "mpi_op_raises_nonblocking"])
def test_raising_mpi_op_create_function_aborts_the_job_in_mpi4py(case: str) -> None:
    code, out, secs = launch(case, nprocs=3)
    assert code != 0, out[-3000:]
    # mpi4py prints the op's traceback, then the job is aborted: Open MPI's mpirun shows all of it; MPICH's abort
    # can cut it anywhere (CI saw it end after "Traceback (most recent call last):"), so there the status, the
    # missing RESULT lines and the time tell
    if is_open_mpi(find_mpirun()):
        assert "rank 1 cannot reduce" in out, out[-3000:]
        assert "exception in user-defined reduction operation" in out or "op_user_call" in out, out[-3000:]
    _aborted_by_rank_1(out)
    assert secs < 60, secs


# -- launch tears the job down ----------------------------------------------------------------------------

@pytest.mark.parametrize("case, text", [("uncaught", "RuntimeError: an uncaught error on rank 1"),
                                        ("killed", "signal 9")])
def test_launch_ends_the_job(case: str, text: str) -> None:
    code, out, secs = launch(case)
    assert code != 0, out[-3000:]
    assert text in out, out[-3000:]
    assert secs < 60, secs        # rank 0 would sleep 60 s after its Barrier


def run_launch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m mpicoll.launch ARGS`` with the repository on the path."""
    env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-m", "mpicoll.launch", *args], cwd=ROOT, env=env, timeout=LIMIT,
                          capture_output=True, text=True)


# one write per line (hydra forwards each write as it comes: a print's pieces can interleave with another rank's)
PRINT_X = ("import os, sys; from mpi4py import MPI; "
           "sys.stdout.write(f'X {MPI.COMM_WORLD.rank} {os.environ.get(\"MPICOLL_FAULT_X\")}\\n')")


def test_launch_passes_mpirun_options() -> None:
    proc = run_launch("-n", "2", "-x", "MPICOLL_FAULT_X", "--bind-to", "none", "-c", PRINT_X,
                      env={"MPICOLL_FAULT_X": "reached"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(re.findall(r"^X \d reached$", proc.stdout, re.M)) == ["X 0 reached", "X 1 reached"]


@pytest.mark.parametrize("option", [("-x", "MPICOLL_FAULT_X=given"), ("-genv", "MPICOLL_FAULT_X", "given")])
def test_launch_sets_a_variable_with_either_familys_option(option: tuple[str, ...]) -> None:
    """Open MPI's ``-x VAR=VALUE`` and hydra's ``-genv VAR VALUE`` both work with either launcher; the value
    given wins over the launcher's environment."""
    proc = run_launch("-n", "2", *option, "-c", PRINT_X, env={"MPICOLL_FAULT_X": "inherited"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(re.findall(r"^X \d given$", proc.stdout, re.M)) == ["X 0 given", "X 1 given"], proc.stdout


def test_launch_refuses_an_option_the_launcher_lacks() -> None:
    """``--mca`` is Open MPI's: Open MPI runs it; MPICH's hydra has nothing like it and launch says so."""
    proc = run_launch("-n", "2", "--mca", "btl_base_verbose", "0", "-c", PRINT_X)
    if mpi_family(find_mpirun()) == "mpich":
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "--mca is an Open MPI option that MPICH's mpiexec (hydra) has nothing like" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout + proc.stderr
