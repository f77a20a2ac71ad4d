"""Every place a comment or docstring of the package names exists: dotted names ``mpicoll.a.b`` resolve (a
module, then attributes), and paths ``mpicoll/a/b.py`` (or ``.c``/``.h``) are files of the repository.

A comment that points to a place that moved sends a reader nowhere; this keeps them honest after a rename.
"""

from __future__ import annotations

import importlib
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "mpicoll")
DOTTED = re.compile(r"(?<![\w./])mpicoll(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])(?:mpicoll|tests|benchmarks|docs)/[\w/.-]+\.(?:py|c|h|md|rst|sh)\b")
# optional modules: a name under them resolves only where their dependencies are installed
OPTIONAL = ("mpicoll.torch", "mpicoll.gpu", "mpicoll.bench.gpu", "mpicoll.examples")


def _sources() -> list[str]:
    out = []
    for root, _, files in os.walk(PACKAGE):
        out += [os.path.join(root, f) for f in files if f.endswith((".py", ".c", ".h"))]
    return sorted(out)


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _references() -> list[tuple[str, int, str, str]]:
    found = []
    for path in _sources():
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                for match in DOTTED.finditer(line):
                    found.append((os.path.relpath(path, ROOT), lineno, "name", match.group().rstrip(".")))
                for match in PATH.finditer(line):
                    found.append((os.path.relpath(path, ROOT), lineno, "path", match.group()))
    return found


def test_names_and_paths_in_the_package_resolve():
    missing = []
    for where, lineno, kind, ref in _references():
        if kind == "path":
            ok = os.path.exists(os.path.join(ROOT, ref))
        elif ref.startswith(OPTIONAL):
            try:
                ok = _resolves(ref)
            except Exception:   # noqa: BLE001 - an optional dependency is missing here
                continue
        else:
            ok = _resolves(ref)
        if not ok:
            missing.append(f"{where}:{lineno}: {ref}")
    assert not missing, f"{len(missing)} references to places that do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize("ref, ok", [("mpicoll.comm.dispatch.run_blocking", True),
                                     ("mpicoll.comm.comm._run", False), ("mpicoll.program.plan._call_key", False)])
def test_the_resolver_tells_a_moved_name(ref, ok):
    assert _resolves(ref) is ok
