"""Only the optional compiled part; everything else is in setup.cfg.

``mpicoll._callkey`` builds the plan cache's key in C (the blocking call path's
largest cost in Python).  It is optional: without a C compiler the install goes
on and mpicoll uses the same function in Python (``mpicoll.plan._call_key``).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(f"mpicoll.{name}", [f"mpicoll/{name}.c"], optional=True)
                   for name in ("_callkey", "_rounds")])
