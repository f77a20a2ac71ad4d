"""The three forms of a collective call: blocking, nonblocking (``I*``) and persistent (``*_init``).

Each form draws its tags from a sequence of its own (:meth:`mpicoll.program.state.CommState.next_tag`), and the
flight recorder notes which form a call took (:mod:`mpicoll.engine.recorder`).
"""

BLOCKING, NONBLOCKING, PERSISTENT = 0, 1, 2

__all__ = ["BLOCKING", "NONBLOCKING", "PERSISTENT"]
