"""Folders of mpi4py's source distribution (its ``test/`` and ``demo/``), fetched once and cached.

mpi4py ships its test suite and its demos (the OSU benchmarks among them) in its
sdist only.  :func:`sdist_dir` gets one top-level folder of the sdist of the
*installed* mpi4py version (from the package index's simple page, sha256-checked,
or else ``pip download --no-binary :all: --no-deps``; once, kept in
``~/.cache/mpicoll`` or ``$MPICOLL_CACHE``) and extracts just that folder.
Used by the mpi4py test-suite phase of the tests and by :mod:`mpicoll.bench.osu`.
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
    """Fetch mpi4py's sdist for ``version`` into ``target``.

    First straight from the package index's simple page (PEP 503; ``PIP_INDEX_URL``
    or PyPI), checked against the index's sha256: seconds.  Failing that,
    ``pip download --no-binary :all: --no-deps``, which also works behind a pip
    configuration of its own but takes minutes, since pip builds the sdist's
    metadata first.  pip comes from this interpreter, or else from ``python3`` on
    the ``PATH`` (a virtual environment made with ``--without-pip`` has none).
    """
    try:
        _fetch_from_index(version, target)
        return
    except Exception as exc:  # no index reachable this way: let pip try
        print(f"mpi4py sdist: fetching the sdist from the index failed ({exc}); trying pip download", flush=True)
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


def _fetch_from_index(version: str, target: str) -> None:
    """Download ``mpi4py-VERSION.tar.gz`` from the simple index, verify its sha256, write it to ``target``."""
    import hashlib
    import re
    import urllib.parse
    import urllib.request

    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    page_url = f"{index}/mpi4py/"
    with urllib.request.urlopen(page_url, timeout=60) as page:
        html = page.read().decode()
    name = re.escape(f"mpi4py-{version}.tar.gz")
    found = re.search(rf'href="([^"]*{name}[^"]*)"', html)
    if found is None:
        raise RuntimeError(f"{page_url} lists no mpi4py-{version}.tar.gz")
    url, _, fragment = found.group(1).replace("&amp;", "&").partition("#")
    digest = fragment.split("sha256=", 1)[1] if "sha256=" in fragment else None
    if digest is None:
        raise RuntimeError(f"{page_url} gives no sha256 for mpi4py-{version}.tar.gz")
    with urllib.request.urlopen(urllib.parse.urljoin(page_url, url), timeout=300) as response:
        data = response.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise RuntimeError(f"mpi4py-{version}.tar.gz does not match the index's sha256")
    with open(target + ".part", "wb") as fh:
        fh.write(data)
    os.replace(target + ".part", target)
