"""Sphinx configuration for mpicoll.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install -e ".[docs]"`` first).
The pages about algorithms, collectives and examples are rendered from the package at build time by
``docs/_ext/mpicoll_pages.py``; their figures are drawn into the build directory.  Nothing is
written into ``docs/``.
"""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "_ext"))

import mpicoll  # noqa: E402

# A missing extension must stop the build, not silently drop pages.
_NEEDED = {"myst_parser": "myst-parser", "furo": "furo", "matplotlib": "matplotlib"}
_missing = [pip for mod, pip in _NEEDED.items() if importlib.util.find_spec(mod) is None]
if _missing:
    raise RuntimeError(f"the docs need {', '.join(_missing)}: pip install -e \".[docs]\"")

project = "mpicoll"
author = "the mpicoll authors"
copyright = "2026, the mpicoll authors"
release = version = mpicoll.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode", "myst_parser", "mpicoll_pages",
              "mpicoll_support"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"  # no bare "buf (Any)" lists on I*/*_init
toc_object_entries_show_parents = "hide"           # "Allreduce()", not "mpicoll.Comm.Allreduce()"
autodoc_preserve_defaults = True   # ``op=MPI.SUM``, not ``<mpi4py.MPI.Op object at 0x...>``
napoleon_numpy_docstring = True
napoleon_google_docstring = False
# mpi4py's own classes have docstrings that are not reStructuredText
autodoc_inherit_docstrings = False
nitpicky = False

html_theme = "furo"
html_title = f"mpicoll {release}"
html_static_path = ["_static"]
html_css_files = ["wide.css"]
