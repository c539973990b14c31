"""HC504: a project's task.md.j2 that puts a task's own text before the text tasks share.

A provider caches a prompt only up to the first byte that differs from the last request's
(prompts.py renders the shared parts first for that reason). A template override that prints
the task's id, goal or dependencies before the overview, the shared context or the output
format makes every prompt differ from its start, and nothing is cached. The check reads the
template's syntax tree (which variable is used where), not its text.
"""

from __future__ import annotations

from pathlib import Path

from ..diagnostics import Span
from ..workspace import WorkspaceError

# Variables of a task template whose text differs between tasks, and those tasks share.
TASK_NAMES = frozenset({"task", "deps", "accept", "task_context", "context_left_out", "context_files"})
SHARED_NAMES = frozenset({"project", "shared_context", "output_format"})


def task_before_shared(env, source: str) -> tuple[int, str, str] | None:
    """(line, task variable, shared variable) of the first variable of a task's own text that
    comes before one of the shared text, in the template's order; None when none does."""
    from .sandbox import nodes

    first_task = None
    for name in env.parse(source).find_all(nodes.Name):
        if name.ctx != "load":
            continue
        if name.name in TASK_NAMES and first_task is None:
            first_task = name
        elif name.name in SHARED_NAMES and first_task is not None:
            return first_task.lineno, first_task.name, name.name
    return None


def check_task_template(project, plan: dict, env) -> None:
    """Warn (HC504) when the project's task.md.j2 puts a task's own text first."""
    from .sandbox import TemplateError

    templates = plan.get("templates")
    if not templates:
        return
    path = (Path(templates) / "task.md.j2").as_posix()
    try:
        source = env.loader.get_source(env, "task.md.j2")[0]
        found = task_before_shared(env, source)
    except (TemplateError, WorkspaceError, OSError):
        return  # not overridden, or reported when it is rendered (HC501, HC216)
    if found is None:
        return
    line, task_name, shared_name = found
    lines = source.splitlines()
    col = (lines[line - 1].find(task_name) + 1 if line <= len(lines) else 0) or 1
    project.sources.setdefault(path, source)
    project.diags.warning(
        "HC504", f"task.md.j2 puts a task's own text (`{task_name}`) before text every task shares "
                 f"(`{shared_name}`): providers cannot cache the shared text",
        Span(path, line, col, line, col + len(task_name)),
        "put project.overview, shared_context and output_format first, each part ended by {{ cache_break }}, "
        "then the task's own text, as the built-in task.md.j2 does")
