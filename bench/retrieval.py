#!/usr/bin/env python3
"""Retrieval benchmark: `context: auto` on 100 tasks of a real repository (issue 30 item 2).

The repository is not downloaded here (the bench downloads nothing): unpack one first, e.g.

    pip download --no-binary :all: --no-deps django==5.1 -d /tmp/retrieval-bench
    tar xzf /tmp/retrieval-bench/Django-5.1.tar.gz -C /tmp/retrieval-bench

and pass `--repo /tmp/retrieval-bench/Django-5.1` (the default). Without it the bench says
so and exits 0.

100 tasks come from the repository's own test files: a test file `test_X.py` (or
`X_tests/tests.py`) that imports exactly one project module named X - the module under
test. Each task's goal names what the test covers (its test classes and first test
methods), its accept command is `pytest PATH`, its context `auto`. Measured:

- build: compile_project(root, write_prompts=True) + write_build, in-process, as `harnessc
  build` does, with `context: auto` and without (the same tasks; the difference is the
  retrieval: one index of the repository, then 100 queries), median of --runs clean builds;
- hit rate: the share of tasks whose chosen files hold the module under test (and the share
  where it is the first file after the test itself; and, when the module under test is a
  package's __init__.py, counting a chosen file of that package as a hit).

The scorer knows nothing of this naming rule: it follows the test's imports and weighs the
words of its path and goal like any other words.

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import harnessc_env  # bench/: this script's directory

DEFAULT_REPO = "/tmp/retrieval-bench/Django-5.1"
N_TASKS = 100


def module_of(path: str) -> str:
    parts = path[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cases(root: Path, index) -> list[tuple[str, str, str]]:
    """(test path, module under test's path, goal) for the test files whose module under
    test is clear, spread evenly over the repository, at most N_TASKS."""
    found = []
    for rel in sorted(index.entries):
        name = rel.rsplit("/", 1)[-1]
        parent = rel.split("/")[-2] if "/" in rel else ""
        if name.startswith("test_") and name.endswith(".py"):
            subject = name[5:-3]
        elif name == "tests.py" and parent:
            subject = parent.removesuffix("_tests")
        else:
            continue
        if not rel.startswith("tests/") and "/tests/" not in rel:
            continue
        imported = [p for p in index.imported_files(rel) if "tests/" not in p and not p.split("/")[-1].startswith("test")]
        targets = {p for p in imported if module_of(p).rsplit(".", 1)[-1] == subject}
        if len(targets) != 1:
            continue
        try:
            tree = ast.parse((root / rel).read_text("utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        methods = [m.name for c in classes for m in c.body if isinstance(m, ast.FunctionDef) and m.name.startswith("test")]
        if not classes:
            continue
        goal = (f"Make the tests in {rel} pass. They cover {', '.join(c.name for c in classes[:3])}: "
                f"{', '.join(methods[:5])}.")
        found.append((rel, targets.pop(), goal))
    step = max(len(found) / N_TASKS, 1)
    return [found[int(i * step)] for i in range(min(N_TASKS, len(found)))], len(found)


def write_roadmap(root: Path, chosen: list, auto: bool) -> None:
    lines = ["# Retrieval bench", "", "## Tasks", ""]
    for i, (test, _, goal) in enumerate(chosen):
        lines += [f"- [ ] **t{i:03d}**: {goal}", f"  - accept: pytest {test}"]
        if auto:
            lines.append("  - context: auto")
    (root / "roadmap.md").write_text("\n".join(lines) + "\n")


def build(root: Path):
    from harnessc.compiler import compile_project, write_build

    shutil.rmtree(root / ".harness", ignore_errors=True)
    start, cpu = time.perf_counter(), time.process_time()
    project = compile_project(root, write_prompts=True)
    if project.plan is None:
        sys.exit("the bench's roadmap did not build: " + "; ".join(str(d) for d in project.diags.items[:3]))
    write_build(project)
    return time.perf_counter() - start, time.process_time() - cpu, project


def main(argv: list[str] | None = None) -> None:
    harnessc_env.require()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.environ.get("HARNESSC_RETRIEVAL_REPO", DEFAULT_REPO))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    root = Path(args.repo)
    if not root.is_dir():
        print(f"retrieval.py: skipped: no repository at {root} (see this script's docstring for how to get one)")
        return
    from harnessc.compiler.retrieval import Index

    shutil.rmtree(root / ".harness", ignore_errors=True)  # a build's, left by an interrupted run
    start, cpu = time.perf_counter(), time.process_time()
    index = Index(root)
    index_s, index_cpu = time.perf_counter() - start, time.process_time() - cpu
    chosen, candidates = cases(root, index)
    print(f"repository: {root} ({len(index.entries):,} text files indexed of {sum(1 for _ in root.rglob('*') if _.is_file()):,} files;"
          f" skipped {', '.join(f'{n} {k}' for k, n in index.skipped.items() if n)}); index alone {index_s:.2f} s"
          f" ({index_cpu:.2f} s CPU)")
    print(f"tasks: {len(chosen)} (of {candidates} test files with a clear module under test)")
    times, cpus = {}, {}
    for auto in (False, True):
        write_roadmap(root, chosen, auto)
        runs = [build(root) for _ in range(args.runs)]
        times[auto] = statistics.median(t for t, _, _ in runs)
        cpus[auto] = statistics.median(c for _, c, _ in runs)
        project = runs[-1][2]
    hits = first = in_package = 0
    chosen_counts = []
    for node, (test, target, _) in zip(project.plan.nodes, chosen):
        files = [f.path for f in node.context_staging.files if f.priority == "auto"]
        chosen_counts.append(len(files))
        hits += target in files
        package = target[: -len("__init__.py")] if target.endswith("/__init__.py") else None
        in_package += target in files or bool(package and any(f.startswith(package) for f in files))
        first += [f for f in files if f != test][:1] == [target]
    (root / "roadmap.md").unlink()
    shutil.rmtree(root / ".harness", ignore_errors=True)
    n = len(chosen)
    print(f"build, {n} tasks, median of {args.runs}: without auto {times[False]:.2f} s ({cpus[False]:.2f} s CPU), "
          f"with `context: auto` {times[True]:.2f} s ({cpus[True]:.2f} s CPU; +{times[True] - times[False]:.2f} s: "
          f"the index once, then {n} queries)")
    print(f"hit rate: module under test chosen for {hits}/{n} tasks ({hits / max(n, 1):.0%}); "
          f"first after the test itself for {first}/{n} ({first / max(n, 1):.0%}); when it is a package "
          f"(__init__.py), counting any file of it: {in_package}/{n}; "
          f"files chosen per task: median {statistics.median(chosen_counts or [0]):g}")


if __name__ == "__main__":
    main()
