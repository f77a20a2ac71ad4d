"""Shared pieces of the unit tests (no MPI)."""

from __future__ import annotations

import pytest

from mpicoll.ir.schedule import Block, Timeline


def in_place_hazard(rank: int, size: int):
    """A pairwise all-reduce that is right out of place, but in place reads its own part after overwriting it.

    Its scratch buffers are ``incoming`` and ``acc`` (the tests register it declaring them).
    """
    tl = Timeline()
    peer = rank ^ 1
    tl.send(0, peer, Block("send", 0, 1))
    tl.recv(0, peer, Block("incoming", 0, 1))
    lo, hi = ("incoming", "send") if peer < rank else ("send", "incoming")
    tl.reduce(0, Block("recv", 0, 1), Block(lo, 0, 1), Block(hi, 0, 1))
    tl.reduce(0, Block("acc", 0, 1), Block("send", 0, 1), Block("incoming", 0, 1))
    return 1, tl.rounds()


@pytest.fixture
def in_place_hazard_build():
    """The build function of :func:`in_place_hazard` (a deliberately broken schedule)."""
    return in_place_hazard
