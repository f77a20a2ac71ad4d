"""The documentation's sources of truth: docstrings carry every algorithm's parts, pages exist for everything."""

from __future__ import annotations

import pathlib
import re

import pytest

from mpicoll.families import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = [(c, a) for c in registry.collectives() for a in registry.algorithms(c)]


@pytest.mark.parametrize(("collective", "algorithm"), CASES)
def test_every_algorithm_docstring_has_idea_cost_and_when_it_wins(collective, algorithm):
    doc = registry.get(collective, algorithm).build.__doc__ or ""
    summary = doc.strip().splitlines()[0] if doc.strip() else ""
    assert len(summary) > 20, "a one-line idea first"
    assert "\n    Cost: " in doc or "\nCost: " in doc, "a 'Cost:' paragraph"
    assert "When it wins: " in doc, "a 'When it wins:' paragraph"


@pytest.mark.parametrize("collective", registry.collectives())
def test_every_collective_has_an_algorithm_page(collective):
    page = ROOT / "docs" / "algorithms" / f"{collective}.rst"
    assert f".. mpicoll-algorithms:: {collective}" in page.read_text()


def test_environment_page_lists_every_variable_the_package_reads():
    used = set()
    for path in (ROOT / "mpicoll").rglob("*.py"):
        if "examples" not in path.parts:  # an example documents its own knobs in its docstring
            used |= set(re.findall(r"MPICOLL_[A-Z_]+[A-Z]", path.read_text()))
    # internal: the test harness's and the launcher's own hand-offs to child processes
    used = {v for v in used if not v.startswith(("MPICOLL_TEST", "MPICOLL_JUNIT"))}
    page = (ROOT / "docs" / "environment.rst").read_text()
    assert sorted(v for v in used if f"``{v}``" not in page) == []


def test_generated_sections_have_every_part(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("matplotlib")
    import sys

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import mpicoll_pages as pages
    finally:
        sys.path.pop(0)
    text = pages.algorithm_section(str(tmp_path), "allreduce", "ring")
    assert "**Cost:**" in text and "**When it wins:**" in text and "**Limitations:**" in text
    assert "**Schedule**" in text and "**State after each round**" in text and "Worked example" in text
    assert (tmp_path / "_mpicoll" / "allreduce-ring-p4.png").exists()
    bcast = pages.algorithm_section(str(tmp_path), "bcast", "binomial")
    assert "Reduction order" not in bcast and "op = SUM" not in bcast
