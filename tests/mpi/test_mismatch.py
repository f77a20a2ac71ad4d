"""Mismatched collective calls, written as a user writes them: every rank raises ``mpicoll.MismatchError``
naming what the ranks called, within about a second; a late rank and an MPI-legal pair of datatypes of one type
signature pass (the always-on check of :mod:`mpicoll.engine.mismatch`)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

import mpicoll
from mpicoll.engine import mismatch

from conftest import WORLD, check

R, P = WORLD.rank, WORLD.size
ODD = 1 % P          # the rank that calls otherwise
#: seconds within which every rank must have raised (the check's own delay is about STALL + 2 TICK)
WITHIN = 5.0

pytestmark = [pytest.mark.skipif(P < 2, reason="a mismatch needs two ranks"),
              pytest.mark.skipif(MPI.Query_thread() < MPI.THREAD_MULTIPLE,
                                 reason="the watcher needs MPI_THREAD_MULTIPLE")]


def _outcome(program, comm: mpicoll.Comm | None = None) -> tuple[str, float, str]:
    """Run ``program(comm)`` on a fresh communicator (by default a duplicate of WORLD's), then a Barrier on it:
    ``(what ended it, seconds, text)``, what being "returned", or the exception's class name."""
    comm = comm or mpicoll.Comm(WORLD.Dup())
    comm.Allreduce(np.ones(1), np.empty(1))        # a correct call first (the communicator's first is special)
    WORLD.Barrier()
    t0 = time.monotonic()
    try:
        program(comm)
        comm.Barrier()          # the next call: a rank whose own part completed raises here
        outcome = ("returned", time.monotonic() - t0, "")
    except MPI.Exception as exc:
        outcome = (type(exc).__name__, time.monotonic() - t0, str(exc))
    comm.Free()
    return outcome


def _every_rank_raises(program, *words: str) -> None:
    kind, seconds, text = _outcome(program)
    check(kind == "MismatchError" and seconds < WITHIN, f"rank {R}: {kind} after {seconds:.2f} s: {text}")
    check(all(word in text for word in words), f"rank {R}: the message lacks {words}: {text}")
    check(isinstance(mpicoll.MismatchError("x"), MPI.Exception) and mpicoll.MismatchError("x").Get_error_class()
          == MPI.ERR_ARG, "MismatchError is an MPI.Exception of class MPI.ERR_ARG")


def test_bcast_against_allreduce():
    x, y = np.full(4, R + 1.0), np.zeros(4)
    _every_rank_raises(lambda c: c.Bcast(x, root=ODD) if R == ODD else c.Allreduce(x, y), "Bcast(", "Allreduce(")


def test_a_skipped_call():
    x, y = np.full(4, R + 1.0), np.zeros(4)

    def program(c):
        if R != ODD:
            c.Allreduce(x, y)      # rank ODD goes on to the Barrier
    _every_rank_raises(program, "Allreduce(", "Barrier(")


def test_counts_differ():
    n = 8 if R == ODD else 4
    _every_rank_raises(lambda c: c.Allreduce(np.ones(n), np.zeros(n)), "count=8", "count=4")


def test_ops_differ():
    x, y = np.full(4, R + 1.0), np.zeros(4)
    _every_rank_raises(lambda c: c.Allreduce(x, y, op=MPI.MAX if R == 0 else MPI.SUM), "op=MAX", "op=SUM")


def test_type_signatures_differ():
    def program(c):
        if R == ODD:
            c.Allreduce(np.ones(8, np.float32), np.zeros(8, np.float32))
        else:
            c.Allreduce(np.ones(4), np.zeros(4))
    _every_rank_raises(program, "float32")


@pytest.mark.skipif(P < 2, reason="two roots")
def test_roots_differ():
    """Every rank's part may complete (a root only sends): the message left unreceived is found, and every
    rank raises at its next call on the communicator."""
    x = np.full(4, R + 1.0)

    def program(c):
        c.Bcast(x, root=ODD if R == ODD else 0)
        time.sleep(3 * mismatch.STALL)       # (the program does something else meanwhile)
    _every_rank_raises(program, "root=")


def test_nonblocking_against_blocking():
    x, y = np.full(4, R + 1.0), np.zeros(4)
    _every_rank_raises(lambda c: c.Iallreduce(x, y).Wait() if R == ODD else c.Allreduce(x, y), "nonblocking")


def test_a_request_waited_by_mpi4py_raises_too():
    """mpi4py's Waitall raises MPI's ``MPI_ERR_IN_STATUS``, the request's status holding ``MPI_ERR_ARG`` (Open MPI;
    MPICH gives a generalized request's error as ``MPI_ERR_OTHER``); the next call on the communicator raises the
    MismatchError."""
    x, y = np.full(4, R + 1.0), np.zeros(4)
    statuses = [MPI.Status()]

    def program(c):
        req = c.Iallreduce(x, y, op=MPI.MAX if R == 0 else MPI.SUM)
        try:
            MPI.Request.Waitall([req], statuses)
        except MPI.Exception as exc:
            in_status = MPI.Get_error_class(statuses[0].Get_error())
            assert exc.Get_error_class() == MPI.ERR_IN_STATUS and in_status in (MPI.ERR_ARG, MPI.ERR_OTHER), exc
    _every_rank_raises(program, "op=MAX")


def test_a_persistent_start_against_another_call():
    x, y = np.full(4, R + 1.0), np.zeros(4)

    def program(c):
        req = c.Allreduce_init(x, y) if R == ODD else c.Bcast_init(x, root=0)
        try:
            req.Start()
            req.Wait()
        finally:
            req.Free()
    _every_rank_raises(program, "persistent")


def test_a_late_rank_is_never_reported():
    x, y = np.full(4, R + 1.0), np.zeros(4)

    def program(c):
        if R == ODD:
            time.sleep(6 * mismatch.STALL)
        c.Allreduce(x, y)
    kind, seconds, text = _outcome(program)
    check(kind == "returned" and np.all(y == P * (P + 1) / 2), f"rank {R}: {kind} {text} {y}")


def test_datatypes_of_one_type_signature_pass():
    """MPI matches type signatures, not datatypes: two doubles as one element of a derived type on one rank, four
    doubles on the others."""
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    x = np.full(4, R + 1.0)

    def program(c):
        if R == ODD:
            c.Bcast([x, 2, pair], root=0)
        else:
            c.Bcast([x, 4, MPI.DOUBLE], root=0)
    try:
        kind, seconds, text = _outcome(program)
    finally:
        pair.Free()
    check(kind == "returned" and np.all(x == 1.0), f"rank {R}: {kind} {text} {x}")


def test_the_communicator_stays_unusable_and_others_work():
    comm = mpicoll.Comm(WORLD.Dup())
    other = mpicoll.Comm(WORLD.Dup())
    x, y = np.full(4, R + 1.0), np.zeros(4)
    raised = []
    for _ in range(2):
        try:
            comm.Allreduce(x, y, op=MPI.MAX if R == 0 else MPI.SUM)
        except mpicoll.MismatchError as exc:
            raised.append(exc)
    other.Allreduce(x, y)
    check(len(raised) == 2 and np.all(y == P * (P + 1) / 2), f"rank {R}: {raised} {y}")
    comm.Free()
    other.Free()


def test_signature_bits_fit_the_tag_range():
    assert mismatch.signature_bits(2**31 - 1) == 4096
    assert mismatch.signature_bits(2**29 - 1) == 4096      # MPICH's
    assert 1 < mismatch.signature_bits(2**19 - 1) < 4096   # a network's smaller range: fewer bits
    assert mismatch.signature_bits(2**15 - 1) == 2         # MPI's least: one bit (the notes still compare all)
    assert mismatch.signature_bits(2**13) == 1             # too few numbers for any: none


def test_a_small_tag_range_still_catches_a_wait(monkeypatch):
    """With MPI's least tag range (``2**15 - 1``) the tag holds one signature bit: another collective, or a
    skipped call, still makes a rank wait, and the notes (which compare whole signatures) catch it."""
    from mpicoll import config
    monkeypatch.setenv("MPICOLL_TAG_UB", str(2**15 - 1))
    config.reload()
    try:
        comm = mpicoll.Comm(WORLD.Dup())
        per_kind, _, sigs = comm._state.tags
        check(sigs == 2 and 3 * per_kind <= 2**15 - 1, f"rank {R}: tags {comm._state.tags}")
        x, y = np.full(4, R + 1.0), np.zeros(4)
        comm.Allreduce(x, y)
        check(np.all(y == P * (P + 1) / 2), f"rank {R}: {y}")
        comm.Free()
        _every_rank_raises(lambda c: c.Bcast(x, root=ODD) if R == ODD else c.Allreduce(x, y), "Bcast(",
                           "Allreduce(")
    finally:
        monkeypatch.delenv("MPICOLL_TAG_UB")
        config.reload()


def test_object_collectives():
    """``comm.bcast`` on one rank, ``comm.allgather`` on the others: the buffer collectives they run differ;
    the message says where the program called them."""
    _every_rank_raises(lambda c: c.bcast(R, root=ODD) if R == ODD else c.allgather(R), "test_mismatch.py:")


def test_neighbourhood_collectives():
    """On a ring, one rank calls ``Neighbor_alltoall`` where the others call ``Neighbor_allgather``: the same
    bytes between the same neighbours, another collective.  (Their counts are agreed pair by pair, not by
    every rank, so the signature leaves them out: a longer message than a rank expects raises there.)"""
    ring = WORLD.Create_cart([P], periods=[True])
    comm = mpicoll.Comm(ring)
    x, y = np.full(2, R + 1.0), np.zeros(2)

    def program(c):
        if R == ODD:
            c.Neighbor_alltoall(x, y)
        else:
            c.Neighbor_allgather(x[:1], y)
    kind, seconds, text = _outcome(program, comm)     # (which frees ring: comm is ring, as mpicoll's)
    check(kind == "MismatchError" and "Neighbor_alltoall(" in text and "Neighbor_allgather(" in text,
          f"rank {R}: {kind} after {seconds:.2f} s: {text}")



def _intercomm() -> mpicoll.Intercomm:
    """An intercommunicator of the even and the odd world ranks."""
    world = mpicoll.Comm(WORLD)
    half = world.Split(R % 2, R)
    inter = half.Create_intercomm(0, world, 1 - R % 2)
    half.Free()
    return inter


@pytest.mark.parametrize("form", ["blocking", "nonblocking", "persistent"])
def test_intercommunicator_groups_call_different_collectives(form):
    """The even ranks' group calls ``Allreduce`` on an intercommunicator where the odd ranks' calls
    ``Allgather`` (blocking, ``I*`` or ``*_init``): every rank of both groups raises, naming both calls."""
    x, y = np.full(2, R + 1.0), np.zeros(2 * P)
    method = "Allreduce" if R % 2 == 0 else "Allgather"

    def program(inter):
        args = (x, y[:2]) if method == "Allreduce" else (x, y[:2 * (P // 2 if R % 2 == 0 else (P + 1) // 2)])
        if form == "blocking":
            getattr(inter, method)(*args)
        elif form == "nonblocking":
            getattr(inter, "I" + method.lower())(*args).Wait()
        else:
            request = getattr(inter, method + "_init")(*args)
            request.Start()
            try:
                request.Wait()
            finally:
                request.Free()
    inter = _intercomm()
    inter.Allreduce(np.ones(1), np.empty(1))        # a correct call first
    t0 = time.monotonic()
    try:
        program(inter)
        inter.Barrier()
        kind, text = "returned", ""
    except MPI.Exception as exc:
        kind, text = type(exc).__name__, str(exc)
    seconds = time.monotonic() - t0
    inter.Free()
    check(kind == "MismatchError" and seconds < WITHIN and "Allreduce on an intercommunicator" in text
          and "Allgather on an intercommunicator" in text, f"rank {R}: {kind} after {seconds:.2f} s: {text}")
    # each rank named by its group too, as the program knows it (the error's own rank first)
    check(text.split(":")[0].endswith(f"(rank {R // 2} of this group)") and "of the remote group) called" in text,
          f"rank {R}: {text}")


def test_object_collectives_given_an_algorithm():
    """``comm.bcast(..., algorithm="binomial")`` on one rank, ``comm.allgather(..., algorithm="ring")`` on the
    others: they run on the object engine (messages taken by matched probe), and every rank raises all the same,
    naming both calls."""
    _every_rank_raises(lambda c: c.bcast(R, root=ODD, algorithm="binomial") if R == ODD
                       else c.allgather(R, algorithm="ring"), "bcast(algorithm=binomial", "allgather(algorithm=ring")


@pytest.mark.parametrize("n", [4, 8192])     # gathered; scattered (its composed plan carries its signature)
@pytest.mark.parametrize("case", ["one rank reproducible", "counts differ"])
def test_reproducible_sums(case, n):
    """``reproducible=True`` on one rank where the others make the plain call, or reproducible sums of different
    counts: a small reproducible sum runs mpicoll's own buffer collectives, which carry their signatures, and a
    larger one's composed plan carries its own (the collective and the count), so every rank raises all the
    same."""
    if case == "one rank reproducible":
        x, y = np.full(n, R + 1.0), np.zeros(n)
        _every_rank_raises(lambda c: c.Allreduce(x, y, reproducible=(R == ODD)))
    else:
        n = 2 * n if R == ODD else n
        _every_rank_raises(lambda c: c.Allreduce(np.ones(n), np.zeros(n), reproducible=True))
