"""Only the optional compiled part; everything else is in setup.cfg.

``mpicoll._callkey`` runs the hit of a blocking call in C (tag, key, lookup,
run) and ``mpicoll._rounds`` the blocking executor's round loop.  Both are
optional: without a C compiler the install goes on and mpicoll uses the same
functions in Python (``mpicoll.comm.comm._run``, ``mpicoll.runtime.plan._call_key``,
``mpicoll.runtime.blocking._execute``).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(f"mpicoll.runtime.{name}", [f"mpicoll/runtime/{name}.c"], optional=True)
                   for name in ("_callkey", "_rounds")])
