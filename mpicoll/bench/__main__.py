"""``python -m mpicoll.bench`` (also ``python -m mpicoll bench``): see :mod:`mpicoll.bench.cli`.

A usage error is found by every rank before any message: rank 0 prints one line and every
rank exits with status 2 (:func:`mpicoll.tools.cli.run`).  Any other uncaught error on one
rank aborts the job: it must not leave the others waiting.
"""

import sys

from mpicoll.bench.cli import main
from mpicoll.tools.cli import guarded

sys.exit(guarded(main))
