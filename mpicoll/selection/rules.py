"""Each collective's rule table: what "auto" runs where neither ``MPICOLL_ALGO``, a tuning file nor the cost model
decides (:func:`mpicoll.selection.choose.choose`).

One function per collective, ``rule(size=, nbytes=, count=, commutative=) -> algorithm``; the comments give
the measurements behind the thresholds.  The table of each is also in the docstring of its call's module,
``mpicoll.calls.<collective>``.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["RULES", "KiB", "MiB"]

KiB = 1024
MiB = 1024 * KiB

Rule = Callable[..., str]
#: collective name: its rule
RULES: dict[str, Rule] = {}


def rule(collective: str) -> Callable[[Rule], Rule]:
    """Decorator: register ``collective``'s rule."""

    def register(function: Rule) -> Rule:
        RULES[collective] = function
        return function

    return register


@rule("barrier")
def barrier(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "dissemination"


@rule("bcast")
def bcast(*, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
    if size <= 2 or nbytes < 16 * KiB:
        return "binomial"
    if nbytes < 512 * KiB:
        return "scatter_allgather"
    return "pipelined_chain" if size <= 8 else "double_binary_tree"


@rule("reduce")
def reduce(*, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
    if size <= 2 or nbytes < 16 * KiB or count < size:
        return "binomial"
    return "rabenseifner"


@rule("allreduce")
def allreduce(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    # two ranks: recursive doubling is one exchange, Rabenseifner two of half the size; the halved
    # reduction pays for the extra round only from about 512 KiB (measured at p = 2, recursive doubling
    # against Rabenseifner: 64 KiB 47 against 53 us, 256 KiB 101 against 143 us, 1 MiB 321 against
    # 256 us); from 3 ranks on Rabenseifner's bandwidth wins from 16 KiB
    if size == 1 or nbytes < (512 * KiB if size == 2 else 16 * KiB) or count < size:
        return "recursive_doubling"
    if size & (size - 1) == 0 or not commutative:
        return "rabenseifner"
    if size >= 64 and nbytes < 4 * MiB:
        return "double_binary_tree"
    return "ring"


@rule("gather")
def gather(*, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
    return "binomial" if size > 2 and nbytes < 256 * KiB else "linear"


@rule("gatherv")
def gatherv(*, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
    return "linear"


@rule("scatter")
def scatter(*, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
    return "binomial" if size > 2 and nbytes < 256 * KiB else "linear"


@rule("scatterv")
def scatterv(*, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
    return "linear"


@rule("allgather")
def allgather(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    if nbytes < 64 * KiB:
        return "bruck"
    if size & (size - 1) == 0 and nbytes < MiB:
        return "recursive_doubling"
    return "ring"


@rule("allgatherv")
def allgatherv(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "linear" if size <= 4 else "ring"


@rule("reduce_scatter_block")
def reduce_scatter_block(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    if not commutative:
        return "pairwise"
    if size & (size - 1) == 0 or nbytes < 64 * KiB:
        return "recursive_halving"
    return "ring"


@rule("reduce_scatter")
def reduce_scatter(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "pairwise" if not commutative or size <= 2 else "ring"


@rule("alltoall")
def alltoall(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    if size >= 8 and nbytes // size <= 256:
        return "bruck"
    return "linear" if size <= 4 else "pairwise"


@rule("alltoallv")
def alltoallv(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "linear" if size <= 4 else "pairwise"


@rule("alltoallw")
def alltoallw(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "linear" if size <= 4 else "pairwise"


@rule("scan")
def scan(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "linear" if size <= 2 else "recursive_doubling"


@rule("exscan")
def exscan(*, size: int, nbytes: int, count: int, commutative: bool) -> str:
    return "linear" if size <= 2 else "recursive_doubling"
