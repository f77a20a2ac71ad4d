"""A Sphinx extension: the tables of ``docs/support.rst``, made from the package and the test runner when the
docs are built, so that what the page says is supported is what exists.

Directives:

* ``.. mpicoll-support::``: every collective ``mpicoll.Comm`` runs (``mpicoll.calls.table.METHODS``), with
  its nonblocking and persistent forms, in-place form and algorithms (the registry's);
* ``.. mpicoll-support-options::``: the keyword arguments mpicoll's calls take beyond mpi4py's, and which
  calls take each (read off the methods' signatures);
* ``.. mpicoll-support-objects::``: the lowercase (pickle-based) collectives that mpicoll runs itself;
* ``.. mpicoll-support-tested::``: the process counts the test suite runs at (read from
  ``tests/run_all.py``).

``tests/unit/test_support.py`` checks these tables and the claims that the other pages and the README make.
"""

from __future__ import annotations

import ast
import inspect
import os
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import mpicoll
from mpicoll.families import registry
from mpicoll.ir.contracts import spec as get_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def methods() -> tuple[str, ...]:
    """The buffer collectives ``mpicoll.Comm`` runs itself, by mpi4py method name."""
    from mpicoll.calls.table import METHODS

    return METHODS


def family(method: str) -> str:
    """The registry's collective whose algorithms run ``method`` (the neighbourhood v and w variants run their
    base collective's schedule)."""
    name = method.lower()
    if name in registry.collectives():
        return name
    return "neighbor_allgather" if name.startswith("neighbor_allgather") else "neighbor_alltoall"


def nonblocking(method: str) -> str:
    """``Allreduce`` -> ``Iallreduce``."""
    return "I" + method[0].lower() + method[1:]


def _list_table(head: list[str], rows: list[list[str]]) -> str:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [head, *rows]:
        lines.append("   * - " + row[0])
        lines += [f"     - {c}" for c in row[1:]]
    return "\n".join(lines) + "\n"


def own(name: str) -> bool:
    """Whether ``mpicoll.Comm`` defines the method ``name`` itself (not inherited from mpi4py)."""
    from mpicoll import Comm

    return any(name in vars(cls) for cls in Comm.__mro__ if cls.__module__.startswith("mpicoll"))


def support_rows() -> list[dict[str, Any]]:
    """One row per collective: method, its nonblocking and persistent names where ``mpicoll.Comm`` defines
    them (else None), in place, algorithms."""
    rows = []
    for method in methods():
        coll = family(method)
        in_place = get_spec(coll).in_place if method.lower() == coll else False
        rows.append({"method": method, "collective": coll, "own": own(method),
                     "nonblocking": nonblocking(method) if own(nonblocking(method)) else None,
                     "persistent": method + "_init" if own(method + "_init") else None,
                     "in_place": in_place, "algorithms": registry.algorithms(coll)})
    return rows


def support_table() -> str:
    """The matrix: call, its nonblocking and persistent forms, in place, its algorithms (linked to their pages)."""
    rows = []
    for row in support_rows():
        algs = ", ".join(f":ref:`{a} <{row['collective']}-{a}>`" for a in row["algorithms"])
        rows.append([f"``{row['method']}``", algs, f"``{row['nonblocking']}``" if row["nonblocking"] else "no",
                     f"``{row['persistent']}``" if row["persistent"] else "no", "yes" if row["in_place"] else "no"])
    return _list_table(["Call", "algorithms", "nonblocking", "persistent", "in place"], rows)


def options() -> dict[str, list[str]]:
    """Keyword-only arguments of mpicoll's collectives (blocking, nonblocking, persistent, object) -> the calls
    that take them, read off the signatures."""
    from mpicoll import Comm

    names = [m for meth in methods() for m in (meth, nonblocking(meth), meth + "_init")] + object_collectives()
    found: dict[str, list[str]] = {}
    for name in names:
        fn = getattr(Comm, name, None)
        if fn is None:
            continue
        for param in inspect.signature(fn).parameters.values():
            if param.kind is inspect.Parameter.KEYWORD_ONLY:
                found.setdefault(param.name, []).append(name)
    return found


def options_table() -> str:
    """Each option and the calls that take it (all of a collective's forms named once, by its blocking name)."""
    rows = []
    every = {m for meth in methods() for m in (meth, nonblocking(meth), meth + "_init")} | set(object_collectives())
    from mpicoll import Comm

    every = {m for m in every if hasattr(Comm, m)}
    for name, calls in sorted(options().items()):
        if set(calls) == every:
            where = "every call of the table above, in every form, and every object collective"
        else:
            words = []
            for call in calls:   # a collective whose three forms all take it: its blocking name, once
                base = next((m for m in methods() if call in (m, nonblocking(m), m + "_init")), None)
                forms = {base, nonblocking(base), base + "_init"} & every if base else {call}
                label = f"``{base}`` (all forms)" if base and forms <= set(calls) else f"``{call}``"
                if label not in words:
                    words.append(label)
            where = ", ".join(words)
        rows.append([f"``{name}=``", where])
    return _list_table(["option", "calls"], rows)


def object_collectives() -> list[str]:
    """The lowercase collectives that ``mpicoll.Comm`` runs itself rather than mpi4py."""
    from mpi4py import MPI

    from mpicoll import Comm

    names = ("barrier", "bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "scan",
             "exscan", "neighbor_allgather", "neighbor_alltoall")
    base = {n: getattr(MPI.Intracomm, n, getattr(MPI.Topocomm, n, None)) for n in names}
    return [n for n in names if getattr(Comm, n, None) is not None and getattr(Comm, n) is not base[n]]


def objects_text() -> str:
    return ", ".join(f"``{n}``" for n in object_collectives()) + "\n"


def tested_sizes() -> dict[str, tuple[int, ...]]:
    """The process counts of ``tests/run_all.py``: its ``*_SIZES`` constants, read without running it."""
    tree = ast.parse(open(os.path.join(ROOT, "tests", "run_all.py"), encoding="utf-8").read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_SIZES"):
                found[name] = ast.literal_eval(node.value)
    return found


TESTED = {"DEFAULT_SIZES": "mpicoll's MPI tests (``tests/mpi``)",
          "MPI4PY_SIZES": "mpi4py's own collective test suites against ``mpicoll.Comm``",
          "MPI4PY_FRESH_SIZES": "the same, every test's communicators wrapped anew",
          "TORCH_SIZES": "the ``torch.distributed`` backend's tests",
          "EXAMPLE_SIZES": "every example of ``mpicoll.examples``"}


def tested_table() -> str:
    sizes = tested_sizes()
    rows = [[TESTED.get(name, f"``{name}``"), ", ".join(map(str, sorted(counts)))] for name, counts in sizes.items()]
    return _list_table(["what runs", "at these process counts"], rows)


class _Rst(SphinxDirective):
    text: Any = None

    def run(self) -> list[nodes.Node]:
        node = nodes.section()
        nested_parse_with_titles(self.state, StringList(type(self).text().splitlines(),
                                                        source=f"<mpicoll {self.name}>"), node)
        return node.children


def _directive(make: Any) -> type:
    return type(f"Directive_{make.__name__}", (_Rst,), {"text": staticmethod(make)})


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("mpicoll-support", _directive(support_table))
    app.add_directive("mpicoll-support-options", _directive(options_table))
    app.add_directive("mpicoll-support-objects", _directive(objects_text))
    app.add_directive("mpicoll-support-tested", _directive(tested_table))
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": mpicoll.__version__}
