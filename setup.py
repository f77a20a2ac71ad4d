"""Only the optional compiled part; everything else is in setup.cfg.

``mpicoll.runtime._callkey`` runs the hit of a blocking call in C (tag, key,
lookup, run: ``_callkey.c`` builds the key, ``_callrun.c`` runs the call) and
``mpicoll.runtime._rounds`` the blocking executor's round loop, ``mpicoll.runtime._direct`` posts a plan's
messages with the MPI library's own functions (found at run time: no MPI header or library is needed to
build it), ``mpicoll.runtime._fixedpoint`` the reproducible sums' local passes.  All are
optional: without a C compiler the install goes on and mpicoll uses the same
functions in Python (``mpicoll.comm.dispatch._run_blocking``,
``mpicoll.runtime.callkey._call_key``, ``mpicoll.runtime.blocking._execute``, mpi4py's calls).
"""

from setuptools import Extension, setup

SOURCES = {"_callkey": ["_callkey.c", "_callrun.c"], "_rounds": ["_rounds.c"],
           "_fixedpoint": ["_fixedpoint.c", "_fixedpoint_simd.c", "_gathered.c"],
           "_direct": ["_direct.c", "_requests.c", "_generalized.c", "_progress.c", "_steps.c"]}
HEADERS = ["_callkey.h", "_direct.h", "_direct_family.h", "_fixedpoint.h"]

setup(ext_modules=[Extension(f"mpicoll.runtime.{name}", [f"mpicoll/runtime/{file}" for file in files],
                             depends=[f"mpicoll/runtime/{header}" for header in HEADERS], optional=True)
                   for name, files in SOURCES.items()])
