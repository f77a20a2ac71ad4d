"""Requests abandoned at exit end cleanly; without the progress thread the caller still drives them (issue 25).

Each test runs ``tests/fault/abandoned.py CASE`` on 2 processes through ``python -m mpicoll.launch`` with a
time limit: a hang fails the test and the job is killed.
"""

from __future__ import annotations

import re

import jobs
import pytest
from jobs import outcomes

LIMIT = 60          # seconds; each case ends in a few seconds (the exit grace is 2 s)


def launch(case: str, **env: str) -> tuple[int, str, float]:
    return jobs.launch("abandoned.py", case, LIMIT, env=env)


def results(out: str) -> dict[int, str]:
    return outcomes(out, "RESULT")


@pytest.mark.parametrize("progress", ["1", "0"])
def test_requests_never_waited_for_complete_at_exit(progress):
    """Every rank starts collectives and exits: the exit gives them time to complete (the thread, or the exit
    itself drives them), no warning, a clean end."""
    code, out, _ = launch("exit_unwaited", MPICOLL_PROGRESS=progress)
    assert code == 0 and set(results(out).values()) == {"started"}, out[-3000:]
    assert "never completed" not in out, out[-3000:]


@pytest.mark.parametrize("progress", ["1", "0"])
def test_requests_never_waited_for_on_a_derived_communicator_complete_at_exit(progress):
    """The program drops the derived communicator with its ``Iallreduce`` outstanding (its state is collected
    before the exit's grace): the request still completes on the private communicator, which is kept for it
    (it was freed under the request: Open MPI's ``MPI_Irecv`` of the next round crashed in the C rounds)."""
    code, out, _ = launch("exit_unwaited_derived", MPICOLL_PROGRESS=progress)
    assert code == 0 and set(results(out).values()) == {"started"}, out[-3000:]
    assert "never completed" not in out and "MPI_ERR" not in out, out[-3000:]


def test_a_request_its_peers_never_join_is_reported_at_exit():
    code, out, seconds = launch("exit_abandoned_alone")
    assert set(results(out).values()) == {"started"}, out[-3000:]
    assert re.search(r"mpicoll: rank 0 exits with 1 collective request\(s\) never completed", out), out[-3000:]
    assert seconds < LIMIT


def test_progress_off_the_caller_drives_requests():
    code, out, _ = launch("progress_off", MPICOLL_PROGRESS="0")
    assert code == 0, out[-3000:]
    assert set(results(out).values()) == {"thread=False ok=True warned=False"}, out[-3000:]


def test_without_thread_multiple_a_warning_and_the_caller_drives_requests():
    code, out, _ = launch("serialized")
    assert code == 0, out[-3000:]
    assert set(results(out).values()) == {"thread=False ok=True warned=True"}, out[-3000:]
