"""How to test your own MPI code with pytest-mpi (and mpicoll as the communicator).

Run:  mpirun -n 2 python -m pytest examples/test_my_mpi_code.py --with-mpi -q
      (``python -m pytest examples/test_my_mpi_code.py`` without MPI skips the MPI tests)

Each test runs on every rank.  Assert the same thing on every rank, or agree on
the verdict with a collective, so that one rank's failure does not leave the
others waiting in a later collective.  ``@pytest.mark.mpi(min_size=2)`` skips a
test that needs more ranks than the run has.
"""

from __future__ import annotations

import numpy as np
import pytest


def distributed_mean(comm, local: np.ndarray) -> np.ndarray:
    """The code under test: the element-wise mean of every rank's ``local``."""
    from mpi4py import MPI

    total = np.empty_like(local)
    comm.Allreduce(local, total, op=MPI.SUM)
    return total / comm.size


def test_mean_of_one_rank_is_itself():
    """A plain unit test: runs without MPI too (a communicator of one rank)."""
    from mpi4py import MPI

    import mpicoll

    x = np.arange(5.0)
    assert np.array_equal(distributed_mean(mpicoll.Comm(MPI.COMM_SELF), x), x)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("algorithm", ["auto", "ring", "recursive_doubling"])
def test_mean_agrees_with_mpi(algorithm):
    from mpi4py import MPI

    import mpicoll

    comm = mpicoll.Comm(MPI.COMM_WORLD)
    local = np.full(7, float(comm.rank))
    got = np.empty(7)
    comm.Allreduce(local, got, op=MPI.SUM, algorithm=algorithm)
    expected = np.full(7, sum(range(comm.size)) / comm.size)
    assert np.allclose(got / comm.size, expected)
    assert np.allclose(distributed_mean(comm, local), expected)


@pytest.mark.mpi(min_size=2)
def test_every_rank_agrees_on_the_verdict():
    """Agree across ranks before asserting, so that no rank is left waiting."""
    from mpi4py import MPI

    import mpicoll

    comm = mpicoll.Comm(MPI.COMM_WORLD)
    mine_ok = distributed_mean(comm, np.ones(3)).tolist() == [1.0, 1.0, 1.0]
    assert comm.allreduce(mine_ok, op=MPI.LAND)
