"""Small modules with one job each: no Python module of the package over 500 lines, no C file over 600, no
subpackage over a quarter of the lines."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2] / "mpicoll"
LIMITS = {".py": 500, ".c": 600, ".h": 600}


def test_no_module_over_its_limit():
    over = [f"{path.relative_to(ROOT.parent)}: {n} lines (limit {LIMITS[path.suffix]})"
            for path in sorted(ROOT.rglob("*")) if path.suffix in LIMITS
            for n in [len(path.read_text(encoding="utf-8").splitlines())] if n > LIMITS[path.suffix]]
    assert not over, "split these:\n" + "\n".join(over)


def test_no_package_over_a_quarter_of_the_lines():
    """No subpackage holds more than a quarter of the package's Python and C lines (a catch-all hides layers)."""
    def lines(paths):
        return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths if p.suffix in LIMITS)

    total = lines(ROOT.rglob("*"))
    packages = [d for d in ROOT.iterdir() if (d / "__init__.py").exists()]
    shares = {d.name: lines(d.rglob("*")) / total for d in packages}
    over = {name: f"{share:.0%}" for name, share in shares.items() if share > 0.25}
    assert shares and not over, f"split these packages: {over}"
