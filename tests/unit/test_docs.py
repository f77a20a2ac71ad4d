"""The documentation's sources of truth: docstrings carry every algorithm's parts, pages exist for everything."""

from __future__ import annotations

import pathlib
import re

import pytest

from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec

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
    assert "Rank order" not in bcast and "op = SUM" not in bcast


def _pages():
    pytest.importorskip("sphinx")
    import sys

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import mpicoll_pages
    finally:
        sys.path.pop(0)
    return mpicoll_pages


# A paragraph's claim about rank order: kept (positive) or not (negative).
NEGATIVE = re.compile(r"not (combined )?in rank order|out of rank order|rank order is lost|loses? (the )?rank order|"
                      r"commutative ops only", re.I)
POSITIVE = re.compile(r"in rank order|keeps? rank order|rank order is kept", re.I)


@pytest.mark.parametrize(("collective", "algorithm"), CASES)
def test_prose_about_rank_order_agrees_with_the_registry(collective, algorithm):
    """What 'When it wins' and 'Limitations' say about rank order holds at every p the tests prove (2..17).

    The registry's claim (:meth:`Algorithm.keeps_order`) is itself proved by test_schedules.py's
    ordered-mode verification in both directions.
    """
    alg = registry.get(collective, algorithm)
    kept = [alg.keeps_order(p) for p in range(2, 18)]
    doc = " ".join((alg.build.__doc__ or "").split())
    for label in ("When it wins:", "Limitations:"):
        para = doc.split(label, 1)[1].split(".  ", 1)[0] if label in doc else ""
        para = re.split(r"(When it wins:|Limitations:|Cost:)", para)[0]
        if NEGATIVE.search(para):
            assert not any(kept), f"{label} says rank order is not kept, the registry keeps it at some p"
        elif POSITIVE.search(para):
            assert all(kept), f"{label} says rank order is kept, the registry does not at every p"


@pytest.mark.parametrize(("collective", "algorithm"), CASES)
def test_pages_state_the_registry_properties_and_no_private_names(collective, algorithm):
    pages = _pages()
    alg = registry.get(collective, algorithm)
    props = pages.properties(collective, algorithm)
    if get_spec(collective).reduces:
        assert alg.order_claim() in props
    assert ("Rotation:" in props) == alg.rotates
    for name in alg.scratch:
        assert f"``{name}``" in props
    text = pages.docstring(collective, algorithm) + props
    assert not re.findall(r"(?<![\w.])_[A-Za-z]\w*", text), "a private name on a page"


def test_order_claims_read_like_the_registry():
    dbt = registry.get("allreduce", "double_binary_tree")
    assert dbt.order_claim().startswith("kept at even p only")
    assert registry.get("allreduce", "ring").order_claim().startswith("not kept")
    assert registry.get("allreduce", "recursive_doubling").order_claim().startswith("kept at every p")
    assert registry.get("reduce_scatter_block", "recursive_halving").order_claim().startswith("kept for p <= 3")


def test_the_scale_page_sentences_match_the_model():
    """docs/scale.rst's sentences about the ring/tree map (nccl-summit) hold for the model."""
    from mpicoll.analysis.presets import NCCL_SUMMIT
    from mpicoll.tools.commands import scale_map

    page = (ROOT / "docs" / "scale.rst").read_text()
    assert "ring wins on 2 and 8 processes and the tree from 64 on, by 34" in page
    grid = scale_map("allreduce", NCCL_SUMMIT, ranks=(2, 8, 64, 512, 4096), sizes=(8, 256 << 20),
                     algorithms=("ring", "double_binary_tree"))
    assert [grid.winner(p, 8) for p in grid.ranks] == ["ring", "ring"] + ["double_binary_tree"] * 3
    ring, tree = (dict(grid.cells[4096, 8])[a] for a in ("ring", "double_binary_tree"))
    assert round(ring / tree) == 34
    for p in grid.ranks:
        slow, fast = grid.cells[p, 256 << 20][1][1], grid.cells[p, 256 << 20][0][1]
        assert slow / fast < 1.2


def test_the_scale_page_ring_wins_with_contention_as_it_says():
    """docs/scale.rst's shared-link sentences hold at 64 and 512 processes (4096 costs minutes: the build draws it)."""
    from mpicoll.analysis.presets import preset
    from mpicoll.tools.commands import scale_map

    page = " ".join((ROOT / "docs" / "scale.rst").read_text().split())
    assert "the ring wins at 256 MiB from 64 processes on (Rabenseifner, the runner-up, 1.6 to 2 times slower)" in page
    assert "at 16 MiB on 64 and 512 processes and at 1 MiB on 64" in page
    grid = scale_map("allreduce", preset("shared-link"), ranks=(64, 512), sizes=(1 << 20, 16 << 20, 256 << 20),
                     algorithms=("ring", "rabenseifner", "recursive_doubling", "double_binary_tree"))
    assert [grid.winner(p, n) for p in grid.ranks for n in grid.sizes] == ["ring"] * 3 + ["rabenseifner"] + ["ring"] * 2
    for p in grid.ranks:
        (first, t1), (second, t2) = grid.cells[p, 256 << 20][:2]
        assert second == "rabenseifner" and 1.6 <= t2 / t1 <= 2.1
    plain = scale_map("allreduce", preset("nccl-summit"), ranks=(64,), sizes=(256 << 20,),
                      algorithms=("ring", "rabenseifner"))
    assert plain.winner(64, 256 << 20) == "rabenseifner"   # without contention the ring does not win there


def test_counts_in_the_tooling_page_are_the_registry_s():
    from mpicoll.tools.commands import count_cases

    algorithms, collectives, cases = count_cases()
    text = " ".join((ROOT / "docs" / "tooling.md").read_text().split())
    assert f"({algorithms} algorithms of {collectives} collectives, {cases:,} cases)" in text


def test_every_page_that_uses_alpha_links_the_glossary():
    pages = [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".rst", ".md") and "_build" not in p.parts]
    using = [p for p in pages if re.search(r"\balpha\b", p.read_text()) and p.name != "glossary.rst"]
    assert using and [str(p) for p in using if "glossary" not in p.read_text()] == []
    pages_ext = _pages()
    assert "glossary" in pages_ext.concept_page("allreduce")


def test_no_hedging_about_what_exists():
    """Pages say what the code does, not "(when present)", "work in progress" or "where available"."""
    hedges = re.compile(r"when present|work in progress|where available|when `?mpicoll\.[\w.]+`? exists", re.I)
    pages = [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".rst", ".md") and "_build" not in p.parts]
    found = [f"{p.name}: {m.group(0)}" for p in [*pages, ROOT / "README.md"] for m in hedges.finditer(p.read_text())]
    assert found == []


def test_every_install_line_names_the_python_it_installs_into():
    """A bare ``pip install ...`` installs into whichever Python the ``pip`` on PATH belongs to (not the
    ``--without-pip`` venv the pages make): every command says ``pip --python .venv/bin/python``, or is
    ``python -m pip`` in a page whose venv has its own pip and is activated first."""
    files = [ROOT / "README.md"] + [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".rst", ".md")
                                    and "_build" not in p.parts]
    bad = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        own_pip = "python3 -m venv .venv && source .venv/bin/activate" in text
        for m in re.finditer(r"\bpip install\s+[-\"'\w.]", text):
            if not (own_pip and re.search(r"(^|[\s`])python -m $", text[max(0, m.start() - 12):m.start()])):
                bad.append(f"{path.relative_to(ROOT)}: ...{text[max(0, m.start() - 20):m.end() + 20]!r}")
    assert bad == []


def test_the_readme_is_read_to_the_end():
    """At most 120 lines: its first screen (what it is, the two commands, where to go), then how to use it, one
    figure and where the docs are; what is supported is on docs/support.rst, which it links."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 120
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[0] == "## Where to go" and "## Use it" in heads
    assert text.count("![") == 1 and "docs/support.rst" in text
