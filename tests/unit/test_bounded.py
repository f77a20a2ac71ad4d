"""The one eviction rule of mpicoll's caches (mpicoll.bounded): bounds on entries and bytes, a second
chance for an entry used since the last sweep, first in first out for entries that cannot say."""

from __future__ import annotations

from mpicoll.bounded import Bounded


class Entry:
    def __init__(self) -> None:
        self.used = False


def test_at_most_so_many_entries_the_oldest_unused_first():
    cache = Bounded(3)
    entries = {k: Entry() for k in "abcd"}
    for k in "abc":
        cache.keep(k, entries[k])
    cache.get("a")                                   # a used: a second chance
    cache.keep("d", entries["d"])
    assert list(cache) == ["c", "d", "a"]            # a moved to the young end, b (unused) went
    assert entries["a"].used is False                # unmarked when it was given its chance


def test_bytes_bound_and_an_entry_too_large_alone():
    cache = Bounded(10, nbytes=100)
    assert cache.keep("a", Entry(), 60) and cache.keep("b", Entry(), 30)
    assert cache.held == 90
    assert cache.keep("c", Entry(), 30)              # 120 > 100: a goes
    assert list(cache) == ["b", "c"] and cache.held == 60
    assert not cache.keep("huge", Entry(), 101)      # never kept, nothing evicted for it
    assert list(cache) == ["b", "c"] and cache.held == 60


def test_replacing_a_key_counts_its_bytes_once():
    cache = Bounded(4, nbytes=100)
    cache.keep("a", Entry(), 40)
    cache.keep("a", Entry(), 50)
    assert cache.held == 50 and len(cache) == 1
    cache.discard("a")
    cache.discard("a")
    assert cache.held == 0 and not cache.data


def test_entries_without_used_go_first_in_first_out():
    cache = Bounded(2)
    for k in "abc":
        cache.keep(k, object())
    cache.get("b")
    cache.keep("d", object())
    assert list(cache) == ["c", "d"]


def test_data_is_a_plain_dict_the_compiled_path_can_read():
    cache = Bounded(2)
    cache.keep("a", Entry())
    assert type(cache.data) is dict and cache.data["a"] is cache.get("a")
    cache.clear()
    assert cache.held == 0 and not cache.data and not cache.sizes
