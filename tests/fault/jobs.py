"""Running a fault case as a whole MPI job, with a time limit: what ``test_faults`` and ``test_abandoned`` share.

A case is a script in this folder run as ``python -m mpicoll.launch -n N SCRIPT CASE``; its ranks print
lines ``WORD rank=R what`` that :func:`outcomes` reads.  A hang fails the test, and the whole job (mpirun and
every rank, in a session of their own) is killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "fault")
#: the mpicoll variables a case sees only when it sets them
MPICOLL_VARIABLES = ("MPICOLL_DEBUG", "MPICOLL_TIMEOUT", "MPICOLL_PROGRESS", "MPICOLL_TRACE", "MPICOLL_TRACE_CALLS")


def launch(script: str, case: str, limit: float, *, env: dict[str, str] | None = None, args: tuple = (),
           nprocs: int = 2, script_args: tuple = ()) -> tuple[int, str, float]:
    """Run ``case`` of ``script`` on ``nprocs`` processes within ``limit`` seconds: (exit status, output, seconds).

    ``args`` go to the launcher (mpirun's options), ``script_args`` to the script after ``case``; a ``script``
    starting with ``-m`` is a module (``-m mpicoll.examples.torch_elastic``), run with ``case`` (if any) after it."""
    environ = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in MPICOLL_VARIABLES:
        environ.pop(name, None)
    environ.update(env or {})
    program = script.split() if script.startswith("-m ") else [os.path.join(HERE, script)]
    cmd = [sys.executable, "-m", "mpicoll.launch", "-n", str(nprocs), *args, *program, *([case] if case else []),
           *script_args]
    for attempt in range(2):
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)     # mpirun passes it on to the ranks
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            pytest.fail(f"{case}: no end after {limit} s (a hang)\n{out[-3000:]}")
        if attempt == 0 and any(failure in out for failure in LAUNCHER_FAILURES):
            continue        # the launcher itself failed to start the job (no rank ran): once more
        break
    return proc.returncode, out, time.monotonic() - t0


#: what Open MPI's launcher prints when it could not start a job at all (seen once in CI, on a busy machine): no
#: rank ran, so the job says nothing of the program, and :func:`launch` starts it once more
LAUNCHER_FAILURES = ("The PMIx server's listener thread failed to start",)


def outcomes(out: str, word: str) -> dict[int, str]:
    """``{rank: what}`` from the lines ``WORD rank=R what`` of a two-rank job."""
    found = {int(m.group(1)): m.group(2) for m in re.finditer(rf"^{word} rank=(\d) (.*)$", out, re.M)}
    assert sorted(found) == [0, 1], f"expected a {word} line from both ranks:\n{out[-3000:]}"
    return found
