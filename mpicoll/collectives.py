"""What each collective must compute, stated on symbolic blocks.

A symbolic value is ``(block, runs)``: the data of block index ``block`` reduced
over the ranks in ``runs``, a tuple of half-open ranges ``(lo, hi)`` in the order
the contributions were combined.  Rank r's own input of block b is
``(b, ((r, r + 1),))``; a complete all-reduce result is ``(b, ((0, p),))``.
Data-movement collectives use the same form with a single contributing rank.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Spec", "SPECS", "spec"]

Value = tuple[int, tuple[tuple[int, int], ...]]


def own(rank: int, block: int) -> Value:
    return (block, ((rank, rank + 1),))


@dataclass(frozen=True)
class Spec:
    """Inputs and expected outputs of one collective, per rank, on symbolic blocks."""

    name: str
    reduces: bool
    in_place: bool  # whether an IN_PLACE form exists (the send buffer aliases recv)

    def inputs(self, rank: int, size: int, nblocks: int, **params: int) -> dict[str, list]:
        return _INPUTS[self.name](rank, size, nblocks, **params)

    def outputs(self, rank: int, size: int, nblocks: int, **params: int) -> dict[str, list]:
        return _OUTPUTS[self.name](rank, size, nblocks, **params)


_INPUTS = {
    "allreduce": lambda r, p, nb, **_: {"send": [own(r, b) for b in range(nb)]},
}
_OUTPUTS = {
    "allreduce": lambda r, p, nb, **_: {"recv": [(b, ((0, p),)) for b in range(nb)]},
}

SPECS = {
    "allreduce": Spec("allreduce", reduces=True, in_place=True),
}


def spec(collective: str) -> Spec:
    return SPECS[collective]
