#!/usr/bin/env python3
"""Run mpi4py's own collective test suites against :class:`mpicoll.Comm`.

mpi4py ships its tests in its source distribution only.  :func:`test_dir` gets
the ``test/`` folder of the sdist of the *installed* mpi4py version (see
:mod:`mpicoll.tools.mpi4py_sdist`: from the package index, sha256-checked, or else
``pip download``; once, cached in ``~/.cache/mpicoll`` or ``$MPICOLL_CACHE``), and
:func:`suite` builds, at run time, one test class per concrete test class of the
``test_cco_*`` modules (world, self and the dups of world and self): a subclass
whose communicator is wrapped in ``mpicoll.Comm``.  mpi4py's own skips and
overrides are inherited unchanged; nothing of its test code is copied here.

Under MPI (``python -m mpicoll.launch -n 4 tests/mpi4py_suite.py``) every rank
runs the same tests in the same order.  Each test loops over every buffer
backend of mpi4py's ``arrayimpl`` and every type code; a failed check is
recorded and the test goes on (its assertions return), so every rank keeps
calling the same collectives, and the test fails at its end.  A test that does
not finish within ``--timeout`` seconds (a hang) aborts the whole job with a
traceback instead of hanging.

Each rank writes ``PREFIX<rank>.json``: tests run/failed/skipped and, per
backend, the cases run (one type code of the backend inside one test) and the
failed checks.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import importlib
import json
import os
import sys
import time
import traceback
import unittest
from collections import Counter
from typing import Any

MODULES = ("test_cco_buf", "test_cco_vec", "test_cco_nb_buf", "test_cco_nb_vec", "test_cco_pr_buf", "test_cco_pr_vec",
           "test_cco_obj", "test_cco_ngh_buf", "test_cco_ngh_obj", "test_cco_pr_ngh_buf", "test_cco_buf_inter",
           "test_cco_vec_inter", "test_cco_obj_inter")   # every test_cco_* module of mpi4py 4.1.2

# what the census counts: mpi4py's own collectives and point-to-point calls, by method name
_COLLECTIVES = {m for base in ("Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
                               "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce", "Allreduce",
                               "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan", "Neighbor_allgather",
                               "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv",
                               "Neighbor_alltoallw")
                for m in (base, "I" + base[0].lower() + base[1:], base + "_init")}
_COLLECTIVES |= {"barrier", "bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "scan",
                 "exscan", "neighbor_allgather", "neighbor_alltoall"}
_P2P = {"Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend", "Send_init", "Sendrecv",
        "Sendrecv_replace", "send", "ssend", "bsend", "isend", "issend", "ibsend", "sendrecv"}
# communicators a test makes through MPI, not mpicoll: every collective on them is MPI's own
_MADE_BY_MPI = {"Create_cart", "Create_graph", "Create_dist_graph", "Create_dist_graph_adjacent",
                "Create_intercomm"}
CENSUS: Counter = Counter()   # (module, what) -> calls


def counted(comm_type: type) -> type:
    """A subclass of ``comm_type`` that counts, per test module, the calls on it that resolve to mpi4py's own
    collectives or point-to-point sends (not overridden by ``comm_type``), and the communicators it makes
    through MPI's topology and intercommunicator constructors."""
    own = {name for klass in comm_type.__mro__ if not klass.__module__.startswith("mpi4py")
           for name in vars(klass)}

    def __getattribute__(self: Any, name: str) -> Any:  # noqa: N807
        if name in _COLLECTIVES or name in _P2P or name in _MADE_BY_MPI:
            where = _current_module()
            if name in _MADE_BY_MPI and name not in own:
                CENSUS[where, "comms made by MPI"] += 1
            elif name in _COLLECTIVES and name not in own:
                CENSUS[where, "MPI collectives"] += 1
            elif name in _P2P and name not in own:
                CENSUS[where, "p2p sends"] += 1
        return comm_type.__getattribute__(self, name)

    return type(comm_type.__name__, (comm_type,), {"__getattribute__": __getattribute__})


def _current_module() -> str:
    """The test_cco_* module whose test is running (from the stack)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("test_cco"):
            return name
        frame = frame.f_back
    return "-"


def test_dir(version: str | None = None) -> str:
    """The ``test/`` folder of mpi4py's sdist for ``version`` (default: the installed one), fetched once."""
    from mpicoll.tools.mpi4py_sdist import sdist_dir  # noqa: PLC0415 - the repository root joins sys.path in main()

    return sdist_dir("test", "arrayimpl.py", version)


def wrapped(cls: type, comm_type: type, inter_type: type | None = None, fresh: bool = False) -> type:
    """A subclass of mpi4py's test class ``cls`` whose ``COMM`` is a ``comm_type`` over mpi4py's communicator.

    Class-level communicators are wrapped once; those that ``setUp`` makes (the
    dups) are wrapped after it, and freed by the test's own ``tearDown``.  The
    ``INTERCOMM`` that the intercommunicator tests' ``setUp`` makes (with MPI's own
    ``Create_intercomm``) becomes an ``inter_type`` the same way.

    ``fresh``: every test wraps its communicators anew, as a program that wraps
    each communicator it makes would: class-level ones in ``setUp``, and the
    dups ``setUp`` makes are freed by the test's ``tearDown`` through MPI's own
    handle, the wrapper simply dropped.
    """
    from mpi4py import MPI

    attrs: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    names = [n for n in ("COMM", "BASECOMM") if isinstance(getattr(cls, n, None), MPI.Intracomm)]
    if not fresh:
        for n in names:
            attrs[n] = comm_type(getattr(cls, n))

    def setUp(self: Any) -> None:  # noqa: N802 - unittest's name
        cls.setUp(self)
        raw = self.__dict__["_raw"] = {}
        for n in names:
            comm = self.__dict__.get(n)
            if comm is not None and not isinstance(comm, comm_type):
                raw[n] = comm
                setattr(self, n, comm_type(comm))
            elif fresh:
                setattr(self, n, comm_type(getattr(cls, n)))
        inter = self.__dict__.get("INTERCOMM")
        if inter_type is not None and isinstance(inter, MPI.Intercomm) and not isinstance(inter, inter_type):
            self.INTERCOMM = inter_type(inter)

    def tearDown(self: Any) -> None:  # noqa: N802 - unittest's name
        if fresh:   # the test's own tearDown frees MPI's communicators; the wrappers are dropped
            for n, comm in self.__dict__.pop("_raw", {}).items():
                setattr(self, n, comm)
        cls.tearDown(self)

    attrs["setUp"] = setUp
    attrs["tearDown"] = tearDown
    for name in dir(cls):
        if name.startswith("assert") and name not in _CONTEXT_ASSERTS and callable(getattr(cls, name)):
            attrs[name] = _soft(getattr(cls, name))
        elif name.startswith("test") and callable(getattr(cls, name)):
            attrs[name] = _checked(getattr(cls, name))
    return type(cls.__name__, (cls,), attrs)


# assertions that return a context manager (they wrap code that must raise): left as they are
_CONTEXT_ASSERTS = {"assertRaises", "assertRaisesRegex", "assertWarns", "assertWarnsRegex", "assertLogs",
                    "assertNoLogs"}


def _soft(method: Any) -> Any:
    """An assertion that records its failure and returns, so that this rank keeps calling the collectives
    the other ranks call (a failed check on one rank must not leave the others waiting in a collective)."""

    @functools.wraps(method)
    def soft(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except self.failureException as exc:
            params = getattr(getattr(self, "_subtest", None), "params", {})
            _FAILED[(_backend(params), False)] += 1
            self.__dict__.setdefault("_soft_failures", []).append(f"{exc} {dict(params)}")
            return None

    return soft


def _checked(method: Any) -> Any:
    """A test method that fails at its end if any of its assertions failed on the way."""

    @functools.wraps(method)
    def checked(self: Any) -> None:
        self.__dict__["_soft_failures"] = []
        method(self)
        failures = self.__dict__.pop("_soft_failures")
        if failures:
            shown = "; ".join(failures[:5])
            raise self.failureException(f"{len(failures)} failed check(s): {shown}")

    return checked


def suite(directory: str, comm_type: type, names: tuple[str, ...] = MODULES, pattern: str | None = None,
          inter_type: type | None = None, fresh: bool = False) -> unittest.TestSuite:
    """Every concrete test class of ``names`` that derives from one of their ``BaseTest*`` mixins, wrapped."""
    if directory not in sys.path:
        sys.path.insert(0, directory)
    loader = unittest.TestLoader()
    if pattern:  # a case-insensitive substring of "module.Class.testMethod" (as pytest's -k reads a word)
        loader.testNamePatterns = ["*" + "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c
                                                 for c in pattern) + "*"]
    arrayimpl = importlib.import_module("arrayimpl")
    _count_cases(arrayimpl)
    _wrap_negative_fills(arrayimpl)
    out = unittest.TestSuite()
    for name in names:
        module = importlib.import_module(name)
        mixins = tuple(v for k, v in vars(module).items() if k.startswith("BaseTest") and isinstance(v, type))
        for attr, cls in sorted(vars(module).items()):
            if (isinstance(cls, type) and attr.startswith("Test") and issubclass(cls, unittest.TestCase)
                    and issubclass(cls, mixins)):
                out.addTests(loader.loadTestsFromTestCase(wrapped(cls, comm_type, inter_type, fresh)))
    return out


def _wrap_negative_fills(arrayimpl: Any) -> None:
    """Let arrayimpl's GPU backends take a negative int for an unsigned type code, as its NumPy backend does.

    mpi4py 4.1.2's tests fill arrays with -1 (e.g. receive buffers before a
    call); its NumPy backend converts the value with ``astype`` (-1 becomes
    255 for ``B``), while its CuPy backends call ``cupy.ndarray.fill(-1)``,
    which recent CuPy refuses for unsigned arrays (OverflowError), and Numba's
    assigns it.  The same conversion is applied here before a GPU backend's
    constructor; nothing else of arrayimpl changes and mpicoll is not involved.
    """
    import numpy  # noqa: PLC0415

    for cls in list(arrayimpl.ArrayBackends):
        if getattr(cls, "backend", None) not in ("cupy", "dlpack-cupy", "numba") or "__init__" not in vars(cls):
            continue
        init = vars(cls)["__init__"]

        @functools.wraps(init)
        def converting(self: Any, arg: Any, typecode: str, *args: Any, __init: Any = init, **kwargs: Any) -> None:
            if isinstance(arg, int) and arg < 0 and numpy.dtype(typecode).kind == "u":
                arg = int(numpy.asarray(arg).astype(typecode))
            __init(self, arg, typecode, *args, **kwargs)

        cls.__init__ = converting


_SUBTESTS: Counter = Counter()   # cases run (one backend and type code inside one test), by backend
_FAILED: Counter = Counter()     # failed checks (or skipped sub-tests), by backend


def _count_cases(arrayimpl: Any) -> None:
    """Count the (backend, type code) cases of arrayimpl's loop, by backend.

    arrayimpl's ``loop`` generator keeps its current class on the module's ``loop``
    name; the counting loop takes that name, so ``loop.array`` stays what the
    tests read.
    """
    original = arrayimpl.loop
    if getattr(original, "counted", False):
        return

    def loop(*args: Any) -> Any:
        for item in original(*args):
            _SUBTESTS[_backend({})] += 1
            yield item

    loop.counted = True  # type: ignore[attr-defined]
    arrayimpl.loop = loop


def _backend(params: dict) -> str:
    """The arrayimpl class the loop is on (the CAI classes reuse the backend names "array" and "numpy")."""
    loop = getattr(sys.modules.get("arrayimpl"), "loop", None)
    return str(getattr(getattr(loop, "array", None), "__name__", None) or params.get("backend", "-"))


class Result(unittest.TextTestResult):
    """A text result that also counts failed sub-tests by buffer backend."""

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:  # noqa: N802
        if err is not None:
            skipped = issubclass(err[0], unittest.SkipTest)
            _FAILED[(_backend(subtest.params), skipped)] += 1
            if not skipped:
                _report(subtest, err)
        super().addSubTest(test, subtest, err)

    def addError(self, test: Any, err: Any) -> None:  # noqa: N802
        _report(test, err)
        super().addError(test, err)

    def addFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        _report(test, err)
        super().addFailure(test, err)


def _report(test: Any, err: Any) -> None:
    """Print a failure at once, on every rank (a later hang or abort would lose the summary)."""
    from mpi4py import MPI

    text = "".join(traceback.format_exception(*err)[-3:])
    print(f"\n[rank {MPI.COMM_WORLD.Get_rank()}] FAILED {test}\n{text}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testdir", help="mpi4py's test folder (default: fetch the installed version's)")
    parser.add_argument("--report", help="write PREFIX<rank>.json")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per test before aborting the job")
    parser.add_argument("-k", help="only test methods whose name contains this")
    parser.add_argument("--modules", default=",".join(MODULES), help="test_cco_* modules (default: %(default)s)")
    parser.add_argument("-v", action="store_true", help="one line per test on rank 0")
    parser.add_argument("--fresh", action="store_true", help="wrap every test's communicators anew (see wrapped())")
    ns = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    directory = ns.testdir or test_dir()
    from mpi4py import MPI

    import mpicoll

    rank = MPI.COMM_WORLD.Get_rank()
    present = tuple(m for m in ns.modules.split(",") if os.path.exists(os.path.join(directory, m + ".py")))
    tests = suite(directory, counted(mpicoll.Comm), present, pattern=ns.k, inter_type=counted(mpicoll.Intercomm),
                  fresh=ns.fresh)
    stream = sys.stderr if rank == 0 else open(os.devnull, "w")  # noqa: SIM115
    runner = unittest.TextTestRunner(stream=stream, verbosity=2 if ns.v else 1, resultclass=Result)

    for test in _flatten(tests):
        test.run = _watched(test.run, ns.timeout)
    t0 = time.time()
    result = runner.run(tests)
    failed = [str(t) for t, _ in result.failures + result.errors]
    if failed:  # every rank says what failed on it (rank 0's output alone would hide the others')
        print(f"rank {rank}: {len(failed)} failed: " + "; ".join(failed[:20]), file=sys.stderr, flush=True)
    if ns.report:
        with open(f"{ns.report}{rank}.json", "w") as fh:
            json.dump({"tests": result.testsRun, "failed": len(failed), "skipped": len(result.skipped),
                       "seconds": time.time() - t0,
                       "backends": {b: {"cases": n, "failed": _FAILED[(b, False)], "skipped": _FAILED[(b, True)]}
                                    for b, n in sorted(_SUBTESTS.items())},
                       "modules": present,
                       "census": {f"{m}|{what}": n for (m, what), n in sorted(CENSUS.items())}}, fh)
    return 0 if result.wasSuccessful() else 1


def _flatten(tests: unittest.TestSuite) -> list[unittest.TestCase]:
    out = []
    for t in tests:
        out.extend(_flatten(t) if isinstance(t, unittest.TestSuite) else [t])
    return out


def _watched(run: Any, timeout: float) -> Any:
    """``run`` with a deadline: past it, print every thread's stack and abort the MPI job."""

    def watched(*args: Any, **kwargs: Any) -> Any:
        faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            return run(*args, **kwargs)
        finally:
            faulthandler.cancel_dump_traceback_later()

    return watched


if __name__ == "__main__":
    sys.exit(main())
