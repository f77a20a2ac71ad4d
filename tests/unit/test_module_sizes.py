"""Small modules with one job each: no Python module of the package over 500 lines, no C file over 600."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2] / "mpicoll"
LIMITS = {".py": 500, ".c": 600, ".h": 600}


def test_no_module_over_its_limit():
    over = [f"{path.relative_to(ROOT.parent)}: {n} lines (limit {LIMITS[path.suffix]})"
            for path in sorted(ROOT.rglob("*")) if path.suffix in LIMITS
            for n in [len(path.read_text(encoding="utf-8").splitlines())] if n > LIMITS[path.suffix]]
    assert not over, "split these:\n" + "\n".join(over)
