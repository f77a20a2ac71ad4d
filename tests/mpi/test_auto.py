""""auto" decides from rank 0's tuning and calibration data on every rank: ranks given different files agree."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.families import registry
from mpicoll.selection import choose as selection

from conftest import WORLD, check


def _files(tmp_path, monkeypatch, tuning: dict | None, calibration: dict | str | None) -> None:
    """This rank's own tuning and calibration files (``None``: none), in the environment; local caches dropped."""
    mine = tmp_path / f"rank{WORLD.rank}"
    mine.mkdir(parents=True, exist_ok=True)
    if tuning is not None:
        (mine / "tuning.json").write_text(json.dumps(tuning))
    if calibration is not None:
        text = calibration if isinstance(calibration, str) else json.dumps(calibration)
        (mine / "calibration.json").write_text(text)
    monkeypatch.setenv("MPICOLL_TUNING", str(mine / "tuning.json"))
    monkeypatch.setenv("MPICOLL_CALIBRATION", str(mine / "calibration.json"))
    selection.reload_tuning()


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.delenv("MPICOLL_ALGO", raising=False)
    yield
    monkeypatch.undo()
    selection.reload_tuning()


def _used(comm: mpicoll.Comm) -> str:
    """The algorithm of the one plan ``comm`` has cached."""
    plan, = comm._state.plans.plans()
    return plan.schedule.algorithm


def test_ranks_with_different_tuning_files_run_rank_0s_choice(tmp_path, monkeypatch, fresh):
    p = WORLD.size
    if p < 2:
        pytest.skip("needs 2 processes")
    algs = [a for a in registry.algorithms("allreduce") if a != "hierarchical"]
    pick = algs[WORLD.rank % len(algs)]               # every rank's file names another algorithm
    _files(tmp_path, monkeypatch, {"allreduce": {str(p): [[None, pick]]}}, None)
    check(selection.tuned_choice("allreduce", p, 1024) == pick, "each rank reads its own file")
    comm = mpicoll.Comm(WORLD.Dup())
    x = np.arange(128, dtype=np.float64) + WORLD.rank
    y = np.empty_like(x)
    comm.Allreduce(x, y, op=MPI.SUM)
    check(np.array_equal(y, p * np.arange(128) + p * (p - 1) / 2), "the result")
    used = WORLD.allgather(_used(comm))
    check(used == [algs[0]] * p, f"every rank runs rank 0's tuned {algs[0]}, got {used}")
    comm.Free()


def test_ranks_with_different_calibrations_cost_with_rank_0s(tmp_path, monkeypatch, fresh):
    p = WORLD.size
    if p < 2:
        pytest.skip("needs 2 processes")
    # rank 0: latency-bound (a huge alpha); the others: bandwidth-bound (a huge beta)
    mine = ({"alpha": 1e-3, "beta": 1e-12, "gamma": 1e-12} if WORLD.rank == 0 else
            {"alpha": 1e-12, "beta": 1e-6, "gamma": 1e-6})
    _files(tmp_path, monkeypatch, None, mine)
    comm = mpicoll.Comm(WORLD.Dup())
    sizes = [8, 1 << 12, 1 << 16, 1 << 20, 1 << 24]
    colls = ["allreduce", "bcast", "reduce", "allgather", "alltoall", "reduce_scatter_block"]
    agreed = comm._state.agreed
    picks = [selection.choose(c, "auto", size=p, nbytes=n, count=n // 8, agreed=agreed)[0] for c in colls
             for n in sizes]
    everyone = WORLD.allgather(picks)
    check(all(other == everyone[0] for other in everyone), f"ranks disagree: {everyone}")
    shared = comm._state.agreed
    check(shared.machine.alpha == 1e-3 and "rank0" in shared.source, f"rank 0's constants: {shared.source}")
    local = [selection.choose(c, "auto", size=p, nbytes=n, count=n // 8)[0] for c in colls for n in sizes]
    if WORLD.rank == 0:
        check(local == picks, "rank 0 decides as its own file says")
    else:
        check(True)
    x = np.ones(1 << 14)
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
    check(np.all(x == p), "the result")
    comm.Free()


def test_a_malformed_calibration_on_rank_0_fails_every_rank(tmp_path, monkeypatch, fresh):
    """Wrapping is where the ranks agree on rank 0's data: every rank raises there, naming the file."""
    if WORLD.size < 2:
        pytest.skip("needs 2 processes")
    _files(tmp_path, monkeypatch, None, "{not json" if WORLD.rank == 0 else {"alpha": 1e-6, "beta": 1e-9,
                                                                             "gamma": 1e-9})
    dup = WORLD.Dup()
    with pytest.raises(ValueError, match="rank 0: .*calibration.json"):
        mpicoll.Comm(dup)
    check(True)
    dup.Free()


def test_agreement_is_once_per_communicator_and_new_communicators_agree_again(tmp_path, monkeypatch, fresh):
    p = WORLD.size
    if p < 2:
        pytest.skip("needs 2 processes")
    _files(tmp_path, monkeypatch, {"bcast": {str(p): [[None, "linear"]]}}, None)
    comm = mpicoll.Comm(WORLD.Dup())
    buf = np.arange(16.0) if WORLD.rank == 0 else np.zeros(16)
    comm.Bcast(buf, root=0)
    check(np.array_equal(buf, np.arange(16.0)) and _used(comm) == "linear", "tuned bcast")
    # rank 0 tunes again: the communicator keeps what it agreed on; one made after a reload agrees anew,
    # and communicators derived from the old one inherit the old data
    if WORLD.rank == 0:
        (tmp_path / "rank0" / "tuning.json").write_text(json.dumps({"bcast": {str(p): [[None, "binomial"]]}}))
    WORLD.Barrier()
    selection.reload_tuning()
    check(comm._state.agreed.bands("bcast", p) == ((None, "linear"),), "kept")
    check(comm.Dup()._state.agreed.bands("bcast", p) == ((None, "linear"),), "inherited")
    again = mpicoll.Comm(WORLD.Dup())
    check(again._state.agreed.bands("bcast", p) == ((None, "binomial"),), "agreed again")
    buf[...] = np.arange(16.0) if WORLD.rank == 0 else 0
    again.Bcast(buf, root=0)
    check(np.array_equal(buf, np.arange(16.0)) and _used(again) == "binomial", "a new communicator's choice")
    comm.Free()
    again.Free()


def test_first_auto_call_with_a_timeout_agrees_nonblocking(tmp_path, monkeypatch, fresh):
    if WORLD.size < 2:
        pytest.skip("needs 2 processes")
    _files(tmp_path, monkeypatch, None, None)
    comm = mpicoll.Comm(WORLD.Dup(), timeout=60)
    x = np.full(10, float(WORLD.rank))
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
    check(np.all(x == WORLD.size * (WORLD.size - 1) / 2), "the result")
    check(comm._state.agreed.machine is not None, "agreed")
    comm.Free()

