"""The package layout: no import cycle between harnessc's modules, and runtime/'s top level
stays small (its neighbourhoods are packages: loop/, routing/, store/, ...).

Two graphs are checked. The load graph holds the imports run when a module is loaded (module
level, TYPE_CHECKING included: a cycle there breaks loading or hides one in the design). The
dependency graph holds every import, those inside functions too: a lazy import saves the cost
of a third-party package, it does not make a circle between our own modules any less a circle.
Only `if TYPE_CHECKING:` blocks are left out of it (annotations, never run).

Two vocabularies are checked too: a task state is named by its TaskState member, never
spelled as a string (harnessc/states.py), and every event recorded or read is of a kind
harnessc/events.py declares, with the fields it declares.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import sys
from pathlib import Path

import harnessc
from harnessc.events import EVENTS
from harnessc.states import TaskState

ROOT = Path(harnessc.__file__).parent
RUNTIME_TOP_MAX = 20


@functools.lru_cache(maxsize=None)
def parse(source: str) -> ast.Module:
    """A module's tree, parsed once per text: the checks below each walk every module of the
    package (none changes a tree), and parsing it all again was most of their time."""
    return ast.parse(source)


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
    for node in walk(parse(path.read_text()).body):
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
             for n in every_statement(parse(source).body)}
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


def test_the_compiler_never_imports_the_runtime():
    """lint and build stand on their own: what they share with a run (git, a child's
    environment) lives below both halves (gitcmd.py, gitrepo.py, childenv.py)."""
    graph = dependency_graph()
    leaks = sorted(f"{m} -> {dep}" for m, deps in graph.items() if m.startswith("harnessc.compiler")
                   for dep in deps if dep.startswith("harnessc.runtime"))
    assert leaks == [], "compiler modules importing the runtime (move the shared piece below both):\n" + \
        "\n".join(leaks)


def test_neither_half_imports_the_commands():
    """cli.py and commands/ stand on top: a helper both need (command_prefix) lives below."""
    graph = dependency_graph()
    leaks = sorted(f"{m} -> {dep}" for m, deps in graph.items() if m.startswith(("harnessc.compiler", "harnessc.runtime"))
                   for dep in deps if dep.startswith(("harnessc.commands", "harnessc.cli")))
    assert leaks == [], "modules importing the commands (move the piece below):\n" + "\n".join(leaks)


# the pieces both halves share: they import neither half (nor what stands on them)
BELOW_BOTH = ("harnessc.argv", "harnessc.childenv", "harnessc.diagnostics", "harnessc.errors", "harnessc.events",
              "harnessc.gitcmd", "harnessc.gitrepo", "harnessc.jinja", "harnessc.protectrules", "harnessc.providers",
              "harnessc.states", "harnessc.textsafe", "harnessc.vocab", "harnessc.workspace")
ABOVE = ("harnessc.compiler", "harnessc.runtime", "harnessc.commands", "harnessc.cli", "harnessc.draft",
         "harnessc.importers", "harnessc.runreport")


def test_the_shared_pieces_stay_below_both_halves():
    graph = dependency_graph()
    assert set(BELOW_BOTH) <= set(graph), f"modules named in BELOW_BOTH are gone: {set(BELOW_BOTH) - set(graph)}"
    below = [m for m in graph if any(m == b or m.startswith(b + ".") for b in BELOW_BOTH)]
    leaks = sorted(f"{m} -> {dep}" for m in below for dep in graph[m] if dep.startswith(ABOVE))
    assert leaks == [], "a shared piece importing a half (it must stand below both):\n" + "\n".join(leaks)


# ------------------------------------------------------------------ imports inside functions

# Third-party packages heavy enough to be imported where first needed (an SDK, Ray, a chart or
# template library, GitPython, a tracer), each by one module of ours: the module of its job, or
# a small facade in front of it (jinja.py, runtime/worktree/gitpython.py). No other module
# imports the package, at its top or in a function: it asks that one.
HEAVY = {
    "anthropic": "runtime/agents/anthropic_api.py", "openai": "runtime/agents/openai_api.py",
    "ray": "runtime/executor/rayconfig.py", "git": "runtime/worktree/gitpython.py",  # GitPython
    "matplotlib": "runreport/charts.py", "jinja2": "jinja.py", "markupsafe": "jinja.py",
    "opentelemetry": "runtime/observe/telemetry.py", "requests": "runtime/observe/telemetry.py",
    "lark": "grammar/generate.py",  # the parsers are generated: lint never loads lark
}
# Lighter packages some modules import where first needed, so that lint or a run starts faster.
LAZY_THIRD_PARTY = {
    "rich": {"commands/state.py", "commands/running.py"},
    "pydantic": {"compiler/load.py"}, "jsonschema": {"compiler/check.py", "compiler/validate.py"},
    "referencing": {"compiler/validate.py"}, "re2": {"compiler/userregex.py"},
    "orjson": {"compiler/planjson.py"}, "yaml": {"explain.py"},
}
# Standard-library modules lint's start-up does without (each a few ms of it): imported where used.
LAZY_STDLIB = {"hashlib", "logging", "ctypes", "decimal", "difflib", "unicodedata", "re", "xml"}
# Where our own modules may be imported inside a function: in commands/ (and completion.py),
# a command loads the half it drives only when it runs; elsewhere, what each module may defer
# today (lint never loads build's half, a run loads no compiler but through runtime/plan.py,
# a Ray worker's function loads the runtime there). A new one fails: import it at the top of
# the module, or move what both sides need below them; a real start-up saving is a budget raised here.
# An import whose line says `# lazy: <why>` is a commented exception.
LAZY_OWN_ANYWHERE = ("commands/", "completion.py")
GENERATED = {"grammar/lark_parsers.py"}  # Lark's stand-alone runtime, as Lark writes it
LAZY_OWN = {
    "compiler/__init__.py": 5, "compiler/check.py": 7, "compiler/contract_schema.py": 4, "compiler/fix.py": 1,
    "compiler/gitcheck.py": 2, "compiler/ir.py": 1, "compiler/load.py": 3, "compiler/output.py": 1,
    "compiler/plan.py": 5, "compiler/promptorder.py": 2, "compiler/prompts.py": 8, "compiler/retrieval.py": 1,
    "compiler/roadmap.py": 2, "compiler/rules/parse.py": 3, "compiler/scaffold.py": 1, "compiler/schemas.py": 1,
    "compiler/synth.py": 3, "compiler/validate.py": 4, "compiler/yamlsafe.py": 1, "draft/rounds.py": 4,
    "grammar/generate.py": 1, "planfile.py": 1, "providers/__init__.py": 2,
    "providers/unit.py": 1, "runreport/__init__.py": 3, "runreport/html.py": 2, "runtime/doctor.py": 3, "runtime/executor/ray.py": 1,
    "runtime/executor/remote.py": 7, "runtime/loop/loopflags.py": 1, "runtime/plan.py": 6,
    "runtime/scheduler.py": 1, "runtime/session.py": 1, "runtime/worktree/isolation.py": 1,
    "runtime/worktree/runbranches.py": 2,
}


def function_imports(tree: ast.AST):
    """(import statement, guarded) for each import inside a function (not under `if
    TYPE_CHECKING:`); guarded: in a `try` that catches ImportError (a check that it is there)."""
    def visit(node: ast.AST, in_function: bool, guarded: bool):
        for child in ast.iter_child_nodes(node):
            if is_type_checking(child):
                continue
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, guarded
            catches = isinstance(child, ast.Try) and any(
                h.type is not None and "ImportError" in ast.unparse(h.type) for h in child.handlers)
            yield from visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)),
                             guarded or catches)
    yield from visit(tree, False, False)


def imported_names(node: ast.stmt, name: str, is_package: bool, known: set[str]) -> list[str]:
    """The modules a statement loads: `from a import b` loads a, and a.b when that is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = (name if is_package else name.rpartition(".")[0]).split(".")
        module = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [module, *(f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known
                      or (module.split(".")[0] in sys.stdlib_module_names and is_module(f"{module}.{a.name}")))]


@functools.lru_cache(maxsize=None)
def is_module(name: str) -> bool:
    """Whether a standard-library name is a module (`from importlib import resources`)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def loaded_with() -> dict[str, set[str]]:
    """Every module (ours or not) loaded when each of our modules is, by module-level imports
    (its packages' too; not those under TYPE_CHECKING)."""
    found = modules()
    direct = {}
    for name, (path, is_package) in found.items():
        body = [n for n in parse(path.read_text()).body if not is_type_checking(n)]
        direct[name] = {m for node in statements(body) for m in imported_names(node, name, is_package, set(found))}
    closure: dict[str, set[str]] = {}
    for start in found:
        parts = start.split(".")
        todo, seen = [*(".".join(parts[:i]) for i in range(1, len(parts) + 1))], set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in direct:
                for m in direct[name]:
                    mparts = m.split(".")
                    todo += [".".join(mparts[:i]) for i in range(1, len(mparts) + 1)]
        closure[start] = seen
    return closure


def lazy_import_problems() -> list[str]:
    found, closure, problems = modules(), loaded_with(), []
    always = closure["harnessc.cli"]  # what every harnessc process loads
    own: dict[str, int] = {}
    for name, (path, is_package) in sorted(found.items()):
        rel = path.relative_to(ROOT).as_posix()
        if rel in GENERATED:
            continue
        source = path.read_text()
        lines = source.splitlines()
        for node, guarded in function_imports(parse(source)):
            if "# lazy:" in lines[node.lineno - 1]:
                continue  # a commented exception (a closure run on a Ray worker, a rare fallback)
            targets = imported_names(node, name, is_package, set(found))
            where = f"{rel}:{node.lineno}: {ast.unparse(node)}"
            if not guarded and name not in targets and all(t in closure[name] or t in always for t in targets):
                problems.append(f"{where}: already loaded with the module: import it at the top")
            top = targets[0].split(".")[0]
            if top == "harnessc":
                own[rel] = own.get(rel, 0) + 1
            elif top in sys.stdlib_module_names:
                if top not in LAZY_STDLIB and not guarded:
                    problems.append(f"{where}: a standard module: import it at the top (or list it in LAZY_STDLIB)")
            elif rel != HEAVY.get(top) and rel not in LAZY_THIRD_PARTY.get(top, ()):
                problems.append(f"{where}: {top} is not a package this module defers (HEAVY, LAZY_THIRD_PARTY)")
    for rel, n in sorted(own.items()):
        if not rel.startswith(LAZY_OWN_ANYWHERE) and n > LAZY_OWN.get(rel, 0):
            problems.append(f"{rel}: {n} imports of our modules inside functions, {LAZY_OWN.get(rel, 0)} allowed "
                            "(LAZY_OWN): import at the top, or move the shared piece below both")
    return problems


def test_the_lazy_import_checker_finds_what_is_already_loaded():
    tree = parse("import os\ndef f():\n    import json\n    try:\n        import ray\n"
                     "    except ImportError:\n        pass\nif TYPE_CHECKING:\n    from x import y\n")
    assert [(ast.unparse(n), g) for n, g in function_imports(tree)] == [("import json", False), ("import ray", True)]
    closure = loaded_with()
    assert "harnessc.diagnostics" in closure["harnessc.compiler.check"]
    assert "harnessc.compiler.plan" not in closure["harnessc.compiler.check"]  # lint does not load build's half


def test_imports_inside_functions_only_defer_something_heavy():
    """An import inside a function saves start-up only when its module is not loaded anyway:
    third-party ones only for the heavy packages (HEAVY), each behind the module of its job;
    our own ones only where a command or lint would otherwise load a half it does not use."""
    problems = lazy_import_problems()
    assert problems == [], "imports inside functions:\n" + "\n".join(problems)


def heavy_importers(sources: dict[str, str]) -> dict[str, set[str]]:
    """The modules (paths under harnessc/) that import each heavy package, anywhere in them."""
    found: dict[str, set[str]] = {}
    for rel, source in sources.items():
        for node in ast.walk(parse(source)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for top in {n.split(".")[0] for n in names} & set(HEAVY):
                found.setdefault(top, set()).add(rel)
    return found


def heavy_import_problems(sources: dict[str, str]) -> list[str]:
    found = heavy_importers(sources)
    return [f"{rel}: imports {package}: only {HEAVY[package]} may (HEAVY): use what it offers"
            for package, rels in sorted(found.items()) for rel in sorted(rels) if rel != HEAVY[package]] + [
        f"{rel}: named in HEAVY for {package}, but does not import it" for package, rel in sorted(HEAVY.items())
        if rel in sources and rel not in found.get(package, ())]


def test_the_heavy_import_checker_finds_a_second_importer():
    sources = {"runtime/executor/rayconfig.py": "def f():\n    import ray\n",
               "runtime/doctor.py": "def g():\n    from ray.util import x\n", "m.py": "import os\nimport rayx\n",
               "runtime/agents/anthropic_api.py": "import json\n"}
    assert heavy_import_problems(sources) == [
        "runtime/doctor.py: imports ray: only runtime/executor/rayconfig.py may (HEAVY): use what it offers",
        "runtime/agents/anthropic_api.py: named in HEAVY for anthropic, but does not import it"]


def test_each_heavy_package_is_imported_by_one_module():
    """Ray, GitPython, an SDK, Jinja, matplotlib, ...: each met in one module (HEAVY), so its
    cost, its version quirks and its private APIs are in one place."""
    sources = {rel: path.read_text() for path in sorted(ROOT.rglob("*.py"))
               if (rel := path.relative_to(ROOT).as_posix()) not in GENERATED}
    problems = heavy_import_problems(sources)
    assert problems == [], "heavy packages imported outside their module:\n" + "\n".join(problems)


# ------------------------------------------------------------------ states are named, not spelled

STATE_VALUES = {s.value for s in TaskState}
STATES_MODULE = ROOT / "states.py"
# calls whose positional arguments (or state=/final_state=) are task states
STATE_CALLS = {"set_state", "finish_task", "_finish", "ended", "Done", "_kept_records"}
STATE_KEYS = {"state", "final_state"}


def state_like(node: ast.AST) -> bool:
    """An expression holding a task state: `state`, `x.outcome`, `row["state"]`, `row.get("state")`,
    `states[tid]`, `states.get(tid)`."""
    if isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Subscript):
        return (isinstance(node.slice, ast.Constant) and node.slice.value in STATE_KEYS) or state_like(node.value)
    elif isinstance(node, ast.Call):
        func = node.func
        return isinstance(func, ast.Attribute) and func.attr == "get" and bool(node.args) and (
            state_like(func.value) or (isinstance(node.args[0], ast.Constant) and node.args[0].value in STATE_KEYS))
    else:
        return False
    return name in ("outcome", "ending", "ds") or name.endswith(("state", "states"))


def spelled(node: ast.AST | None):
    """The bare state strings in an expression that is (or holds, or chooses between) states."""
    if isinstance(node, ast.Constant) and node.value in STATE_VALUES and isinstance(node.value, str):
        yield node
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for item in node.elts:
            yield from spelled(item)
    elif isinstance(node, ast.IfExp):
        yield from spelled(node.body)
        yield from spelled(node.orelse)
    elif isinstance(node, ast.BoolOp):  # row.get("state") or "pending"
        for value in node.values:
            yield from spelled(value)


def bare_state_nodes(source: str):
    """Each state spelled as a string where a state is meant: compared with,
    assigned to or stored under a state, passed to a call that takes one, returned, a state group."""
    for node in ast.walk(parse(source)):
        found = []
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(state_like(s) for s in sides):
                found = [c for s in sides for c in spelled(s)]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in STATE_CALLS:
                found = [c for a in node.args for c in spelled(a)]
            if state_like(node):  # row.get("state", "pending")
                found = [c for a in node.args[1:] for c in spelled(a)]
            found += [c for k in node.keywords if k.arg in STATE_KEYS for c in spelled(k.value)]
        elif isinstance(node, ast.Dict):
            found = [c for k, v in zip(node.keys, node.values)
                     if isinstance(k, ast.Constant) and k.value in STATE_KEYS for c in spelled(v)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = zip(target.elts, node.value.elts)
                else:
                    pairs = [(target, node.value)]
                found += [c for t, v in pairs if state_like(t) for c in spelled(v)]
            if (isinstance(node.value, (ast.Tuple, ast.Set, ast.List)) and len(node.value.elts) > 1
                    and len(list(spelled(node.value))) == len(node.value.elts)):
                found += list(spelled(node.value))  # a group of states: states.py defines them
        elif isinstance(node, ast.Return):  # `return "failed"`, `return "failed", None, why`
            value = node.value.elts[0] if isinstance(node.value, ast.Tuple) and node.value.elts else node.value
            found = list(spelled(value))
        yield from found


def bare_states(source: str) -> list[tuple[int, str]]:
    return [(c.lineno, c.value) for c in bare_state_nodes(source)]


def test_the_state_checker_finds_spelled_states():
    source = """
if row["state"] == "failed" or state in ("succeeded", x) or ("done" if a else b) == t.outcome:
    store.set_state(tid, "pending", running_s=1)
    raise Done("blocked")
d = {"state": "review", "status": "failed"}
GROUP = ("failed", "blocked")
run.outcome, run.why = "skipped", why
ok = a["status"] == "succeeded" and kind == "failed"  # attempt and error words, not task states
label = rows.get("state", "ready")
state = row.get("state") or "pending"
states[tid] = "skipped" if states.get(d) == "review" else x
def f():
    return "cancelled" if a else other
"""
    assert sorted(bare_states(source)) == [(2, "done"), (2, "failed"), (2, "succeeded"), (3, "pending"), (4, "blocked"),
                                           (5, "review"), (6, "blocked"), (6, "failed"), (7, "skipped"), (9, "ready"),
                                           (10, "pending"), (11, "review"),
                                           (11, "skipped"), (13, "cancelled")]


def test_no_bare_state_strings_outside_the_states_module():
    """A task state is named by its TaskState member (harnessc/states.py), groups of them are
    defined there once: a typo is an AttributeError, and `grep TaskState.FAILED` finds them all."""
    found = [f"{path.relative_to(ROOT.parent)}:{line}: {value!r}"
             for path in sorted(ROOT.rglob("*.py")) if path != STATES_MODULE
             for line, value in bare_states(path.read_text())]
    assert found == [], "name these states by their TaskState member (harnessc/states.py):\n" + "\n".join(found)


# ------------------------------------------------------------------ every event kind is declared

# calls whose kind is a variable, and where the kinds it holds come from (each is checked below)
KIND_VARIABLES = {
    "runtime/worktree/gitops.py": "kind, data = self._commit(...) / self.notes: its git_* constants",
}


def event_calls(source: str):
    """(line, kind node, field names) of each `<x>.event(kind, ...)` call, and of each event
    noted for later (`<x>.notes.append((kind, {...}))`: loop/files.py, worktree/gitops.py)."""
    for node in ast.walk(parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or not node.args:
            continue
        if node.func.attr == "event":
            yield node.lineno, node.args[0], [k.arg for k in node.keywords if k.arg is not None]
        elif node.func.attr == "append" and ast.unparse(node.func.value).endswith("notes") \
                and isinstance(node.args[0], ast.Tuple) and len(node.args[0].elts) == 2 \
                and isinstance(node.args[0].elts[1], ast.Dict):
            kind, data = node.args[0].elts
            yield node.lineno, kind, [k.value for k in data.keys if isinstance(k, ast.Constant)]


def kinds_named(kind: ast.AST) -> list[str] | None:
    """The declared kinds a kind expression may name: a string is one, an f-string each kind its
    pattern matches (`f"task_{state}"`); None for anything else."""
    if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
        return [kind.value] if kind.value in EVENTS else []
    if isinstance(kind, ast.JoinedStr):
        pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else "[a-z_]+" for v in kind.values)
        return [k for k in EVENTS if re.fullmatch(pattern, k)]
    return None


def undeclared_events(source: str, rel: str) -> list[str]:
    """What is wrong with the events a module records (`rel`: its path under harnessc/)."""
    found = []
    for line, kind, fields in event_calls(source):
        named = kinds_named(kind)
        if named is None:
            if rel not in KIND_VARIABLES:
                found.append(f"{rel}:{line}: the kind {ast.unparse(kind)} is not a string: name it, or list the "
                             "module in KIND_VARIABLES with where its kinds come from")
            continue
        if not named:
            found.append(f"{rel}:{line}: event kind {ast.unparse(kind)} is not declared")
            continue
        allowed = set().union(*(EVENTS[k].fields for k in named))
        found += [f"{rel}:{line}: {ast.unparse(kind)} has no field {f!r}" for f in fields if f not in allowed]
    if rel in KIND_VARIABLES:
        found += [f"{rel}:{node.lineno}: event kind {node.value!r} is not declared"
                  for node in ast.walk(parse(source)) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and re.fullmatch(r"git_[a-z_]+", node.value)
                  and node.value not in EVENTS]
    return found


# the modules that read events: a kind they compare with is a declared one
EVENT_READERS = ("runtime/observe/", "runreport/")


def kind_read(node: ast.AST) -> bool:
    """`ev["kind"]` or `ev.get("kind")`."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind")


def kind_names(tree: ast.AST) -> set[str]:
    """The names an event's kind is read into: `kind = ev["kind"]`, `kind, task = ev["kind"], ...`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                         and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                names |= {t.id for t, v in pairs if isinstance(t, ast.Name) and kind_read(v)}
    return names


def unknown_kinds_read(source: str, rel: str) -> list[str]:
    """The kinds a reader compares events with, or keys a table by (most keys kinds: alerts'
    RULES), that no event has."""
    found, tree = [], parse(source)
    names = kind_names(tree)

    def kind_like(node: ast.AST) -> bool:
        return kind_read(node) or (isinstance(node, ast.Name) and node.id in names)

    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and node.keys and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            if sum(k.value in EVENTS for k in node.keys) * 2 >= len(node.keys):
                found += [f"{rel}:{k.lineno}: no event has the kind {k.value!r}" for k in node.keys
                          if k.value not in EVENTS]
        if isinstance(node, ast.Compare) and any(kind_like(side) for side in (node.left, *node.comparators)):
            found += [f"{rel}:{c.lineno}: no event has the kind {c.value!r}"
                      for side in (node.left, *node.comparators)
                      for c in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side])
                      if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value not in EVENTS]
    return found


def test_the_event_checker_finds_undeclared_kinds_and_fields():
    source = ('store.event("run_started", options={})\nstore.event("run_startd")\n'
              'store.event(f"task_{state}", tid, error=e)\nstore.event(f"tsk_{s}")\n'
              'self.store.event("stuck", tid, reason="r", signl="x")\nstore.event(kind)\n'
              'self.notes.append(("git_stale_lock_removed", {"path": p, "text": t}))\n')
    found = [line.split(": ", 1)[1] for line in undeclared_events(source, "m.py")]
    assert found == ["event kind 'run_startd' is not declared", "event kind f'tsk_{s}' is not declared",
                     "'stuck' has no field 'signl'",
                     "the kind kind is not a string: name it, or list the module in KIND_VARIABLES with where its "
                     "kinds come from", "'git_stale_lock_removed' has no field 'text'"]


def test_every_event_kind_and_field_is_declared():
    """An event's kind and fields are declared once (harnessc/events.py): the display, alerts,
    notifications, telemetry and reports read them, and a misspelt kind is nobody's event."""
    found = [problem for path in sorted(ROOT.rglob("*.py"))
             for problem in undeclared_events(path.read_text(), path.relative_to(ROOT).as_posix())]
    assert found == [], "declare these in harnessc/events.py (or fix the call):\n" + "\n".join(found)


def test_event_readers_compare_with_declared_kinds_only():
    source = ('kind = ev["kind"]\nif ev.get("kind") in ("stuck", "stuk") or kind == "run_finshed":\n    pass\n'
              'RULES = {"fallback": 1, "escalatd": 2}\n'
              'WORDS = {"stuck": 1, "error": 2, "over_limit": 3}\n')  # attempt statuses: not keyed by kind
    assert sorted(unknown_kinds_read(source, "m.py")) == ["m.py:2: no event has the kind 'run_finshed'",
                                                          "m.py:2: no event has the kind 'stuk'",
                                                          "m.py:4: no event has the kind 'escalatd'"]
    assert unknown_kinds_read('for kind, item in rows:\n    if kind == "phase":\n        pass\n', "m.py") == []
    found = [problem for path in sorted(ROOT.rglob("*.py"))
             if (rel := path.relative_to(ROOT).as_posix()).startswith(EVENT_READERS)
             for problem in unknown_kinds_read(path.read_text(), rel)]
    assert found == [], "the readers compare with kinds no event has:\n" + "\n".join(found)
