"""The compiler: specs -> IR -> checked plan + prompts. No network, no agent calls.

Each pass is a plain function over the Project, listed in order below. Lint runs the
checking passes; build runs them all and writes .harness/build/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from ..diagnostics import Diagnostics
from ..nogc import no_cyclic_gc
from ..workspace import Workspace
from . import check, gitcheck, load
from .ignore import apply_ignores
from .project import Project

__all__ = ["lint_project", "compile_project", "write_build", "build_project", "CHECK_PASSES", "PLAN_PASSES"]

CHECK_PASSES = (
    load.discover,
    load.parse_roadmap,
    load.load_config,
    load.load_contracts,
    check.resolve_references,
    check.resolve_context,
    check.check_accept_commands,
    check.check_accept_programs,
    check.check_contracts,
    check.check_cycles,
    check.check_verification,
    check.check_loop_settings,
    check.check_recovery_escalation,
    check.check_read_only_changes,
    check.check_approaches,
    check.check_resources,
    check.check_protect,
    check.check_min_passed,
    check.check_retry_kinds,
    check.check_review,
    gitcheck.check_worktree_repository,
)


def _render_prompts(project: Project) -> None:
    from .prompts import render_all

    if project.plan is not None:
        render_all(project, project.plan, project.diags)


def _build_plan(project: Project) -> None:
    from .plan import build_plan

    build_plan(project)


def _finish_plan(project: Project) -> None:
    from .plan import finish_plan

    finish_plan(project)


# The pydantic IR and the plan are imported only here, by build: lint stays light.
PLAN_PASSES = (
    load.to_models,
    _build_plan,
    _render_prompts,
    _finish_plan,
)


def _run(project: Project, passes) -> Project:
    for p in passes:
        p(project)
        if project.roadmap is None and p is load.parse_roadmap:
            break  # nothing to check without a roadmap
        if passes is PLAN_PASSES and project.diags.has_errors():
            break  # each plan pass works on the one before's result, which an error leaves unfinished
    return project


def lint_project(root: Path, diags: Diagnostics | None = None, ignore: Iterable[str] = (),
                 texts: Mapping[str, str] | None = None) -> Project:
    """Every check, no output files. User templates are rendered too when the project has them.
    Warnings of the codes in `ignore`, or named by a task's ignore comment, are dropped.
    `texts`: spec files' texts (by name: roadmap.md, contracts.yaml) linted in place of the
    project's files of those names, which are not read (`harnessc draft` lints its draft so)."""
    project = Project(root=Path(root), diags=diags or Diagnostics(), sources=dict(texts or {}))
    with no_cyclic_gc():
        _run(project, CHECK_PASSES)
        if project.roadmap is not None and _needs_plan(project) and not project.diags.has_errors():
            _run(project, PLAN_PASSES)
    apply_ignores(project, ignore)
    return project


def _needs_plan(project: Project) -> bool:
    """Whether lint must build the plan in memory too: for user templates (rendered to be
    checked) and task budgets (HC450 compares them with a call's estimate, made from the
    rendered prompt and the routed agent's price). Others lint without it: lint stays light."""
    config = project.config
    if config is None:
        return False
    return bool(config.templates) or config.defaults.budget is not None or any(
        t.budget is not None for t in project.tasks)


def compile_project(root: Path, diags: Diagnostics | None = None, write_prompts: bool = False,
                    ignore: Iterable[str] = ()) -> Project:
    """All passes; project.plan is complete when there are no errors.

    With write_prompts (a build), each prompt goes to .harness/build/prompts/ as it is
    rendered rather than into project.prompts; write_build finishes the build directory.
    Warnings are ignored as by lint_project.
    """
    project = Project(root=Path(root), diags=diags or Diagnostics())
    if write_prompts:
        from .promptfiles import PromptFiles  # build's, as the plan passes (lint stays light)

        project.prompt_files = PromptFiles(Workspace(project.root))
    with no_cyclic_gc():
        _run(project, CHECK_PASSES)
        if project.roadmap is not None and not project.diags.has_errors():
            _run(project, PLAN_PASSES)
    apply_ignores(project, ignore)
    if project.diags.has_errors():
        project.plan = None
        if project.prompt_files is not None:
            project.prompt_files.close()
    return project


def write_build(project: Project) -> Path:
    """Write .harness/build (output.write_build), with the cyclic GC paused as for the passes:
    a 100k-task plan is millions of objects, and a collection while writing rescans them all."""
    from . import output

    with no_cyclic_gc():
        return output.write_build(project)


def build_project(root: Path) -> tuple[dict | None, Diagnostics]:
    """Lint + build + write .harness/build; the plan dict, or None when there are errors."""
    project = compile_project(Path(root), write_prompts=True)
    if project.plan is None:
        return None, project.diags
    write_build(project)
    return project.plan, project.diags
