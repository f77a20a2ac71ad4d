"""The lock of a thread's queue of requests (mpicoll.engine.inflight.new_guard): the compiled engine's Guard behaves
as the threading.Lock it stands for, which the same tests check."""

from __future__ import annotations

import threading
import time

import pytest

from mpicoll.engine import direct, inflight

KINDS = [threading.Lock] + ([direct.MODULE.Guard] if direct.MODULE is not None else [])


def test_the_queues_use_the_compiled_guard_where_the_compiled_engine_runs():
    guard = inflight.guard()
    assert type(guard) is type(inflight.new_guard())
    assert (type(guard).__name__ == "Guard") == (direct.MODULE is not None)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_taken_given_back_and_refused_while_held(kind):
    guard = kind()
    assert not guard.locked()
    assert guard.acquire(False) is True and guard.locked()
    assert guard.acquire(False) is False
    assert guard.acquire(blocking=False) is False
    start = time.perf_counter()
    assert guard.acquire(timeout=0.05) is False
    assert time.perf_counter() - start >= 0.04
    guard.release()
    assert not guard.locked()
    with pytest.raises(RuntimeError):
        guard.release()
    with guard:
        assert guard.locked()
    assert not guard.locked()
    with pytest.raises(ValueError):
        guard.acquire(False, 1.0)
    with pytest.raises(ValueError):
        guard.acquire(timeout=-2)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_blocked_thread_waits_without_the_gil_and_gets_it_when_given_back(kind):
    guard = kind()
    guard.acquire()
    order: list[str] = []

    def waiter() -> None:
        with guard:
            order.append("waiter")

    t = threading.Thread(target=waiter)
    t.start()
    for _ in range(20):         # the waiter blocks in acquire, and this thread still runs (the GIL is free)
        time.sleep(0.005)
        order.append("main")
    assert "waiter" not in order
    guard.release()
    t.join(10)
    assert not t.is_alive() and order[-1] == "waiter" and not guard.locked()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_timed_wait_ends_when_given_back_in_time(kind):
    guard = kind()
    guard.acquire()
    timer = threading.Timer(0.05, guard.release)
    timer.start()
    assert guard.acquire(timeout=10) is True
    timer.join()
    guard.release()
