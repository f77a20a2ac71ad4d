"""torch's own distributed test suite (``distributed_test.py``, in the torch wheel) on a backend, test by test.

torch runs ``DistributedTest._DistTestBase`` by forking its processes; the
``"mpicoll"`` backend takes its ranks from MPI, so here every rank of one MPI
job runs the tests in turn, each with a fresh default group (``init_process_group``
on a file store, as torch's own runs do), and rank 0 writes each test's outcome.
The tests chosen are Gloo's: the module is imported with ``BACKEND=gloo``, so
its decorators skip what Gloo skips, and the backend under test then replaces
Gloo at run time (``BACKEND`` and the profiling allowlists of the module name
it, so that the profiler's events are checked for it as for Gloo).  A test that
makes no progress for ``--timeout`` seconds (a rank left waiting) ends the job;
it counts as failed and the next job starts after it.

Run it twice, once per backend, and compare::

    .venv/bin/python tests/torch/torch_suite.py --backend gloo    --out /tmp/suite-gloo.txt
    .venv/bin/python tests/torch/torch_suite.py --backend mpicoll --out /tmp/suite-mpicoll.txt
    .venv/bin/python tests/torch/torch_suite.py --compare /tmp/suite-gloo.txt /tmp/suite-mpicoll.txt

Not run by ``tests/run_all.py`` (it takes minutes); ``tests/torch/test_torch_suite.py`` runs a few of its tests.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _import_suite(backend: str):
    """torch's test module, with Gloo's tests chosen and ``backend`` under test."""
    os.environ["BACKEND"] = "gloo"
    os.environ.setdefault("WORLD_SIZE", "2")
    os.environ.setdefault("TEMP_DIR", tempfile.gettempdir())
    os.environ["INIT_METHOD"] = "file:///dev/null"   # file:// as torch's Gloo runs (the file is set per test)
    from torch.testing._internal.distributed import distributed_test as dt  # noqa: PLC0415

    dt.BACKEND = backend
    for allowlist in (dt.PROFILING_SUPPORTED_BACKENDS, dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
        if backend not in allowlist:
            allowlist.append(backend)
    return dt


def test_names() -> list[str]:
    """The tests of the suite that Gloo does not skip when the module is imported."""
    dt = _import_suite("gloo")
    base = dt.DistributedTest._DistTestBase
    return [n for n in sorted(dir(base)) if n.startswith("test_")
            and not getattr(getattr(base, n), "__unittest_skip__", False)]


# -- one rank of the MPI job ------------------------------------------------------------------------------------------


def _outcome(case, name: str, dt, backend: str, size: int, rank: int, tmp: str) -> tuple[str, str]:
    """Run one test on this rank: ("passed" | "skipped" | "failed", what happened)."""
    import traceback  # noqa: PLC0415
    import unittest  # noqa: PLC0415
    from datetime import timedelta  # noqa: PLC0415

    import torch.distributed as dist  # noqa: PLC0415
    from torch.testing._internal import common_utils  # noqa: PLC0415
    from torch.testing._internal.common_distributed import TEST_SKIPS  # noqa: PLC0415

    skip_codes = {skip.exit_code: skip.message for skip in TEST_SKIPS.values()}
    environment = dict(os.environ)   # torch runs each test in a new process: what a test sets must not stay
    outcome = ("passed", "")
    try:
        timeout = timedelta(seconds=dt.CUSTOM_PG_TIMEOUT.get(name, dt.default_pg_timeout))
        dist.init_process_group(init_method=f"file://{tmp}/init_file", backend=backend, world_size=size,
                                rank=rank, timeout=timeout)
        case._barrier()
        common_utils.set_rng_seed()   # as torch's run_test does before each test
        getattr(case, name)()
    except unittest.SkipTest as exc:
        outcome = ("skipped", str(exc))
    except SystemExit as exc:   # torch's skip decorators exit the process with a code of TEST_SKIPS
        outcome = ("skipped", skip_codes[exc.code]) if exc.code in skip_codes else ("failed", f"exit {exc.code}")
    except BaseException as exc:  # noqa: BLE001 - every failure is an outcome
        lines = traceback.format_exception(exc)
        outcome = ("failed", (lines[-1].strip() + " | " + "".join(lines[-3:-1]).strip()).replace("\n", " ")[:600])
    try:
        case._barrier()
    except BaseException as exc:  # noqa: BLE001
        if outcome[0] == "passed":
            outcome = ("failed", f"final barrier: {exc}")
    if dist.is_initialized():
        dist.destroy_process_group()
    os.environ.clear()
    os.environ.update(environment)
    dist.set_debug_level_from_env()
    return outcome


def worker(backend: str, names: list[str], results: str) -> None:
    """Every rank: run ``names`` in turn; rank 0 appends ``name outcome what`` lines to ``results``."""
    from mpi4py import MPI  # noqa: PLC0415

    import mpicoll.torch  # noqa: F401, PLC0415  (registers "mpicoll"; fills RANK and the like from MPI)

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    os.environ["WORLD_SIZE"] = str(size)
    dt = _import_suite(backend)

    class Suite(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
        pass

    for name in names:
        tmp = tempfile.mkdtemp(prefix="torch-suite-") if rank == 0 else None
        if rank == 0:
            for sub in ("barrier", "test_dir", "init_dir"):
                os.mkdir(os.path.join(tmp, sub))
            with open(results + ".current", "w") as f:
                f.write(name)
        tmp = comm.bcast(tmp)
        os.environ["TEMP_DIR"] = tmp
        dt.INIT_METHOD = f"file://{tmp}/init_dir/shared_init_file"
        dt.Barrier.barrier_id = 0
        case = Suite(name)
        case.rank = rank
        case.file_name = f"{tmp}/init_file"
        outcome = _outcome(case, name, dt, backend, size, rank, tmp)
        outcomes = comm.gather(outcome)
        if rank == 0:
            kinds = {kind for kind, _ in outcomes}
            kind = "failed" if "failed" in kinds else "skipped" if "skipped" in kinds else "passed"
            what = next((w for k, w in outcomes if k == kind and w), "")
            with open(results, "a") as f:
                f.write(f"{name} {kind} {what}\n")


# -- the driver ------------------------------------------------------------------------------------------------------


def _read(path: str) -> dict[str, tuple[str, str]]:
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, kind, *what = line.rstrip("\n").split(" ", 2)
                out[name] = (kind, what[0] if what else "")
    return out


def drive(backend: str, names: list[str], out: str, np_: int, timeout: float) -> dict[str, tuple[str, str]]:
    """Run ``names`` on ``backend`` in MPI jobs of ``np_`` processes; restart after a test that hangs."""
    while True:
        done = _read(out)
        todo = [n for n in names if n not in done]
        if not todo:
            return done
        listing = out + ".todo"
        with open(listing, "w") as f:
            f.write("\n".join(todo))
        cmd = [sys.executable, "-m", "mpicoll.launch", "-n", str(np_), os.path.abspath(__file__), "--worker",
               "--backend", backend, "--list", listing, "--out", out]
        job = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(out + ".log", "a"),
                               start_new_session=True)
        count, moved = len(done), time.monotonic()
        while job.poll() is None:
            time.sleep(0.5)
            now = len(_read(out))
            if now != count:
                count, moved = now, time.monotonic()
            elif time.monotonic() - moved > timeout:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
                break
        done = _read(out)
        if all(n in done for n in todo):
            continue
        current = open(out + ".current").read().strip() if os.path.exists(out + ".current") else ""
        stuck = current if current and current not in done else next(n for n in todo if n not in done)
        why = (f"no progress for {timeout:g} s (hung)" if job.returncode == -signal.SIGKILL
               else f"the job ended (status {job.returncode}) in this test")
        with open(out, "a") as f:
            f.write(f"{stuck} failed {why}\n")


def compare(reference: str, other: str) -> None:
    """Print how ``other``'s outcomes compare on the tests that pass in ``reference``."""
    ref, mine = _read(reference), _read(other)
    passing = [n for n, (kind, _) in ref.items() if kind == "passed"]
    ok = [n for n in passing if mine.get(n, ("missing",))[0] == "passed"]
    print(f"{len(passing)} tests pass in {reference}; {len(ok)} of them pass in {other}")
    for n in passing:
        kind, what = mine.get(n, ("missing", ""))
        if kind != "passed":
            print(f"  {n}: {kind} {what[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="mpicoll")
    parser.add_argument("--tests", help="comma-separated test names (default: every test Gloo does not skip)")
    parser.add_argument("--np", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--timeout", type=float, default=90, help="seconds a test may go without finishing")
    parser.add_argument("--out", default="torch-suite.txt", help="results, one 'name outcome what' line a test")
    parser.add_argument("--compare", nargs=2, metavar=("REFERENCE", "OTHER"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--list", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.compare:
        compare(*ns.compare)
    elif ns.worker:
        with open(ns.list) as f:
            worker(ns.backend, f.read().split(), ns.out)
    else:
        names = ns.tests.split(",") if ns.tests else test_names()
        results = drive(ns.backend, names, ns.out, ns.np, ns.timeout)
        counts = {k: sum(1 for n in names if results.get(n, ("",))[0] == k) for k in ("passed", "failed", "skipped")}
        print(f"{ns.backend}: {len(names)} tests, {counts['passed']} passed, {counts['failed']} failed, "
              f"{counts['skipped']} skipped ({ns.out})")


if __name__ == "__main__":
    main()
