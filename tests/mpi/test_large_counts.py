"""Messages of 2^31 elements or bytes and more (issue 24): contiguous, through a datatype, with a user op.

Open MPI 5.0 is an MPI 3.1 library: counts are C ints, and mpi4py has no large-count call there, so mpicoll
sends a message of n >= 2^31 bytes as one element of an n-byte datatype, and a datatype whose bytes are in
order (a struct of ``vector(1, INT_MAX, INT_MAX)`` and one element, as a distributed-tensor library builds
for its large counts) as a typed view, never through ``MPI_Pack``.

Slow and memory-hungry (about 2.2 GB per buffer): marked slow, run only at 2 processes
(``python -m mpicoll.launch -n 2 -m pytest tests/mpi/test_large_counts.py --with-mpi --run-slow``).
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from conftest import WORLD, check

P = WORLD.size
R = WORLD.rank
INT_MAX = 2**31 - 1

pytestmark = [
    pytest.mark.mpi, pytest.mark.slow,
    pytest.mark.skipif(P != 2, reason="over 2 GiB per buffer: at 2 processes only"),
]


def test_bcast_of_more_than_2_31_bytes(comm):
    n = 2**31 + 8
    buf = np.empty(n, np.uint8)
    buf[:-8] = 7 if R == 0 else 0
    buf[-8:] = np.arange(8) if R == 0 else 0
    comm.Bcast(buf, root=0)
    check(buf[:-8].min() == 7 == buf[:-8].max() and list(buf[-8:]) == list(range(8)),
          f"rank {R}: the broadcast's bytes are wrong")


def _lor(inbuf, inoutbuf, datatype):
    out = np.frombuffer(inoutbuf, np.bool_)
    np.logical_or(np.frombuffer(inbuf, np.bool_), out, out=out)


def test_allreduce_struct_of_a_vector_past_2_31_booleans_with_a_user_op(comm):
    """One element of ``struct(vector(1, INT_MAX, INT_MAX), BOOL)``: 2^31 booleans, reduced by a user op."""
    big = MPI.BOOL.Create_vector(1, INT_MAX, INT_MAX)
    datatype = MPI.Datatype.Create_struct([1, 1], [0, INT_MAX], [big, MPI.BOOL]).Commit()
    big.Free()
    op = MPI.Op.Create(_lor, commute=True)
    x = np.zeros(INT_MAX + 1, np.bool_)
    x[R] = True
    x[-1 - R] = True
    comm.Allreduce(MPI.IN_PLACE, [x, 1, datatype], op=op)
    ends = [0, 1, INT_MAX - 1, INT_MAX]
    check(list(x[ends]) == [True] * 4 and np.count_nonzero(x) == 4, f"rank {R}: {np.count_nonzero(x)} set")
    op.Free()
    datatype.Free()
