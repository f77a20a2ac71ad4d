"""The README and the tutorial run as written, after the README's first command (the install).

Every code block of README.md and docs/tutorial.rst is extracted and run: shell lines with the
venv's interpreter replaced by this one (``.venv/bin/python`` and ``python`` after the tutorial's
``source .venv/bin/activate``), Python blocks the way the prose around them says (``-n 4 use.py``
under ``python -m mpicoll.launch``, or in one process).  The commands that take more than a few
seconds (a benchmark sweep, calibration, a proof at p = 1000) are marked ``slow`` and run with
``pytest --run-slow``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Commands of the pages that take more than a few seconds: run with --run-slow.
SLOW = ("bench", "calibrate", "-p 1000")
# Lines that make the environment the tests already run in (the install itself).
SETUP = ("python3 -m venv", "git clone", "source .venv/bin/activate")


def readme_blocks() -> list[tuple[str, str, str]]:
    """(language, code, the paragraph before it) of every fenced block of README.md."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    out = []
    for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S):
        before = text[:m.start()].rstrip().rsplit("\n\n", 1)[-1]
        out.append((m.group(1), m.group(2), before))
    return out


def tutorial_blocks() -> list[tuple[str, str, str]]:
    """(language, code, the paragraph before it) of the literal and code blocks of docs/tutorial.rst."""
    lines = open(os.path.join(ROOT, "docs", "tutorial.rst"), encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        python = line.strip() == ".. code-block:: python"
        if python or (line.endswith("::") and not line.lstrip().startswith("..")):
            # the paragraph that introduces the block: for ``.. code-block::`` the one above the directive
            before = "\n".join(lines[:i] if python else lines[:i + 1]).rstrip().rsplit("\n\n", 1)[-1]
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith("   ")):
                j += 1
            body = "\n".join(x[4:] if x.startswith("    ") else x[3:] for x in lines[i + 1:j]).strip("\n")
            out.append(("python" if python else "bash", body + "\n", before))
            i = j
        else:
            i += 1
    return out


def shell_commands(code: str) -> list[str]:
    """The commands of a shell block, comments dropped, the install lines left out."""
    cmds = []
    for line in code.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#") and not line.startswith(SETUP):
            cmds.append(line)
    return cmds


def python_command(line: str) -> list[str]:
    """A page's command with the environment's interpreter as this test's."""
    words = shlex.split(line)
    assert words[0] in (".venv/bin/python", "python"), f"a command that is not the venv's python: {line}"
    return [sys.executable, *words[1:]]


def cases() -> list:
    params = []
    for page, blocks in (("README", readme_blocks()[1:]), ("tutorial", tutorial_blocks())):
        for k, (lang, code, before) in enumerate(blocks):
            if lang == "bash":
                for cmd in shell_commands(code):
                    marks = [pytest.mark.slow] if any(s in cmd for s in SLOW) else []
                    params.append(pytest.param(page, "shell", cmd, id=f"{page}:{cmd[:60]}", marks=marks))
            else:
                params.append(pytest.param(page, "python", (code, before), id=f"{page}:python-block-{k}"))
    return params


def test_the_readme_starts_with_the_install_and_every_page_block_is_found():
    first = readme_blocks()[0]
    assert first[0] == "bash" and ".venv/bin/python install" in first[1]
    assert len(readme_blocks()) >= 4 and len(tutorial_blocks()) >= 5


def test_no_bare_python3_after_the_install():
    """After its first command the README names the venv's interpreter, never the system's python3."""
    for _, code, _ in readme_blocks()[1:]:
        for cmd in shell_commands(code):
            assert not cmd.startswith("python3 "), cmd


def run(argv: list[str], cwd: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, MPLBACKEND="Agg")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("page, kind, what", cases())
def test_page_block_runs(page, kind, what, tmp_path):
    if kind == "shell":   # a full benchmark sweep takes minutes, more on a busy machine
        proc = run(python_command(what), str(tmp_path), timeout=1800 if any(x in what for x in SLOW) else 300)
    else:
        code, before = what
        script = re.search(r"``?([\w.]+\.py)``?", before)   # "Save this as ``sum.py`` and run it with ... -n 4"
        if script:
            (tmp_path / script.group(1)).write_text(code)
            n = re.search(r"-n (\d+) " + re.escape(script.group(1)), before)
            assert n, f"{page}: the prose before {script.group(1)} does not say how to run it"
            proc = run([sys.executable, "-m", "mpicoll.launch", "-n", n.group(1), script.group(1)], str(tmp_path))
        else:
            proc = run([sys.executable, "-c", code], str(tmp_path))
    assert proc.returncode == 0, f"{page}: {what}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


def test_the_readme_use_it_block_prints_the_result_once(tmp_path):
    """"Use it" prints one line, from rank 0, with the sum over the 4 ranks (0+1+2+3), as its prose says."""
    code = next(c for lang, c, before in readme_blocks() if lang == "python" and "use.py" in before)
    (tmp_path / "use.py").write_text(code)
    proc = run([sys.executable, "-m", "mpicoll.launch", "-n", "4", "use.py"], str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("sum over 4 ranks: 6.0 (auto), 6.0 (ring)"), proc.stdout
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert " ".join(lines[0].split()) in " ".join(readme.replace("`", "").split()), "the README quotes another line"
