"""The package layout: no import cycle between harnessc's modules, and runtime/'s top level
stays small (its neighbourhoods are packages: loop/, routing/, store/, ...).

Two graphs are checked. The load graph holds the imports run when a module is loaded (module
level, TYPE_CHECKING included: a cycle there breaks loading or hides one in the design). The
dependency graph holds every import, those inside functions too: a lazy import saves the cost
of a third-party package, it does not make a circle between our own modules any less a circle.
Only `if TYPE_CHECKING:` blocks are left out of it (annotations, never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import harnessc

ROOT = Path(harnessc.__file__).parent
RUNTIME_TOP_MAX = 20


def modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ["harnessc", *path.relative_to(ROOT).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def statements(body: list[ast.stmt]):
    """The import statements run when the module loads (not those inside functions or classes)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            yield from statements(node.body)
            yield from statements(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from statements(block)


def is_type_checking(node: ast.stmt) -> bool:
    test = isinstance(node, ast.If) and node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def every_statement(body: list[ast.stmt]):
    """Every import statement, inside functions and classes too, but not under `if TYPE_CHECKING:`."""
    for node in body:
        if is_type_checking(node):
            yield from every_statement(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, None) or []:
                yield from every_statement(child.body if isinstance(child, (ast.ExceptHandler, ast.match_case))
                                           else [child])


def imports(name: str, path: Path, is_package: bool, known: set[str], walk=statements) -> set[str]:
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in walk(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module
        for alias in node.names:  # `from pkg import mod` imports pkg.mod, else names in pkg
            sub = f"{module}.{alias.name}"
            found.add(sub if sub in known else module)
    return {m for m in found if m in known and m != name}


def import_graph(walk=statements) -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, is_pkg, set(found), walk) for name, (path, is_pkg) in found.items()}


def dependency_graph() -> dict[str, set[str]]:
    return import_graph(every_statement)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        result.append(sorted(component))
    return result


def test_the_checker_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_import_graph_sees_relative_and_package_imports():
    graph = import_graph()
    assert "harnessc.runtime.context" in graph["harnessc.runtime.iteration"]  # from .context import
    assert "harnessc.runtime.children.procs" in graph["harnessc.runtime.verify"]  # from .children import procs
    assert "harnessc.runtime.context" in graph["harnessc.runtime.loop.assist"]  # under TYPE_CHECKING


def describe(graph: dict[str, set[str]], found: list[list[str]]) -> str:
    return "\n".join("; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) for c in found)


def test_no_module_level_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    assert found == [], "import cycles (move the shared piece to where it belongs):\n" + describe(graph, found)


def test_the_dependency_graph_sees_function_imports_but_not_type_checking_ones():
    source = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from .b import B
def f():
    try:
        from .c import C
    except ImportError:
        from .d import D
class K:
    def g(self):
        import a.e
"""
    found = {n.names[0].name if isinstance(n, ast.Import) else "." * n.level + (n.module or "")
             for n in every_statement(ast.parse(source).body)}
    assert found == {"typing", ".c", ".d", "a.e"}


def test_no_import_cycle_even_through_function_level_imports():
    """A circle closed by an import inside a function is still a circle of dependency: move the
    piece both sides need to the lower module (or a small new one) instead of importing lazily."""
    graph = dependency_graph()
    found = cycles(graph)
    assert found == [], "dependency cycles (function-level imports count):\n" + describe(graph, found)


def test_runtime_top_level_stays_small():
    top = sorted(p.name for p in (ROOT / "runtime").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= RUNTIME_TOP_MAX, (
        f"harnessc/runtime/ has {len(top)} modules at its top (at most {RUNTIME_TOP_MAX}): put new ones in "
        f"the package of their neighbourhood (loop/, routing/, store/, ...): {top}")


DOORWAY = "harnessc.runtime.plan"  # the runtime's one way into the compiler


def test_the_runtime_reaches_the_compiler_only_through_its_doorway():
    """A runtime module needing the compiler asks runtime/plan.py (function-level imports
    count): what both halves need (the spec's words, argv splitting, protect rules) lives
    below them (vocab.py, argv.py, protectrules.py)."""
    graph = dependency_graph()
    leaks = sorted(f"{m} -> {dep}" for m, deps in graph.items() if m.startswith("harnessc.runtime")
                   and m != DOORWAY for dep in deps if dep.startswith("harnessc.compiler"))
    assert leaks == [], "runtime modules importing the compiler (go through runtime/plan.py):\n" + "\n".join(leaks)
