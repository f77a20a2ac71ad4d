"""The documentation of mpicoll.Comm's collectives, one entry per collective.

Each entry gives the one-line summary and the parameters of the blocking form; :func:`document` writes
the docstrings of the blocking, nonblocking (``I*``) and persistent (``*_init``) methods from it, with the
parts every collective shares written once.
"""

from __future__ import annotations

__all__ = ["COLLECTIVE_DOCS", "document"]

#: method name: (summary, the numpydoc "Parameters" entries of the blocking form, algorithm excluded)
COLLECTIVE_DOCS: dict[str, tuple[str, str]] = {
    'Barrier': (
        'Block until every rank has called it (MPI_Barrier).',
        """\

"""),
    'Bcast': (
        'Broadcast ``buf`` from ``root`` to every rank (MPI_Bcast).',
        """\
buf : buffer specification
    Sent at ``root``, received (so writable) elsewhere.
root : int, default 0
    The rank that sends.
"""),
    'Reduce': (
        "Reduce every rank's ``sendbuf`` with ``op`` into ``recvbuf`` at ``root`` (MPI_Reduce).",
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's contribution; ``MPI.IN_PLACE`` at the root only, taking it from ``recvbuf``.
recvbuf : buffer specification
    The result, significant at ``root`` only.
op : MPI.Op or mpicoll.Op, default MPI.SUM
    The reduction; a predefined op must be defined for the dtype.
root : int, default 0
    The rank that receives the result.
"""),
    'Allreduce': (
        "Reduce every rank's ``sendbuf`` with ``op`` into every rank's ``recvbuf`` (MPI_Allreduce).",
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's contribution; ``MPI.IN_PLACE`` takes it from ``recvbuf``.
recvbuf : buffer specification
    The result, on every rank.
op : MPI.Op or mpicoll.Op, default MPI.SUM
    The reduction; a predefined op must be defined for the dtype.
"""),
    'Gather': (
        'Gather equal blocks from every rank at ``root``, in rank order (MPI_Gather).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's block; ``MPI.IN_PLACE`` at the root only (its block is already in place in ``recvbuf``).
recvbuf : buffer specification
    At ``root``: size x the block, block i from rank i; ignored elsewhere.
root : int, default 0
    The rank that receives.
"""),
    'Gatherv': (
        'Gather blocks of varying size at ``root`` (MPI_Gatherv).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's block; ``MPI.IN_PLACE`` at the root only.
recvbuf : buffer specification
    At ``root``: ``[buf, counts, displs, datatype]`` (``displs`` optional: packed in rank order); ignored
    elsewhere.
root : int, default 0
    The rank that receives.
"""),
    'Scatter': (
        "Send block i of ``root``'s ``sendbuf`` to rank i (MPI_Scatter).",
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    At ``root``: size equal blocks; ignored elsewhere.
recvbuf : buffer specification
    This rank's block; ``MPI.IN_PLACE`` at the root only (it keeps its block in ``sendbuf``).
root : int, default 0
    The rank that sends.
"""),
    'Scatterv': (
        'Scatter blocks of varying size from ``root`` (MPI_Scatterv).',
        """\
sendbuf : buffer specification
    At ``root``: ``[buf, counts, displs, datatype]`` (``displs`` optional); ignored elsewhere.
recvbuf : buffer specification
    This rank's block; ``MPI.IN_PLACE`` at the root only.
root : int, default 0
    The rank that sends.
"""),
    'Allgather': (
        'Gather equal blocks from every rank at every rank (MPI_Allgather).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's block; ``MPI.IN_PLACE`` takes it from its place in ``recvbuf``.
recvbuf : buffer specification
    size x the block, block i from rank i.
"""),
    'Allgatherv': (
        'Gather blocks of varying size at every rank (MPI_Allgatherv).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's block; ``MPI.IN_PLACE`` takes it from its place in ``recvbuf``.
recvbuf : buffer specification
    ``[buf, counts, displs, datatype]`` (``displs`` optional: packed in rank order).
"""),
    'Reduce_scatter_block': (
        'Reduce, then give rank i block i of equal blocks (MPI_Reduce_scatter_block).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    size equal blocks; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
recvbuf : buffer specification
    This rank's reduced block.
op : MPI.Op or mpicoll.Op, default MPI.SUM
    The reduction; a predefined op must be defined for the dtype.
"""),
    'Reduce_scatter': (
        'Reduce, then give rank i ``recvcounts[i]`` elements (MPI_Reduce_scatter).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    ``sum(recvcounts)`` elements; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
recvbuf : buffer specification
    This rank's reduced part.
recvcounts : sequence of int, optional
    Elements each rank receives; ``None``: each rank's count of ``recvbuf``, exchanged (as mpi4py does).
op : MPI.Op or mpicoll.Op, default MPI.SUM
    The reduction; a predefined op must be defined for the dtype.
"""),
    'Alltoall': (
        "Send block j of every rank's ``sendbuf`` to rank j (MPI_Alltoall).",
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    size equal blocks, block j for rank j; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
recvbuf : buffer specification
    size equal blocks, block i from rank i.
"""),
    'Alltoallv': (
        'All-to-all with blocks of varying size (MPI_Alltoallv).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    ``[buf, counts, displs, datatype]``: block j for rank j; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
recvbuf : buffer specification
    ``[buf, counts, displs, datatype]``: block i from rank i.
"""),
    'Alltoallw': (
        'All-to-all with a count, byte displacement and datatype per block (MPI_Alltoallw).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    ``[buf, counts, displs, datatypes]``: block j, ``counts[j]`` elements of ``datatypes[j]`` from byte
    ``displs[j]``, for rank j; ``MPI.IN_PLACE`` takes them from ``recvbuf``.
recvbuf : buffer specification
    ``[buf, counts, displs, datatypes]``: block i from rank i (same type signature size as rank
    i's block for this rank).
"""),
    'Scan': (
        'Inclusive prefix reduction: rank i gets ranks 0..i reduced (MPI_Scan).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's contribution; ``MPI.IN_PLACE`` takes it from ``recvbuf``.
recvbuf : buffer specification
    The prefix result.
op : MPI.Op or mpicoll.Op, default MPI.SUM
    The reduction; a predefined op must be defined for the dtype.
"""),
    'Exscan': (
        'Exclusive prefix reduction: rank i gets ranks 0..i-1 reduced (MPI_Exscan).',
        """\
sendbuf : buffer specification or MPI.IN_PLACE
    This rank's contribution; ``MPI.IN_PLACE`` takes it from ``recvbuf``.
recvbuf : buffer specification
    The prefix result; undefined on rank 0, as in MPI.
op : MPI.Op or mpicoll.Op, default MPI.SUM
    The reduction; a predefined op must be defined for the dtype.
"""),
    'Neighbor_allgather': (
        "Send ``sendbuf`` to every out-neighbour; block k of ``recvbuf`` from in-neighbour k (MPI_Neighbor_allgather).",
        """\
sendbuf : buffer specification
    This rank's block (no ``MPI.IN_PLACE``).
recvbuf : buffer specification
    indegree blocks of sendbuf's size, in the topology's neighbour order; a block whose neighbour is
    ``MPI.PROC_NULL`` stays untouched.
"""),
    'Neighbor_allgatherv': (
        "Neighbor_allgather with a count and displacement per in-neighbour (MPI_Neighbor_allgatherv).",
        """\
sendbuf : buffer specification
    This rank's block (no ``MPI.IN_PLACE``).
recvbuf : v-variant buffer specification
    One block per in-neighbour, in the topology's neighbour order.
"""),
    'Neighbor_alltoall': (
        "Block k of ``sendbuf`` to out-neighbour k, block k of ``recvbuf`` from in-neighbour k "
        "(MPI_Neighbor_alltoall).",
        """\
sendbuf : buffer specification
    outdegree equal blocks (no ``MPI.IN_PLACE``).
recvbuf : buffer specification
    indegree blocks of the same size; a block whose neighbour is ``MPI.PROC_NULL`` stays untouched.
"""),
    'Neighbor_alltoallv': (
        "Neighbor_alltoall with a count and displacement per neighbour (MPI_Neighbor_alltoallv).",
        """\
sendbuf : v-variant buffer specification
    One block per out-neighbour (no ``MPI.IN_PLACE``).
recvbuf : v-variant buffer specification
    One block per in-neighbour.
"""),
    'Neighbor_alltoallw': (
        "Neighbor_alltoallv with a datatype per neighbour and byte displacements (MPI_Neighbor_alltoallw).",
        """\
sendbuf : [buf, counts, displs, datatypes]
    One block per out-neighbour (no ``MPI.IN_PLACE``).
recvbuf : [buf, counts, displs, datatypes]
    One block per in-neighbour.
"""),
}

_ALGORITHM = """\
algorithm : str, default "auto"
    One of ``mpicoll.algorithms("{collective}")``, or ``"auto"`` (``MPICOLL_ALGO`` may force it).
"""

_REPRODUCIBLE = """\
reproducible : bool, optional
    ``True``: with ``MPI.SUM`` on float16, bfloat16, float32, float64 or complex, the same bits for every
    algorithm, message size, process count and order of the ranks' contributions, at least as accurate
    (see the reproducible sums page); other ops and types are unchanged.  ``None`` (the default):
    ``MPICOLL_REPRODUCIBLE``.  The ``I*`` and ``*_init`` forms take it too, with the same bits.
"""

#: the collectives that take ``reproducible`` (mpicoll.comm.reproducible)
_SUMMING = ("Reduce", "Allreduce", "Reduce_scatter_block", "Reduce_scatter", "Scan", "Exscan")

_RAISES = """
Raises
------
MPI.Exception
    A bad argument, before any message; also a ``ValueError`` or ``TypeError`` (see :class:`mpicoll.Comm`).
ValueError
    ``algorithm`` is not one of this collective's.
MismatchError, ArgumentError, CollectiveTimeout
    Only with ``MPICOLL_DEBUG`` or a timeout (see :class:`mpicoll.Comm`).
"""

_NONBLOCKING = """Nonblocking :meth:`{method}` (MPI_I{lower}).

Same parameters as :meth:`{method}`; leave the buffers' contents alone until the request completes (the
request keeps the buffers themselves alive).

Returns
-------
Request
    An ``MPI.Request``: complete it with ``Wait()``, ``Test()``, or mpi4py's ``MPI.Request.Waitall`` and its
    relatives, with mpi4py's own requests in the same list.
""" + _RAISES

_PERSISTENT = """Persistent :meth:`{method}` (MPI_{method}_init): bound once, run by every ``Start()``.

Same parameters as :meth:`{method}`, plus ``info`` (accepted and ignored, as MPI allows).  The buffers
are bound once: their contents may change between starts, not their memory.

Returns
-------
Prequest
    An ``MPI.Prequest``: start it with ``Start()`` or ``mpicoll.Prequest.Startall`` (not ``MPI.Prequest.Startall``,
    which cannot start it), complete it like a :class:`Request`.
""" + _RAISES


def document(cls: type) -> None:
    """Write the docstrings of ``cls``'s collective methods (blocking, ``I*`` and ``*_init``) from the table."""
    for method, (summary, parameters) in COLLECTIVE_DOCS.items():
        algorithm = _ALGORITHM.format(collective=method.lower()) + (_REPRODUCIBLE if method in _SUMMING else "")
        params = f"\nParameters\n----------\n{parameters}{algorithm}" if parameters.strip() else \
            f"\nParameters\n----------\n{algorithm}"
        getattr(cls, method).__doc__ = f"{summary}\n{params}{_RAISES}"
        names = {"method": method, "lower": method[0].lower() + method[1:]}
        getattr(cls, "I" + names["lower"]).__doc__ = _NONBLOCKING.format(**names)
        getattr(cls, method + "_init").__doc__ = _PERSISTENT.format(**names)
