"""Each collective's rule table: what "auto" runs where neither ``MPICOLL_ALGO``, a tuning file nor the cost model
decides (:func:`mpicoll.selection.choose.choose`).

A rule is a table of rows, read top to bottom: the first row whose condition holds names the algorithm.
Each row is written once, as the words the documentation shows and the predicate that decides, side by side;
:meth:`Rule.table` renders the words as the reStructuredText table that the docstring of the call's module
(``mpicoll.calls.<collective>``) shows (``tests/unit/test_selection_model.py`` keeps each equal to its rule).
The comments give the measurements behind the thresholds.  ``p`` is the number of ranks; a predicate gets
``size`` (p), ``nbytes`` (the bytes the call's size is measured in, as its header says), ``count`` (elements
of one rank's buffer) and ``commutative`` (of the op).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RULES", "Rule", "Row", "KiB", "MiB"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Row:
    """One row of a rule table: the condition in words, the predicate, the algorithm (and a note on it)."""

    when: str
    holds: Callable[[int, int, int, bool], bool]    # (size, nbytes, count, commutative) -> bool
    algorithm: str
    note: str = ""


def _always(size: int, nbytes: int, count: int, commutative: bool) -> bool:
    return True


def otherwise(algorithm: str, note: str = "") -> Row:
    """The last row of every table."""
    return Row("otherwise", _always, algorithm, note)


class Rule:
    """A collective's rule table, callable as ``rule(size=, nbytes=, count=, commutative=) -> algorithm``."""

    def __init__(self, collective: str, rows: list[Row], header: str = "condition") -> None:
        if rows[-1].holds is not _always:
            raise ValueError(f"the rule table of {collective} must end with an 'otherwise' row")
        self.collective, self.rows, self.header = collective, tuple(rows), header

    def __call__(self, *, size: int, nbytes: int, count: int, commutative: bool = True) -> str:
        return next(row.algorithm for row in self.rows if row.holds(size, nbytes, count, commutative))

    def table(self) -> str:
        """The table as reStructuredText, as the call's docstring shows it."""
        cells = [(self.header, "algorithm")] + [(row.when, row.algorithm + (f" ({row.note})" if row.note else ""))
                                                for row in self.rows]
        left = max(len(a) for a, _ in cells)
        right = max(len(b) for _, b in cells)
        rule = f"{'=' * left}  {'=' * right}"
        lines = [rule, f"{cells[0][0]:<{left}}  {cells[0][1]}".rstrip(), rule]
        lines += [f"{a:<{left}}  {b}".rstrip() for a, b in cells[1:]]
        return "\n".join(lines + [rule])


def _power_of_two(size: int) -> bool:
    return size & (size - 1) == 0


#: the rows the all-to-all family shares (every rank with every rank), and the scans'
_EXCHANGES = [Row("p <= 4", lambda p, n, c, k: p <= 4, "linear", "one round"), otherwise("pairwise")]
_PREFIXES = [Row("p <= 2", lambda p, n, c, k: p <= 2, "linear", "a chain"), otherwise("recursive_doubling")]

#: collective name: its rule
RULES: dict[str, Rule] = {rule.collective: rule for rule in (
    Rule("barrier", [otherwise("dissemination")]),
    Rule("bcast", [
        Row("p <= 2, or fewer than 16 KiB", lambda p, n, c, k: p <= 2 or n < 16 * KiB, "binomial"),
        Row("fewer than 512 KiB", lambda p, n, c, k: n < 512 * KiB, "scatter_allgather"),
        Row("p <= 8", lambda p, n, c, k: p <= 8, "pipelined_chain"),
        otherwise("double_binary_tree")]),
    Rule("reduce", [
        Row("p <= 2, or fewer than 16 KiB, or fewer elements than ranks",
            lambda p, n, c, k: p <= 2 or n < 16 * KiB or c < p, "binomial"),
        otherwise("rabenseifner")]),
    # two ranks: recursive doubling is one exchange, Rabenseifner two of half the size; the halved
    # reduction pays for the extra round only from about 512 KiB (measured at p = 2, recursive doubling
    # against Rabenseifner: 64 KiB 47 against 53 us, 256 KiB 101 against 143 us, 1 MiB 321 against
    # 256 us); from 3 ranks on Rabenseifner's bandwidth wins from 16 KiB
    Rule("allreduce", [
        Row("p = 1, or fewer than 16 KiB (p = 2: 512 KiB), or fewer elements than ranks",
            lambda p, n, c, k: p == 1 or n < (512 * KiB if p == 2 else 16 * KiB) or c < p, "recursive_doubling"),
        Row("p a power of two, or the op is not commutative", lambda p, n, c, k: _power_of_two(p) or not k,
            "rabenseifner"),
        Row("p >= 64 and less than 4 MiB", lambda p, n, c, k: p >= 64 and n < 4 * MiB, "double_binary_tree"),
        otherwise("ring")]),
    Rule("gather", [
        Row("p > 2 and p x count x itemsize < 256 KiB", lambda p, n, c, k: p > 2 and n < 256 * KiB, "binomial"),
        otherwise("linear")]),
    Rule("gatherv", [otherwise("linear")]),
    Rule("scatter", [
        Row("p > 2 and p x count x itemsize < 256 KiB", lambda p, n, c, k: p > 2 and n < 256 * KiB, "binomial"),
        otherwise("linear")]),
    Rule("scatterv", [otherwise("linear")]),
    Rule("allgather", [
        Row("n < 64 KiB", lambda p, n, c, k: n < 64 * KiB, "bruck"),
        Row("p a power of two and n < 1 MiB", lambda p, n, c, k: _power_of_two(p) and n < MiB, "recursive_doubling"),
        otherwise("ring")], header="condition (n = bytes received in all)"),
    Rule("allgatherv", [
        Row("p <= 4", lambda p, n, c, k: p <= 4, "linear", "one round"),
        otherwise("ring")]),
    Rule("reduce_scatter_block", [
        Row("the op is not commutative", lambda p, n, c, k: not k, "pairwise"),
        Row("p a power of two, or n < 64 KiB", lambda p, n, c, k: _power_of_two(p) or n < 64 * KiB,
            "recursive_halving"),
        otherwise("ring")], header="condition (n = bytes of one rank's input)"),
    Rule("reduce_scatter", [
        Row("the op is not commutative, or p <= 2", lambda p, n, c, k: not k or p <= 2, "pairwise"),
        otherwise("ring")]),
    Rule("alltoall", [
        Row("p >= 8 and b <= 256 bytes", lambda p, n, c, k: p >= 8 and n // p <= 256, "bruck"),
        *_EXCHANGES], header="condition (b = bytes of one block)"),
    Rule("alltoallv", _EXCHANGES),
    Rule("alltoallw", _EXCHANGES),
    Rule("scan", _PREFIXES),
    Rule("exscan", _PREFIXES),
)}
