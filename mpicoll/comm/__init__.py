"""``mpicoll.Comm``: the communicator class, its per-communicator state, and the paths its calls take."""

from mpicoll.comm.comm import Cartcomm, Comm, Distgraphcomm, Graphcomm, Intercomm

__all__ = ["Comm", "Cartcomm", "Graphcomm", "Distgraphcomm", "Intercomm"]
