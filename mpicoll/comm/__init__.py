"""``mpicoll.Comm``: the communicator class, its per-communicator state, and the paths its calls take."""

from mpicoll.comm.comm import Comm

__all__ = ["Comm"]
