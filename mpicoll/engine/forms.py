"""The three forms of a collective call: blocking, nonblocking (``I*``) and persistent (``*_init``).

Every call draws the next number of its communicator's one sequence; its tag lies in its form's range
(:meth:`mpicoll.program.state.CommState.next_tag`), and the flight recorder notes which form a call took
(:mod:`mpicoll.engine.recorder`).
"""

BLOCKING, NONBLOCKING, PERSISTENT = 0, 1, 2

__all__ = ["BLOCKING", "NONBLOCKING", "PERSISTENT", "draw", "number"]


def draw(tags: list[int], kind: int) -> int:
    """The next call's tag, of form ``kind``, from a communicator's ``tags`` (``[per_kind, last number, sigs]``:
    :meth:`mpicoll.program.state.CommState.next_tag`, whose sequence an intercommunicator shares with its groups
    merged)."""
    per_kind, sigs = tags[0], tags[2]
    number = tags[1] = tags[1] % (per_kind // sigs - 1) + 1
    return kind * per_kind + number * sigs


def number(tags: list[int], tag: int) -> int:
    """The call number of ``tag`` (a communicator's ``tags``: see
    :meth:`mpicoll.program.state.CommState.next_tag`), its plan's signature left out."""
    return (tag % tags[0]) // tags[2]
