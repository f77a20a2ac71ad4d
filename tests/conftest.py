"""Shared by every test folder: environment changes reach mpicoll.

mpicoll reads its ``MPICOLL_*`` variables once (:mod:`mpicoll.config`); a
program that changes them calls :func:`mpicoll.config.reload`.  Tests change
them through ``monkeypatch``, so ``monkeypatch`` here does what such a program
does: each ``setenv``/``delenv`` is followed by a reload, and so is the undoing
of every change when the test ends.
"""

from __future__ import annotations

import pytest

from mpicoll import config


class _Reloading:
    """``pytest.MonkeyPatch`` whose environment changes are followed by :func:`mpicoll.config.reload`."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self._patch = patch

    def setenv(self, name: str, value: str, prepend: str | None = None) -> None:
        self._patch.setenv(name, value, prepend)
        config.reload()

    def delenv(self, name: str, raising: bool = True) -> None:
        self._patch.delenv(name, raising)
        config.reload()

    def __getattr__(self, name: str):
        return getattr(self._patch, name)


@pytest.fixture
def monkeypatch(monkeypatch: pytest.MonkeyPatch):
    yield _Reloading(monkeypatch)
    monkeypatch.undo()
    config.reload()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the tests marked slow (long commands)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: pytest --run-slow runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
