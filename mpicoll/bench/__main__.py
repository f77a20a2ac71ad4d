"""``python -m mpicoll.bench``: see :mod:`mpicoll.bench.cli`.

An uncaught error on one rank aborts the job: it must not leave the others waiting.
"""

import sys
import traceback

from mpi4py import MPI

from mpicoll.bench.cli import main

try:
    main()
except SystemExit:
    raise
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(1)
