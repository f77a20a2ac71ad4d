"""Every MPICOLL_* variable is parsed in one place (mpicoll.config): malformed values are errors naming the
variable, never silently ignored, and reload() makes changes reach mpicoll."""

from __future__ import annotations

import pytest

from mpicoll import config
from mpicoll.selection.choose import forced_by_environment


@pytest.mark.parametrize("value", ["allredcue=ring", "=ring", "allreduce=", "ring", "allreduce=no_such"])
def test_a_malformed_algo_is_an_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("MPICOLL_ALGO", value)
    with pytest.raises(ValueError, match="MPICOLL_ALGO"):
        forced_by_environment("allreduce")


def test_algo_forces_the_first_item_of_each_collective(monkeypatch):
    monkeypatch.setenv("MPICOLL_ALGO", " Allreduce = Ring , bcast=binomial, allreduce=linear")
    assert forced_by_environment("allreduce") == "ring" and forced_by_environment("bcast") == "binomial"
    assert forced_by_environment("gather") is None


@pytest.mark.parametrize("name,value", [("MPICOLL_TIMEOUT", "-1"), ("MPICOLL_TIMEOUT", "nan"),
                                        ("MPICOLL_TIMEOUT", "inf"), ("MPICOLL_TIMEOUT", "soon"),
                                        ("MPICOLL_DEBUG", "yes"), ("MPICOLL_DEBUG", "3"),
                                        ("MPICOLL_NODE_SIZE", "0"), ("MPICOLL_GPU_TRANSPORT", "nvlink"),
                                        ("MPICOLL_CUDA_AWARE", "true"), ("MPICOLL_GPU_SEGMENT", "1M"),
                                        ("MPICOLL_NO_EXTENSIONS", "yes"), ("MPICOLL_PROGRESS", "off")])
def test_malformed_values_are_errors_naming_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        config.current()


def test_values_and_reload(monkeypatch):
    monkeypatch.setenv("MPICOLL_DEBUG", " 2")
    monkeypatch.setenv("MPICOLL_TIMEOUT", "0")
    monkeypatch.setenv("MPICOLL_NODE_SIZE", "4")
    settings = config.current()
    assert settings.debug == 2 and settings.timeout is None and settings.node_size == 4
    generation = config.generation()
    config.reload()
    assert config.generation() == generation + 1 and config.current() == settings
    assert config.read({"MPICOLL_TIMEOUT": "2.5"}).timeout == 2.5


def test_progress_is_on_unless_set_to_0():
    assert config.read({}).progress and config.read({"MPICOLL_PROGRESS": "1"}).progress
    assert not config.read({"MPICOLL_PROGRESS": "0"}).progress


def test_reproducible_is_off_unless_set_to_1():
    assert not config.read({}).reproducible and not config.read({"MPICOLL_REPRODUCIBLE": "0"}).reproducible
    assert config.read({"MPICOLL_REPRODUCIBLE": "1"}).reproducible
    with pytest.raises(ValueError, match="MPICOLL_REPRODUCIBLE"):
        config.read({"MPICOLL_REPRODUCIBLE": "yes"})


def test_trace_variables():
    assert config.read({}).trace is None and config.read({}).trace_calls == 64
    assert config.read({"MPICOLL_TRACE": "/tmp/t", "MPICOLL_TRACE_CALLS": "0"}).trace == "/tmp/t"
    assert config.read({"MPICOLL_TRACE_CALLS": "0"}).trace_calls == 0
    for bad in ("-1", "many", "1.5"):
        with pytest.raises(ValueError, match="MPICOLL_TRACE_CALLS"):
            config.read({"MPICOLL_TRACE_CALLS": bad})
