"""Sphinx configuration for mpicoll.  Build: ``sphinx-build -W -b html docs docs/_build/html``."""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import _gen  # noqa: E402  (generates the pages drawn by the package itself)

import mpicoll  # noqa: E402

project = "mpicoll"
author = "the mpicoll authors"
copyright = "2026, the mpicoll authors"
release = version = mpicoll.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store"]
# Markdown pages (nonblocking.md, tooling.md, performance.md) are part of the site when
# myst-parser is installed (it is in the ``docs`` extra); without it they are left out.
HAVE_MYST = importlib.util.find_spec("myst_parser") is not None
if HAVE_MYST:
    extensions.append("myst_parser")
    source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
else:
    exclude_patterns.append("*.md")

autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
# mpi4py's own classes have docstrings that are not reStructuredText
autodoc_inherit_docstrings = False
nitpicky = False
html_theme = "alabaster"
html_static_path: list[str] = []

_gen.generate(HERE, markdown=HAVE_MYST)
