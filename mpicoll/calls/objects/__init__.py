"""The lowercase object collectives (``bcast``, ``gather``, ..., ``exscan``), by hand, on the same schedules.

mpi4py's lowercase collectives move any picklable Python object.  mpicoll runs
them on the schedules of the buffer collectives (:mod:`mpicoll.families`): a
block of a schedule holds one whole object, pickled once with mpi4py's own
``MPI.pickle`` (so a user's ``MPI.pickle.__init__(dumps, loads, protocol)``
settings hold) and forwarded as bytes; a message carries the blocks it names
in one frame (their lengths, then their bytes), and a receiver learns the
length from a matched probe, so no size is sent ahead.  Reductions apply the
op as mpi4py does, ``op(lower ranks, higher ranks)``, on unpickled objects.

"auto" takes another way for the ten calls but the neighbourhood ones: mpi4py's
own, pickles moved by the communicator's buffer collectives (``Bcast``,
``Allgather``, ``Gather``, ...; their algorithms and cached plans), one
fixed-size slot per object, then the pickles too long for it (by a second
collective, or point to point where only the two ranks concerned can tell); a
reduction there gathers the objects and applies the op in rank order
(up to :data:`~mpicoll.calls.objects.buffered.FOLD_MAX` ranks).  A named
algorithm runs that algorithm's schedule, as above.

- :mod:`~mpicoll.calls.objects.buffered`: "auto": pickles through the buffer
  collectives;
- :mod:`~mpicoll.calls.objects.slots`: what a block holds, and a message's frame;
- :mod:`~mpicoll.calls.objects.engine`: one rank's schedule run on slots (MPI),
  and all ranks' schedules run in one process (no MPI: tests and learners);
- :mod:`~mpicoll.calls.objects.choice`: which algorithms suit objects, and the
  schedule "auto" runs where it does not fold (above ``FOLD_MAX`` ranks);
- :mod:`~mpicoll.calls.objects.collectives`: the ten calls, as ``mpicoll.Comm``
  runs them.
"""

from mpicoll.calls.objects.choice import choose, suitable
from mpicoll.calls.objects.collectives import (
    allgather,
    allreduce,
    alltoall,
    barrier,
    bcast,
    exscan,
    gather,
    neighbor_allgather,
    neighbor_alltoall,
    reduce,
    scan,
    scatter,
)

__all__ = ["bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "scan", "exscan",
           "barrier", "neighbor_allgather", "neighbor_alltoall", "choose", "suitable"]
