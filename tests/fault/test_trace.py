"""The flight recorder and ``python -m mpicoll doctor``: a missing rank, a mismatch, a death, a hang.

Each test runs ``tests/fault/traced.py CASE`` on 3 processes with ``MPICOLL_TRACE`` set to a fresh folder and
checks ``python -m mpicoll doctor``'s report line by line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import jobs
import pytest
from jobs import HERE, ROOT

from mpicoll.tools.mpirun import find_mpirun, is_open_mpi

LIMIT = 60      # seconds for one job (each ends in a few when it works)
NO_RECORD = ("  rank 2: no record (a process that died writes none; one stuck outside mpicoll writes on SIGUSR1 or "
             "at exit)")


def doctor(folder: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "mpicoll", "doctor", folder], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def traced(case: str, folder: str, env: dict | None = None, args: tuple = ()) -> str:
    code, out, _ = jobs.launch("traced.py", case, LIMIT, env={"MPICOLL_TRACE": folder, **(env or {})}, args=args,
                               nprocs=3)
    return out


def test_a_missing_rank(tmp_path):
    out = traced("missing", str(tmp_path), {"MPICOLL_TIMEOUT": "1"})
    assert "RESULT rank=0 CollectiveTimeout" in out and "RESULT rank=1 CollectiveTimeout" in out, out[-3000:]
    assert doctor(str(tmp_path)) == [
        "3 records (ranks 0-2), written on CollectiveTimeout (ranks 0, 1); exit (rank 2)",
        "comm 1 (3 ranks):",
        "  rank 2 never entered call 3 (Allreduce on comm 1); its last call there was Allreduce #2 (completed)",
        "  rank 0 waits in round 0 of ring for rank 2",
        "  rank 1 waits in round 1 of ring for rank 0",
    ]


def test_a_mismatch(tmp_path):
    """Ranks 0 and 2 broadcast where rank 1 all-reduces, then exit: rank 1, told of their calls as they exit,
    raises MismatchError (its wait watched by the timeout, which it never reaches) and writes its record then;
    the doctor names the calls."""
    out = traced("mismatch", str(tmp_path), {"MPICOLL_TIMEOUT": "10"})
    assert "RESULT rank=1 MismatchError" in out, out[-3000:]
    assert doctor(str(tmp_path)) == [
        "3 records (ranks 0-2), written on MismatchError (rank 1); exit (ranks 0, 2)",
        "comm 1 (3 ranks):",
        "  ranks 0, 2 called Bcast #3, rank 1 called Allreduce #3 (a mismatch)",
        "  rank 1 raised MismatchError in ring",
    ]


def test_a_missing_rank_on_an_intercommunicator(tmp_path):
    """Its calls (blocking and requests) are recorded in its groups merged, its ranks numbered there (the heading
    says which world ranks they are: MPI's merge orders the groups as it likes); world rank 2 skips the second
    ``Allreduce``."""
    out = traced("inter-missing", str(tmp_path), {"MPICOLL_TIMEOUT": "1"})
    assert "RESULT rank=0 CollectiveTimeout" in out and "RESULT rank=1 CollectiveTimeout" in out, out[-3000:]
    report = doctor(str(tmp_path))
    assert report[:3] == [
        "3 records (ranks 0-2), written on CollectiveTimeout (ranks 0, 1); exit (rank 2)",
        "comm 1 (3 ranks):",
        "  every call completed on every rank with a record (ranks 0-2)"], report
    assert report[3] in ("comm 2 (intercommunicator of groups rank 0 | ranks 1, 2; world ranks 1 | 0, 2):",
                         "comm 2 (intercommunicator of groups ranks 0, 1 | rank 2; world ranks 0, 2 | 1):"), report
    missing = 2 if report[3].endswith("1 | 0, 2):") else 1      # world rank 2 in the groups merged
    assert report[4] == (f"  rank {missing} never entered call 3 (Allreduce on comm 2); its last call there was "
                         "Allreduce #1 (completed)"), report
    # the agreement's rounds first: who waits for whom in it depends on the algorithm "auto" picks
    assert len(report) == 7 and all(re.fullmatch(rf"  rank [^{missing}] waits in round \d+ of intercomm for rank \d",
                                                 line) for line in report[5:]), report
    with open(tmp_path / "rank-0.json") as f:
        calls = [c for comm in json.load(f)["comms"] if comm.get("groups") for c in comm["calls"]]
    assert [(c["kind"], c["seq"], c["collective"], c["algorithm"]) for c in calls] == [
        ("blocking", 1, "allreduce", "intercomm"), ("nonblocking", 2, "allreduce", "intercomm"),
        ("blocking", 3, "allreduce", "intercomm")], calls


@pytest.mark.skipif(not is_open_mpi(find_mpirun()),
                    reason="a death is survived under Open MPI's ULFM (mpirun --with-ft ulfm) only")
def test_a_death(tmp_path):
    out = traced("death", str(tmp_path), args=("--with-ft", "ulfm"))
    assert "RESULT rank=0 ProcFailedError" in out and "RESULT rank=1 ProcFailedError" in out, out[-3000:]
    report = doctor(str(tmp_path))
    assert report[:3] == ["2 records (ranks 0, 1), written on ProcFailedError (ranks 0, 1)", "comm 1 (3 ranks):",
                          "  rank 2 died; ranks 0, 1 learned it in call 3 (Allreduce on comm 1)"], report
    # rank 0 waits for rank 2 in round 0 of the ring; rank 1 learns it in round 1 (from the revoke), or in round 0
    assert report[3:-1] in (["  rank 0 stopped in round 0 of ring (ProcFailedError)",
                             "  rank 1 stopped in round 1 of ring (ProcFailedError)"],
                            ["  ranks 0, 1 stopped in round 0 of ring (ProcFailedError)"]), report
    assert report[-1] == NO_RECORD, report


def test_an_outstanding_request_at_exit(tmp_path):
    """Ranks 0 and 1 exit with an Iallreduce that rank 2 never started: their records name it.  (Which of them
    writes at exit and which when its request fails as its communicator goes at exit varies from run to run.)"""
    traced("outstanding", str(tmp_path))
    report = doctor(str(tmp_path))
    assert report[0].startswith("3 records (ranks 0-2), written on ") and "exit (rank 2)" in report[0], report
    assert report[1:3] == ["comm 1 (3 ranks):",
                           "  rank 2 never entered call 3 (Iallreduce on comm 1); it made no call there before"], report
    waiting = re.compile(r"  ranks? [01](, 1)? (waits?|raised \w+) in round [01] of ring")
    assert all(waiting.match(line) for line in report[3:]), report
    assert len(report) > 3, report


def test_sigusr1_writes_every_rank_record_even_one_blocked_in_mpi(tmp_path):
    """No timeout: ranks 0 and 1 block in MPI, rank 2 sleeps; SIGUSR1 makes each write its record."""
    environ = dict(os.environ, PYTHONPATH=ROOT, MPICOLL_TRACE=str(tmp_path))
    for name in ("MPICOLL_TIMEOUT", "MPICOLL_DEBUG"):
        environ.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "mpicoll.launch", "-n", "3", os.path.join(HERE, "traced.py"),
                             "hang"], cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        pids, seen, t0 = {}, [], time.monotonic()
        while len(pids) < 3 and time.monotonic() - t0 < LIMIT:
            seen.append(proc.stdout.readline())
            pids = {int(r): int(pid) for r, pid in re.findall(r"WAITING rank=(\d) (\d+)\n", "".join(seen))}
        assert len(pids) == 3, "".join(seen)
        time.sleep(1.0)      # ranks 0 and 1 are inside the Allreduce by now
        for pid in pids.values():
            os.kill(pid, signal.SIGUSR1)
        while len(list(tmp_path.glob("rank-*.json"))) < 3 and time.monotonic() - t0 < LIMIT:
            time.sleep(0.1)
        time.sleep(0.2)
        assert doctor(str(tmp_path)) == [
            "3 records (ranks 0-2), written on SIGUSR1 (ranks 0-2)",
            "comm 1 (3 ranks):",
            "  rank 2 never entered call 3 (Allreduce on comm 1); its last call there was Allreduce #2 (completed)",
            "  ranks 0, 1 wait in ring (still running when the record was written)",
        ]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
