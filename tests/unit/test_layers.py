"""The layers of ``mpicoll`` depend downwards only, import no module in a circle, and the pure ones need no mpi4py.

The layers, lowest first (a module may import its own layer and lower ones)::

    errors < config < compiled < bounded < ir < families < analysis < selection < data < engine < gpu < program
           < calls < comm < tools < applications

The applications are ``bench``, ``examples``, ``torch``, ``__main__``, ``launch``
and the package's own ``__init__`` (the public names: ``mpicoll.Comm`` and the
rest).  Each may use every layer and the package itself (``import mpicoll``, as
users do), but no other application, except the examples, which show them all
(``mpicoll.examples.torch_distributed`` runs on ``mpicoll.torch``).  Exceptions, kept few:

- ``tools`` is the applications' shared toolbox (finding mpirun, size units, the
  ``show``/``verify``/``model`` commands, fetching mpi4py's sdist), so it is a
  layer below them rather than one of them: ``launch``, ``__main__``, ``bench``
  and ``examples`` use it, and it uses no application;
- ``LOWER_USES``: single edges upwards that are allowed, each with its reason.

Imports are read from the source (``ast``), wherever they are: at the top of a
module, in a function (they run too, later), ``importlib.import_module`` with a
literal name (an f-string ``f"mpicoll.calls.{x}"`` counts as importing every
public module of ``mpicoll.calls``); imports under ``if TYPE_CHECKING:`` are
skipped (they never run).  Importing ``a.b.c`` also runs ``a/__init__`` and
``a/b/__init__``, which Python allows to be in progress: those implicit edges
are not counted.

Circles: no two modules may reach each other through imports (a strongly
connected component of more than one module).
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mpicoll"

LAYERS = ["errors", "config", "compiled", "bounded", "ir", "families", "analysis", "selection", "data", "engine",
          "gpu", "program",
          "calls", "comm", "tools"]
APPLICATIONS = ["bench", "examples", "torch", "__main__", "launch", "__init__"]
PURE_LAYERS = ["ir", "families", "analysis", "selection"]   # importable without mpi4py

# (module, module of a higher layer it may import): each a reason
LOWER_USES = {
    # the simulator reduces with the executor's kernels, so that a simulated result is the one a run gives;
    # data.kernels needs no MPI, data.ops is imported (in a function) only for an MPI.Op or mpicoll.Op
    ("mpicoll.analysis.simulate", "mpicoll.data.kernels"),
    ("mpicoll.analysis.simulate", "mpicoll.data.ops"),
}


# -- the module graph ---------------------------------------------------------------------------------

def module_names() -> dict[str, Path]:
    """Every module of the package: dotted name -> file (a package is its ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_names()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _resolve(name: str) -> list[str]:
    """The package modules that ``import name`` reaches (the longest prefix that is a module)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return [candidate]
        parts.pop()
    return []


def _relative_base(module: str, level: int) -> str:
    is_package = MODULES[module].name == "__init__.py"
    parts = module.split(".")
    keep = len(parts) - level + (1 if is_package else 0)
    return ".".join(parts[:keep])


def _import_module_targets(call: ast.Call) -> list[str]:
    """What ``importlib.import_module(...)`` with a literal (or literal-prefixed f-string) name imports."""
    if not call.args:
        return []
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return _resolve(arg.value)
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        if prefix.startswith("mpicoll.") and prefix.endswith("."):
            rest = [m[len(prefix):] for m in MODULES if m.startswith(prefix)]
            return [prefix + r for r in rest if "." not in r and not r.startswith("_")]
    return []


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node``, skipping the bodies of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk(other)
            continue
        yield child
        yield from _walk(child)


def imports_of(module: str) -> set[str]:
    """The package modules ``module`` imports, at its top or anywhere inside it."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    out: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.update(_resolve(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = _relative_base(module, node.level) if node.level else ""
            source = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names:   # ``from a import b``: b may be a module of its own
                out.update(_resolve(f"{source}.{alias.name}") or _resolve(source))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module"):
            out.update(_import_module_targets(node))
    out.discard(module)
    return out


GRAPH = {module: imports_of(module) for module in MODULES}


@functools.cache
def _top_level_names(module: str) -> set[str]:
    """Names bound at the top of ``module`` (definitions, assignments, imports) and those of its ``__all__``."""
    tree = ast.parse(MODULES[module].read_text())
    names: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
              and isinstance(node.value, (ast.List, ast.Tuple))):
            names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return names


def unresolved_imports(module: str) -> list[str]:
    """Imports of ``mpicoll`` names that name no module and no top-level name of one (stale after a move)."""
    tree = ast.parse(MODULES[module].read_text())
    out = []
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == "mpicoll" and a.name not in MODULES]
        elif isinstance(node, ast.ImportFrom):
            base = _relative_base(module, node.level) if node.level else ""
            source = ".".join(p for p in (base, node.module or "") if p)
            if source.split(".")[0] != "mpicoll":
                continue
            if source not in MODULES:
                out.append(source)
                continue
            out += [f"{source}.{a.name}" for a in node.names
                    if f"{source}.{a.name}" not in MODULES and a.name not in _top_level_names(source)]
    return out


def test_every_import_of_mpicoll_resolves() -> None:
    broken = sorted(f"{m}: {name}" for m in MODULES for name in unresolved_imports(m))
    assert not broken, "imports of names that do not exist:\n  " + "\n  ".join(broken)


# -- layers ---------------------------------------------------------------------------------------------

def layer(module: str) -> str:
    """``"gpu"`` for ``mpicoll.gpu.ipc``; ``"__init__"`` for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank(module: str) -> int:
    name = layer(module)
    return LAYERS.index(name) if name in LAYERS else len(LAYERS)


def allowed(importer: str, imported: str) -> bool:
    if rank(imported) < rank(importer) or layer(imported) == layer(importer):
        return True
    if rank(imported) > rank(importer):
        return (importer, imported) in LOWER_USES
    # two applications: only the package's public names, except that an example may show any application
    return imported == "mpicoll" or layer(importer) == "examples"


def test_every_module_is_in_a_known_layer() -> None:
    unknown = sorted(m for m in MODULES if layer(m) not in LAYERS + APPLICATIONS)
    assert not unknown, f"modules outside the layers (add the layer to LAYERS or APPLICATIONS): {unknown}"


def test_imports_point_down_the_layers() -> None:
    wrong = sorted(f"{a} ({layer(a)}) imports {b} ({layer(b)})"
                   for a, targets in GRAPH.items() for b in targets if not allowed(a, b))
    assert not wrong, "imports against the layer order:\n  " + "\n  ".join(wrong)


# -- circles --------------------------------------------------------------------------------------------

def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the strongly connected components of ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def test_strongly_connected_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert sorted(map(tuple, strongly_connected(graph))) == [("a", "b", "c"), ("d",), ("e",)]


def _path(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    """One circle through ``start`` inside ``members`` (breadth first), for the message."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, node, start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start]


def test_no_import_circle() -> None:
    circles = [c for c in strongly_connected(GRAPH) if len(c) > 1]
    described = [f"{len(c)} modules: {', '.join(c)}\n    e.g. {' -> '.join(_path(GRAPH, c[0], set(c)))}"
                 for c in circles]
    assert not circles, "modules that import each other, directly or not:\n  " + "\n  ".join(described)


# -- the pure layers need no mpi4py ------------------------------------------------------------------------

@pytest.mark.parametrize("name", PURE_LAYERS)
def test_pure_layer_imports_without_mpi4py(name: str) -> None:
    """Every module of the layer imports where ``import mpi4py`` fails (``sys.modules['mpi4py'] = None``)."""
    modules = sorted(m for m in MODULES if layer(m) == name)
    code = ("import importlib, sys\nsys.modules['mpi4py'] = None\nfailed = []\n"
            f"for name in {modules!r}:\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ImportError as exc:\n"
            "        failed.append(f'{name}: {exc}')\n"
            "print('\\n'.join(failed))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip(), f"modules of {name} that need mpi4py:\n{out.stdout}"


def test_every_module_says_what_it_is():
    """A reader opening any module (or a package's ``__init__``) reads first what it is: a docstring whose first
    line is a sentence."""
    silent = sorted(m for m, path in MODULES.items()
                    if not (ast.get_docstring(ast.parse(path.read_text())) or "").split("\n")[0].strip())
    assert not silent, f"modules without a first line saying what they are: {silent}"


# -- where point-to-point messages are posted ----------------------------------------------------------------

#: mpi4py's point-to-point calls (buffers and pickled objects), probes and persistent requests
P2P_CALLS = frozenset({"Send", "Recv", "Sendrecv", "Isend", "Irecv", "Isendrecv", "Ssend", "Issend", "Bsend",
                       "Rsend", "Send_init", "Recv_init", "Psend_init", "Precv_init", "Probe", "Iprobe", "Mprobe",
                       "Improbe", "Mrecv", "Imrecv", "send", "recv", "sendrecv", "isend", "irecv", "ssend",
                       "issend", "probe", "iprobe", "mprobe", "improbe"})
#: the modules of mpicoll's layers that post them: the engine's reference, the object collectives' transport,
#: torch's own send and receive (the compiled engine posts the same rounds from C)
POSTING = {"mpicoll.engine.rounds", "mpicoll.calls.objects.engine", "mpicoll.torch.process_group"}
#: the layers whose ``.send``/``.recv`` build schedules, not messages; the programs that teach or measure
#: point-to-point messages themselves
NOT_RUNTIME = ("mpicoll.ir", "mpicoll.families", "mpicoll.analysis", "mpicoll.selection", "mpicoll.examples",
               "mpicoll.tools", "mpicoll.bench")


#: calls of those names that are not MPI's: (module, name) -> what they are
NOT_MPI = {("mpicoll.engine.recorder", "recv"): "a socket's (the wakeup of the SIGUSR1 handler)"}


def _posts(name: str, path: Path) -> list[int]:
    """The lines of module ``name`` (at ``path``) that call one of :data:`P2P_CALLS` as a method."""
    return sorted(node.lineno for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in P2P_CALLS and (name, node.func.attr) not in NOT_MPI)


def test_point_to_point_messages_are_posted_from_three_modules():
    """A transport or a safety net on messages is written once: outside :data:`POSTING`, no module of the
    runtime calls MPI's point-to-point functions (the rest go through :mod:`mpicoll.engine.rounds`)."""
    posting = {name: lines for name, path in MODULES.items()
               if not name.startswith(NOT_RUNTIME) and (lines := _posts(name, path))}
    assert set(posting) <= POSTING, {name: lines for name, lines in posting.items() if name not in POSTING}
    assert {"mpicoll.engine.rounds", "mpicoll.calls.objects.engine"} <= set(posting)   # (the check sees them)
