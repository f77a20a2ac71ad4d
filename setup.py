"""Only the optional compiled part; everything else is in setup.cfg.

``mpicoll.program._callkey`` runs the hit of a blocking call in C (tag, key,
lookup, run: ``_callkey.c`` builds the key, ``_callrun.c`` runs the call) and
``mpicoll.engine._rounds`` the blocking executor's round loop, ``mpicoll.engine._direct`` posts a plan's
messages with the MPI library's own functions (found at run time: no MPI header or library is needed to
build it), ``mpicoll.data._fixedpoint`` the reproducible sums' local passes, ``mpicoll.calls.objects._codec``
the object collectives' pickling into and out of their slots.  All are
optional: without a C compiler the install goes on and mpicoll uses the same
functions in Python (``mpicoll.comm.dispatch._run_blocking``,
``mpicoll.program.callkey._call_key``, ``mpicoll.engine.blocking._execute``, mpi4py's calls,
``mpicoll.calls.objects.codec``).
"""

from setuptools import Extension, setup

SOURCES = {"program._callkey": ["_callkey.c", "_callrun.c"], "engine._rounds": ["_rounds.c", "_hooks.c"],
           "data._fixedpoint": ["_fixedpoint.c", "_fixedpoint_simd.c", "_gathered.c"],
           "engine._direct": ["_direct.c", "_requests.c", "_generalized.c", "_progress.c", "_steps.c", "_hooks.c",
                              "_guard.c"],
           "calls.objects._codec": ["_codec.c"]}
HEADERS = {"program": ["_callkey.h"], "engine": ["_direct.h", "_direct_family.h", "_hooks.h"], "data": ["_fixedpoint.h"],
           "calls/objects": []}


def extension(name: str, files: list[str]) -> Extension:
    package = "/".join(name.split(".")[:-1])
    return Extension(f"mpicoll.{name}", [f"mpicoll/{package}/{file}" for file in files],
                     depends=[f"mpicoll/{package}/{header}" for header in HEADERS[package]], optional=True)


setup(ext_modules=[extension(name, files) for name, files in SOURCES.items()])
