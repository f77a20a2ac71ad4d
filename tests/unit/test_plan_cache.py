"""The plan cache's eviction: bounded, and a plan used since the last sweep gets a second chance."""

from __future__ import annotations

from mpicoll.program.plan import NOTHING
from mpicoll.program.plancache import PlanCache


def test_a_used_plan_outlives_an_unused_older_one():
    cache = PlanCache(entries=2)
    cache.put(("a",), None, [], [])
    cache.put(("b",), None, [], [])
    assert cache.get(("a",)) is NOTHING        # "a" is used: it survives the next eviction
    cache.put(("c",), None, [], [])
    assert len(cache) == 2
    assert cache.get(("b",)) is None and cache.get(("a",)) is NOTHING and cache.get(("c",)) is NOTHING


def test_eviction_ends_even_when_every_plan_was_used():
    cache = PlanCache(entries=3)
    for name in "abc":
        cache.put((name,), None, [], [])
        cache.get((name,))
    for name in "defgh":
        cache.put((name,), None, [], [])
        assert len(cache) == 3
    assert cache.get(("h",)) is NOTHING          # the newest entry is never its own victim


def test_replacing_a_key_keeps_one_entry():
    cache = PlanCache(entries=4)
    cache.put(("a",), None, [], [])
    cache.put(("a",), None, [], [])
    assert len(cache) == 1
