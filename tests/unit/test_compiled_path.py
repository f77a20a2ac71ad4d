"""The compiled round loop (mpicoll/engine/_rounds.c) and blocking call path (run in
mpicoll/program/_callrun.c) do exactly what their Python definitions do.

Both run at one process: messages to oneself on ``MPI.COMM_SELF`` (small ones,
which MPI buffers, so a lone ``Send`` completes before its ``Recv``).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings
from functools import partial

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.comm import dispatch
from mpicoll.comm.comm import Comm
from mpicoll.data.ops import reducer
from mpicoll.engine import blocking, inflight
from mpicoll.engine.recorder import Recorder
from mpicoll.ir.layout import Layout
from mpicoll.ir.schedule import Block, Reduce, Round, Schedule
from mpicoll.program import plancache
from mpicoll.program.callkey import call_key
from mpicoll.program.plan import Plan
from mpicoll.program.state import HOT_FIELDS, CommState

rounds_built = pytest.mark.skipif(blocking.execute is blocking._execute, reason="mpicoll.engine._rounds is not built")
run_built = pytest.mark.skipif(dispatch.run_blocking is dispatch._run_blocking,
                               reason="mpicoll.program._callkey is not built")


def _rounds(log: list) -> tuple[list, dict[str, np.ndarray]]:
    """Rounds of every kind the executor distinguishes, on fresh buffers; steps append to ``log``."""
    a, b, c, d = (np.arange(4, dtype=np.uint8) + 10 * i for i in range(4))
    got = {name: np.zeros(4, np.uint8) for name in ("sendrecv", "recv", "x1", "x2", "spec")}
    bound = [
        ([(a, 0)], [(got["sendrecv"], 0)], [lambda: log.append("after sendrecv")]),   # Sendrecv
        ([(b, 0)], [], []),                                                           # a lone Send ...
        ([], [(got["recv"], 0)], [lambda: log.append("after recv")]),                  # ... then its Recv
        ([(c, 0), (d, 0)], [(got["x1"], 0), (got["x2"], 0)], []),                     # several: exchange
        ([], [], [lambda: log.append("steps only 1"), lambda: log.append("steps only 2")]),
        ([([MPI.buffer(a), MPI.BYTE], 0)], [([MPI.buffer(got["spec"]), MPI.BYTE], 0)], []),   # for_mpi's form
    ]
    return bound, got


@rounds_built
def test_compiled_rounds_do_what_the_python_loop_does():
    results = []
    for run in (blocking._execute, blocking.execute):
        log: list = []
        bound, got = _rounds(log)
        run(bound, MPI.COMM_SELF, 7)
        results.append((log, {k: v.tolist() for k, v in got.items()}))
    assert results[0] == results[1]
    log, got = results[1]
    assert log == ["after sendrecv", "after recv", "steps only 1", "steps only 2"]
    assert got["sendrecv"] == [0, 1, 2, 3] and got["recv"] == [10, 11, 12, 13]
    assert got["x1"] == [20, 21, 22, 23] and got["x2"] == [30, 31, 32, 33] and got["spec"] == [0, 1, 2, 3]


@rounds_built
def test_compiled_rounds_stop_at_an_exception_and_refuse_malformed_rounds():
    log: list = []

    def fail() -> None:
        raise ZeroDivisionError("a user op failed")

    bound = [([], [], [lambda: log.append(1), fail, lambda: log.append(2)]), ([], [], [lambda: log.append(3)])]
    with pytest.raises(ZeroDivisionError, match="a user op failed"):
        blocking.execute(bound, MPI.COMM_SELF, 1)
    assert log == [1]
    with pytest.raises(TypeError, match="round"):
        blocking.execute([([], [])], MPI.COMM_SELF, 1)
    with pytest.raises(TypeError, match="message"):
        blocking.execute([([np.zeros(1)], [], [])], MPI.COMM_SELF, 1)


@rounds_built
def test_out_call_is_the_partial_with_out_by_keyword():
    out_call = blocking._ROUNDS.out_call
    left, right = np.array([1.0, 5.0, -2.0]), np.array([3.0, 4.0, -1.0])
    for ufunc in (np.add, np.maximum, np.minimum):
        got, want = np.zeros(3), np.zeros(3)
        step = out_call(ufunc, left, right, got)
        assert step() is got and "out_call(<ufunc" in repr(step)
        partial(ufunc, left, right, out=want)()
        assert got.tolist() == want.tolist() == ufunc(left, right).tolist()
    with pytest.raises(TypeError, match="no arguments"):
        out_call(np.add, left, right, got)(1)
    with pytest.raises(TypeError, match="4 arguments|exactly 4"):
        out_call(np.add, left, right)
    with pytest.raises(TypeError, match="callable"):
        out_call(None, left, right, got)

    def fail(a, b, out):
        raise ZeroDivisionError(f"{a[0]} {b[0]} {out[0]}")

    with pytest.raises(ZeroDivisionError, match="1.0 3.0 0.0"):
        out_call(fail, left, right, np.zeros(3))()


@pytest.mark.parametrize("compiled", [True, False])
def test_bound_reductions_raise_no_deprecation_warning(compiled, monkeypatch):
    """NumPy 2.4 deprecates ``np.maximum(a, b, out)``: every predefined op's step runs with warnings as errors."""
    if compiled and blocking._OUT_CALL is None:
        pytest.skip("mpicoll.engine._rounds is not built")
    if not compiled:
        monkeypatch.setattr(blocking, "_OUT_CALL", None)
    reduce = Reduce(Block("recv", 0, 1), Block("send", 0, 1), Block("recv", 0, 1))
    schedule = Schedule("allreduce", "test", 0, 1, 1, (Round(steps=(reduce,)),))
    layouts = {"send": Layout.even(2, 1), "recv": Layout.even(2, 1)}
    send, recv = np.array([1, 7]), np.array([4, 2])
    for name in ("SUM", "PROD", "MIN", "MAX", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"):
        for dtype in (np.int64, np.float64) if name[0] not in "LB" else (np.int64,):
            arrays = {"send": send.astype(dtype), "recv": recv.astype(dtype)}
            kernel = reducer(getattr(MPI, name), np.dtype(dtype)).reduce
            (_, _, (step,)), = blocking.bind(schedule, arrays, layouts, kernel, np)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                step()
            want = np.empty_like(arrays["recv"])
            kernel(want, send.astype(dtype), recv.astype(dtype))
            assert arrays["recv"].tolist() == want.tolist(), (name, dtype)
    assert {"MAX": [4, 7], "MIN": [1, 2]} == {  # the kernels themselves, on integers
        name: _reduced(name, send, recv) for name in ("MAX", "MIN")}


def _reduced(name: str, left: np.ndarray, right: np.ndarray) -> list:
    out = np.empty_like(right)
    reducer(getattr(MPI, name), right.dtype).reduce(out, left, right)
    return out.tolist()


def test_for_mpi_gives_numpy_messages_as_buffer_specs_and_keeps_the_rest():
    a, other = np.arange(3, dtype=np.uint8), object()
    steps: list = []
    (sends, recvs, same_steps), = blocking.for_mpi([([(a, 1)], [(other, 0)], steps)])
    (spec, peer), = sends
    assert peer == 1 and spec[1] is MPI.BYTE and spec[0].address == a.ctypes.data and len(spec[0]) == 3
    assert recvs == [(other, 0)] and same_steps is steps


@pytest.fixture(params=["python", "compiled"])
def run(request):
    if request.param == "compiled" and dispatch.run_blocking is dispatch._run_blocking:
        pytest.skip("mpicoll.program._callkey is not built")
    return dispatch._run_blocking if request.param == "python" else dispatch.run_blocking


def _recording(c: mpicoll.Comm) -> list:
    """Record what ``c`` hands to its state's slow path (a miss), and run it as usual."""
    misses: list = []
    slow = c._state.slow_path

    def recorded(state, method, algorithm, args, tag, key):
        misses.append((method, algorithm, len(args), tag))
        assert key == call_key(method, args, algorithm)   # built once, by the hot path, and handed down
        slow(state, method, algorithm, args, tag, key)

    c._state.slow_path = recorded
    return misses


def test_run_runs_a_hit_and_prepares_a_miss_with_the_tag_it_drew(run):
    c = mpicoll.Comm(MPI.COMM_SELF.Dup())
    misses = _recording(c)
    x, y = np.arange(4.0), np.zeros(4)
    tags = c._state.tags
    drawn = tags[1]
    run(c, "Allreduce", "auto", x, y, MPI.SUM)                  # no plan cache yet: a miss, then cached
    sigs = tags[2]                                              # (a tag is number * sigs: see CommState.next_tag)
    assert misses == [("Allreduce", "auto", 3, (drawn + 1) * sigs)] and y.tolist() == x.tolist()
    y[:] = 0
    run(c, "Allreduce", "auto", x, y, MPI.SUM)                  # a hit: it ran, with the next tag
    assert len(misses) == 1 and tags[1] == drawn + 2 and y.tolist() == x.tolist()
    run(c, "Allreduce", "auto", x, np.zeros(4), MPI.SUM)        # other memory: a miss
    assert misses[-1] == ("Allreduce", "auto", 3, (drawn + 3) * sigs)
    tags[1] = tags[0] // tags[2] - 1                            # the tags cycle
    run(c, "Allreduce", "auto", x, y, MPI.SUM)
    assert len(misses) == 2 and tags[1] == 1
    run(c, "Barrier", "auto")
    run(c, "Barrier", "auto")
    assert misses[-1] == ("Barrier", "auto", 0, 2 * sigs) and len(misses) == 3
    c.Free()


def test_run_never_runs_a_cached_plan_with_a_timeout_or_with_requests_outstanding(run):
    x, y = np.arange(4.0), np.zeros(4)
    watched = mpicoll.Comm(MPI.COMM_SELF.Dup(), timeout=30)
    watched.Allreduce(x, y)
    watched_misses = _recording(watched)
    run(watched, "Allreduce", "auto", x, y, MPI.SUM)
    c = mpicoll.Comm(MPI.COMM_SELF.Dup())
    c.Allreduce(x, y)
    misses = _recording(c)
    for outstanding in (inflight.ACTIVE, inflight.ELSEWHERE):   # this thread's requests, or another's
        outstanding.append(object())
        try:
            run(c, "Allreduce", "auto", x, y, MPI.SUM)
        finally:
            outstanding.pop()
    run(c, "Allreduce", "auto", x, y, MPI.SUM)
    assert len(watched_misses) == 1 and len(misses) == 2
    watched.Free()
    c.Free()


@run_built
def test_run_raises_what_the_plan_raises():
    c = mpicoll.Comm(MPI.COMM_SELF.Dup())
    x, y = np.arange(4.0), np.zeros(4)
    c.Allreduce(x, y)
    entry, = c._state.plans.data.values()
    entry.run = lambda tag: 1 / 0
    with pytest.raises(ZeroDivisionError):
        dispatch.run_blocking(c, "Allreduce", "auto", x, y, MPI.SUM)
    with pytest.raises(TypeError, match="run"):
        dispatch.run_blocking(c, "Allreduce")
    c.Free()


def _imported(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = ("import mpicoll.comm.dispatch as c, mpicoll.program.callkey as p, mpicoll.engine.blocking as b; "
            "print(c.run_blocking is c._run_blocking, p.call_key is p._call_key, b.execute is b._execute)")
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True, text=True)


def test_no_extensions_gives_the_python_definitions_and_a_bad_value_is_an_error():
    out = _imported({"MPICOLL_NO_EXTENSIONS": "1"})
    assert out.returncode == 0 and out.stdout.split() == ["True", "True", "True"], out.stderr
    out = _imported({"MPICOLL_NO_EXTENSIONS": "yes"})
    assert out.returncode != 0 and "MPICOLL_NO_EXTENSIONS='yes': expected 1 or 0" in out.stderr


@rounds_built
@run_built
def test_built_extensions_are_used_by_default():
    out = _imported({"MPICOLL_NO_EXTENSIONS": "0"})
    assert out.returncode == 0 and out.stdout.split() == ["False", "False", "False"], out.stderr


@run_built
def test_the_compiled_hot_path_reads_only_declared_fields():
    """What the C module reads (its READS) is declared by the Python classes: a rename fails here."""
    from mpicoll.program import _callkey

    reads = _callkey.READS
    assert set(reads) == {"Comm", "CommState", "Entry", "Recorder", "Plan"}
    assert set(reads["Recorder"]) <= set(Recorder.__slots__)
    assert reads["Comm"] == tuple(Comm.__slots__)
    assert reads["CommState"] == HOT_FIELDS and set(HOT_FIELDS) <= set(CommState.__slots__)
    assert set(reads["Entry"]) <= set(plancache.Entry.__slots__)
    assert set(reads["Plan"]) <= {f.name for f in dataclasses.fields(Plan)}


def _recorded(no_extensions: str) -> str:
    """The flight record of a fresh communicator's calls (a miss, hits, a call with nothing to do, a failure)."""
    code = (
        "import numpy as np, mpicoll\n"
        "from mpi4py import MPI\n"
        "c = mpicoll.Comm(MPI.COMM_WORLD)\n"
        "x, y = np.ones(3), np.zeros(3)\n"
        "for _ in range(3): c.Allreduce(x, y, algorithm='ring')\n"
        "c.Bcast(np.ones(0), root=0)\n"
        "try: c.Bcast(np.ones(2), root=5)\n"
        "except Exception as e: pass\n"
        "print([(s['seq'], s['collective'], s['algorithm'], s['bytes'], s['end'] is not None, s.get('error'))"
        " for s in c._state.recorder.slots()])\n")
    env = dict(os.environ, MPICOLL_NO_EXTENSIONS=no_extensions)
    env.pop("MPICOLL_TRACE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@run_built
def test_the_compiled_hot_path_records_what_the_python_definition_does():
    """Call numbers, names, sizes, ends and errors, written by _callrun.c and by dispatch._run_blocking."""
    recorded = _recorded("0")
    assert recorded == _recorded("1")
    # (a call with nothing to do keeps its method's name; one that raised has its end time, when it raised)
    assert recorded.strip() == str([(i, "allreduce", "ring", 24, True, None) for i in (1, 2, 3)]
                                   + [(4, "bcast", "", -1, True, None), (5, "bcast", "", -1, True, "RootError")])


@run_built
def test_the_compiled_hot_path_follows_a_changed_class():
    """The hit reads its fields by their slots only while the classes are those it saw: a communicator whose
    ``_state`` is a property, and an entry class given a new ``run`` after the first calls, are read as Python
    reads them."""
    ran: list = []
    c = mpicoll.Comm(MPI.COMM_SELF)
    x, y = np.ones(2), np.zeros(2)
    for _ in range(3):
        c.Allreduce(x, y)

    class Wrapped:
        @property
        def _state(self):
            ran.append("state")
            return c._state

    dispatch.run_blocking(Wrapped(), "Allreduce", "auto", x, y, MPI.SUM)
    assert ran == ["state"] and y.tolist() == [1.0, 1.0]
    saved = plancache.Entry.run
    try:
        plancache.Entry.run = property(lambda entry: lambda tag: ran.append(("run", tag)))
        c.Allreduce(x, y)
    finally:
        plancache.Entry.run = saved
    assert ran[1][0] == "run"
    c.Allreduce(x, y)          # the member again
    assert len(ran) == 2


_HIT = """
import numpy as np, mpicoll, collections, itertools
from mpi4py import MPI
c = mpicoll.Comm(MPI.COMM_SELF)
x, y = np.ones(2), np.zeros(2)
call = lambda: c.Allreduce(x, y)
call(); call()
collections.deque(itertools.starmap(call, itertools.repeat((), 200)), maxlen=0)
"""


@run_built
@pytest.mark.skipif(subprocess.run(["which", "valgrind"], capture_output=True).returncode != 0,
                    reason="valgrind is not installed")
def test_a_hit_reads_its_fields_without_the_generic_attribute_lookup(tmp_path):
    """The compiled hit reads the slots of the classes in READS directly: no ``PyObject_GetAttr`` or
    ``PyObject_SetAttr`` from ``run`` (through ``run_summing``, which ``Allreduce`` calls; they were a sixth
    of a cached call's own instructions)."""
    out = tmp_path / "cg.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--quiet", "--compress-strings=no", "--compress-pos=no",
                    "--collect-atstart=no", "--toggle-collect=deque_extend", f"--callgrind-out-file={out}",
                    sys.executable, "-c", _HIT], check=True, timeout=600, capture_output=True,
                   env=dict(os.environ, HWLOC_COMPONENTS="-x86", MPICOLL_NO_EXTENSIONS="0"))
    calls: dict[str, int] = {}
    caller = callee = None
    for line in out.read_text().splitlines():
        if line.startswith("fn="):
            caller = line.split(None, 1)[0][3:] if " " not in line else line[3:]
        elif line.startswith("cfn="):
            callee = line[4:]
        elif line.startswith("calls=") and caller in ("run", "run_call", "run_summing") and callee is not None:
            calls[callee] = calls.get(callee, 0) + int(line[6:].split()[0])
    assert calls, "callgrind saw no call from the compiled run"
    assert sum(calls.get(name, 0) for name in ("PyObject_GetAttr", "PyObject_SetAttr",
                                               "PyObject_VectorcallMethod")) == 0, calls
