"""What the pages say is supported is what exists, and what exists is not said to be missing.

``docs/support.rst`` is the one page that lists what mpicoll supports; its tables are generated
(``docs/_ext/mpicoll_support.py``).  The other pages and the README name collectives, algorithms and
command-line options in passing: every one they name must exist.  The checks read the README and every
page under ``docs/``:

* every ``algorithm="X"`` next to a call, ``MPICOLL_ALGO=coll=alg``, ``mpicoll.schedules("coll", "alg")``,
  ``simulate``/``verify``/``trace`` of ``("coll", "alg")``, ``mpicoll.algorithms("coll")`` and
  ``python -m mpicoll show|verify|draw coll alg`` names a registered collective and algorithm;
* every ``--option`` of a documented command (``python -m mpicoll ...``, ``python -m mpicoll.bench...``,
  ``mpicoll.torch.bench``, ``benchmarks/*.py``, under ``mpicoll.launch`` or not) is one its ``--help`` lists;
* no sentence says that a collective mpicoll runs itself has no algorithm of its own or is forwarded to
  the MPI library, and every collective method mpi4py has is mpicoll's own (the README says so).
"""

from __future__ import annotations

import functools
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from mpicoll.families import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pages() -> list[pathlib.Path]:
    """The README and every page under docs/ (not a build)."""
    found = [p for p in (ROOT / "docs").rglob("*") if p.suffix in (".rst", ".md") and "_build" not in p.parts]
    return [ROOT / "README.md", *sorted(found)]


def texts() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in pages()]


def _support():
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import mpicoll_support
    finally:
        sys.path.pop(0)
    return mpicoll_support


# ---------------------------------------------------------------- the generated page
def test_the_support_page_is_generated_from_the_package():
    text = (ROOT / "docs" / "support.rst").read_text()
    for directive in ("mpicoll-support", "mpicoll-support-options", "mpicoll-support-objects",
                      "mpicoll-support-tested"):
        assert f".. {directive}::" in text, directive
    support = _support()
    table = support.support_table()
    from mpicoll import Comm
    from mpicoll.calls.table import METHODS

    for method in METHODS:
        assert f"``{method}``" in table and support.own(method) and hasattr(Comm, method)
    for coll in registry.collectives():
        for alg in registry.algorithms(coll):
            assert f":ref:`{alg} <{coll}-{alg}>`" in table, (coll, alg)


def test_the_support_page_names_every_option_and_tested_size():
    support = _support()
    options = support.options()
    assert set(options) >= {"algorithm", "reproducible"}
    assert "Allreduce" in options["reproducible"] and "Bcast" not in options["reproducible"]
    sizes = support.tested_sizes()
    assert sizes["DEFAULT_SIZES"] and sizes["MPI4PY_SIZES"] and sizes["TORCH_SIZES"]
    table = support.tested_table()
    assert ", ".join(map(str, sorted(sizes["DEFAULT_SIZES"]))) in table


def test_the_matrix_says_yes_only_where_mpicoll_defines_the_method(monkeypatch):
    """A form marked present is mpicoll.Comm's own method; one left to mpi4py shows as "no" (the check can fail)."""
    support = _support()
    from mpicoll import Comm

    def row(method: str) -> dict:
        return next(r for r in support.support_rows() if r["method"] == method)

    assert row("Allreduce")["own"] and row("Allreduce")["nonblocking"] == "Iallreduce"
    assert row("Allreduce")["persistent"] == "Allreduce_init"
    owner = next(cls for cls in Comm.__mro__ if "Iallreduce" in vars(cls))
    monkeypatch.delattr(owner, "Iallreduce")
    assert hasattr(Comm, "Iallreduce")               # mpi4py's own is still inherited ...
    assert row("Allreduce")["nonblocking"] is None   # ... and the matrix does not count it as mpicoll's


# ---------------------------------------------------------------- collectives and algorithms named in prose
def _method_collective(name: str) -> str | None:
    """``Iallreduce``, ``Allreduce_init``, ``allreduce`` -> ``allreduce``; None for anything else."""
    base = name.removesuffix("_init")
    for cand in (base, base[1:] if base[:1] in "Ii" else None):
        if cand:
            key = cand.lower()
            if key in registry.collectives():
                return key
            if key.startswith("neighbor_all"):
                return "neighbor_allgather" if key.startswith("neighbor_allgather") else "neighbor_alltoall"
    return None


def named_algorithms(text: str) -> list[tuple[str, str | None, str]]:
    """Every (collective, algorithm or None, the matched text) a page names."""
    found = []
    pair = r"""["'](\w+)["'],\s*["'](\w+)["']"""
    for m in re.finditer(r"(?:schedules|simulate|verify|trace|schedule|draw)\(" + pair, text):
        found.append((m.group(1), m.group(2), m.group(0)))
    for m in re.finditer(r"""mpicoll\.algorithms\(["'](\w+)["']\)""", text):
        found.append((m.group(1), None, m.group(0)))
    for m in re.finditer(r"MPICOLL_ALGO=((?:\w+=\w+,?)+)", text):
        for item in filter(None, m.group(1).split(",")):
            coll, alg = item.split("=")
            found.append((coll, alg, m.group(0)))
    for m in re.finditer(r"python -m mpicoll (?:show|verify|draw) ([a-z_]+)(?: ([a-z_]+))?", text):
        if m.group(2) not in (None, "all"):
            found.append((m.group(1), m.group(2), m.group(0)))
        elif m.group(1) != "all":
            found.append((m.group(1), None, m.group(0)))
    for line in text.splitlines():
        for m in re.finditer(r"""\b(\w+)\((?:[^()]|\([^()]*\))*?algorithm=["'](\w+)["']""", line):
            coll = _method_collective(m.group(1))
            if coll is not None and m.group(2) != "auto":
                found.append((coll, m.group(2), m.group(0)))
    return found


def _unknown(coll: str, alg: str | None) -> str | None:
    if coll not in registry.collectives():
        return f"no collective {coll!r}"
    if alg is not None and alg != "auto" and alg not in registry.algorithms(coll):
        return f"{coll} has no algorithm {alg!r}"
    return None


def test_every_collective_and_algorithm_a_page_names_exists():
    bad = []
    count = 0
    for name, text in texts():
        for coll, alg, where in named_algorithms(text):
            count += 1
            why = _unknown(coll, alg)
            if why:
                bad.append(f"{name}: {where!r}: {why}")
    assert count >= 20, f"only {count} names found: the patterns no longer match the pages"
    assert bad == []


def test_the_name_check_catches_a_wrong_name():
    text = ('comm.Allreduce(x, y, algorithm="spiral")\nprint(mpicoll.schedules("allreduce", "ring", 4))\n'
            "MPICOLL_ALGO=bcast=ring\npython -m mpicoll show allgather bruck -p 4\n")
    found = [(c, a) for c, a, _ in named_algorithms(text)]
    assert ("allreduce", "spiral") in found and ("bcast", "ring") in found and ("allgather", "bruck") in found
    assert {pair: _unknown(*pair) is None for pair in found} == {
        ("allreduce", "spiral"): False, ("allreduce", "ring"): True, ("bcast", "ring"): False,
        ("allgather", "bruck"): True}


# ---------------------------------------------------------------- options of the documented commands
#: the programs the pages run, by how they are named after ``python -m`` (or as a script), and how to ask
#: them for their options
PROGRAMS = {
    "mpicoll": ["-m", "mpicoll"],
    "mpicoll.bench": ["-m", "mpicoll.bench"],
    "mpicoll.bench.cli": ["-m", "mpicoll.bench"],
    "mpicoll.bench.osu": ["-m", "mpicoll.bench.osu"],
    "mpicoll.bench.autocheck": ["-m", "mpicoll.bench.autocheck"],
    "mpicoll.bench.figures": ["-m", "mpicoll.bench.figures"],
    "mpicoll.torch.bench": ["-m", "mpicoll.torch.bench"],
}
SUBCOMMANDS = ("show", "verify", "model", "draw", "calibrate", "bench", "osu", "autocheck", "doctor")
COMMAND = re.compile(r"python3? (?:-m ([\w.]+)|(benchmarks/\w+\.py))")


def documented_commands(text: str) -> list[tuple[tuple[str, ...], list[str], str]]:
    """Every (program, its options, the command) a page runs: ``program`` is the module (and subcommand) or
    script the options go to, after ``python -m mpicoll.launch -n N`` when it runs under it."""
    text = text.replace("\\\n", " ")
    out = []
    for m in COMMAND.finditer(text):
        end = len(text)
        for stop in ("\n", "`", " #", "&&", " | ", ";", ")`"):
            k = text.find(stop, m.end())
            if k != -1:
                end = min(end, k)
        try:
            words = shlex.split(text[m.start():end].replace("'", " ").replace('"', " "))
        except ValueError:
            continue
        words = words[1:]
        while words[:1] == ["-m"] and words[1:2] in (["mpicoll.launch"], ["mpicoll"]) and (
                words[1] == "mpicoll.launch" or words[2:3] == ["launch"]):
            words = words[2:] if words[1] == "mpicoll.launch" else words[3:]   # the launcher's own options next
            while words and words[0] != "-m" and not words[0].endswith(".py"):
                words = words[1:]
        if not words:
            continue
        if words[0] == "-m" and len(words) > 1:
            module, rest = words[1], words[2:]
        elif words[0].endswith(".py"):
            module, rest = words[0], words[1:]
        else:
            continue
        program: tuple[str, ...] = (module,)
        if module in ("mpicoll", "mpicoll.bench") and rest[:1] and rest[0] in (*SUBCOMMANDS, "overlap"):
            program = (module, rest[0])
        options = [re.sub(r"=.*", "", w) for w in rest if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]
        out.append((program, options, text[m.start():end].strip()))
    return out


def has_torch() -> bool:
    """Whether torch is installed.  Not ``pytest.importorskip("torch")``: pytest puts ``tests/`` on
    ``sys.path``, where ``tests/torch`` imports as a namespace package named ``torch``."""
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def help_text(program: tuple[str, ...]) -> str | None:
    """The ``--help`` of a program, or None when it is not one this test knows how to ask (or cannot run)."""
    module = program[0]
    if module.endswith(".py"):
        argv = [str(ROOT / module)]
        if not (ROOT / module).is_file():
            return ""
    elif module in PROGRAMS:
        argv = PROGRAMS[module]
    else:
        return None
    if module == "mpicoll.torch.bench" and not has_torch():
        return None   # its --help imports torch: its options go unchecked where torch is not installed
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, *argv, *program[1:], "--help"], capture_output=True, text=True,
                          env=env, timeout=120, cwd=ROOT)
    return proc.stdout + proc.stderr


def test_every_option_of_a_documented_command_exists():
    bad, checked = [], 0
    for name, text in texts():
        for program, options, command in documented_commands(text):
            if not options:
                continue
            known = help_text(program)
            if known is None:
                continue
            for option in options:
                checked += 1
                if not re.search(re.escape(option) + r"(?![\w-])", known):
                    bad.append(f"{name}: {' '.join(program)} has no {option}: {command[:100]}")
    assert checked >= 30, f"only {checked} options checked: the command pattern no longer matches the pages"
    assert bad == []


def test_the_command_reader_finds_the_program_under_launch():
    text = ("`python -m mpicoll.launch -n 2 -m mpicoll bench allreduce --sizes 8:64M --json x.json`\n"
            "python -m mpicoll.launch -n 2 benchmarks/reproducible.py --rounds 7 --form persistent\n"
            "python -m mpicoll show allreduce ring -p 4 --rank 2   # a comment --not-an-option\n")
    found = documented_commands(text)
    assert found[0][:2] == (("mpicoll", "bench"), ["--sizes", "--json"])
    assert found[1][:2] == (("benchmarks/reproducible.py",), ["--rounds", "--form"])
    assert found[2][:2] == (("mpicoll", "show"), ["--rank"])


# ---------------------------------------------------------------- nothing that exists is said to be missing
MISSING = re.compile(r"no algorithms? of (?:its|their) own|forwarded to (?:the MPI library|mpi4py)|"
                     r"passed (?:through )?to (?:mpi4py|the MPI library)|no mpicoll module", re.I)
# said of any collective, named or not: every collective has a module of mpicoll's (the test below)
ANY_COLLECTIVE = re.compile(r"no mpicoll module|forwarded to mpi4py'?s? built-in", re.I)


def sentences_saying_missing(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s for s in re.split(r"(?<=[.!?])\s+", flat) if MISSING.search(s)]


def test_no_page_says_a_collective_of_mpicoll_is_forwarded():
    from mpicoll.calls.table import METHODS

    names = set(METHODS) | {m.lower() for m in METHODS} | {"neighbourhood collectives", "neighborhood collectives"}
    bad = []
    for name, text in texts():
        for sentence in sentences_saying_missing(text):
            hits = [n for n in names if re.search(r"(?<![\w`])`*" + re.escape(n) + r"\b", sentence, re.I)]
            if hits:
                bad.append(f"{name}: {sentence[:200]} (mpicoll runs {', '.join(sorted(hits))} itself)")
            elif ANY_COLLECTIVE.search(sentence):
                bad.append(f"{name}: {sentence[:200]} (every collective is mpicoll's own)")
    assert bad == []
    stale = ("The neighbourhood collectives, which mpicoll has no algorithm of its own for yet, are forwarded "
             "to the MPI library's.")
    assert sentences_saying_missing(stale)   # the check catches the README's old sentence
    old = ("A collective that has no mpicoll module yet is forwarded to mpi4py's built-in, which returns an "
           "`MPI.Request`.")   # and nonblocking.md's, which named no collective
    assert [s for s in sentences_saying_missing(old) if ANY_COLLECTIVE.search(s)]


def test_every_collective_method_of_mpi4py_is_mpicoll_s_own():
    """The README and support.rst say every MPI collective is mpicoll's own, none forwarded."""
    from mpi4py import MPI

    from mpicoll import Comm
    from mpicoll.calls.table import METHODS

    stems = tuple(m.lower() for m in METHODS)
    theirs = {n for cls in (MPI.Intracomm, MPI.Topocomm) for n in dir(cls)
              if _method_collective(n) is not None and n.removesuffix("_init").lower().lstrip("i").startswith(
                  tuple(s.lstrip("i") for s in stems))}
    assert {"Allreduce", "Iallreduce", "Allreduce_init", "Neighbor_alltoallw", "Ineighbor_alltoallv"} <= theirs
    forwarded = sorted(n for n in theirs if getattr(Comm, n) is getattr(MPI.Intracomm, n, None)
                       or getattr(Comm, n) is getattr(MPI.Topocomm, n, None))
    assert forwarded == []
