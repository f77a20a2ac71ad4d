"""Folders of mpi4py's source distribution (its ``test/`` and ``demo/``), fetched once and cached.

mpi4py ships its test suite and its demos (the OSU benchmarks among them) in its
sdist only.  :func:`sdist_dir` gets one top-level folder of the sdist of the
*installed* mpi4py version (``pip download --no-binary :all: --no-deps``, once,
kept in ``~/.cache/mpicoll`` or ``$MPICOLL_CACHE``) and extracts just that folder.
Used by the mpi4py test-suite phase of the tests and by :mod:`mpicoll.osu`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile


def cache_dir() -> str:
    """Where downloaded sdists are kept (outside the source tree)."""
    return os.environ.get("MPICOLL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mpicoll")


def installed_version() -> str:
    """The version of the installed mpi4py."""
    import mpi4py

    return mpi4py.__version__


def sdist_dir(folder: str, marker: str, version: str | None = None) -> str:
    """The folder ``folder`` (e.g. ``"test"``, ``"demo"``) of mpi4py's sdist for ``version``, fetched once.

    ``marker`` is a file that the extracted folder must hold; when it is already
    there nothing is downloaded or extracted.  ``version`` defaults to the
    installed mpi4py's.
    """
    version = version or installed_version()
    root = cache_dir()
    target = os.path.join(root, f"mpi4py-{version}", folder)
    if os.path.isfile(os.path.join(target, marker)):
        return target
    os.makedirs(root, exist_ok=True)
    sdist = os.path.join(root, f"mpi4py-{version}.tar.gz")
    if not os.path.exists(sdist):
        download_sdist(version, sdist)
    prefix = f"mpi4py-{version}/{folder}/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        # the "data" filter where this Python has it (3.11.4+); the members are plain files under the folder
        tar.extractall(root, members=members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    if not os.path.isfile(os.path.join(target, marker)):
        raise RuntimeError(f"{sdist} has no {prefix}{marker}")
    return target


def download_sdist(version: str, target: str) -> None:
    """``pip download`` mpi4py's sdist for ``version`` into ``target``'s folder.

    pip comes from this interpreter, or else from ``python3`` on the ``PATH`` (a
    virtual environment made with ``--without-pip`` has none of its own);
    ``pip download`` installs nothing, so an externally managed Python is fine.
    """
    python3 = shutil.which("python3")
    for python in [sys.executable] + ([python3] if python3 else []):
        if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            break
    else:
        raise RuntimeError("no pip found to download mpi4py's sdist")
    subprocess.run([python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-binary",
                    ":all:", "--no-deps", "-d", os.path.dirname(target), f"mpi4py=={version}"], check=True)
    if not os.path.exists(target):
        raise RuntimeError(f"pip download did not produce {target}")
