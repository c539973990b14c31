"""The runtime's doorway to the compiler: loading plan.json, rebuilding it, and the compiler
functions the runtime calls (prompts, output validation, fallbacks, selection)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .. import planfile
from ..compiler import compile_project, lint_project, write_build
from ..compiler.gitcheck import program_files as files
from ..compiler.gitcheck import uncommitted as status
from ..compiler.project import SPEC_FILES
from ..compiler.prompts import (  # noqa: F401
    TemplateProblem,
    render_assist,
    render_memory,
    render_operator,
    render_prompt,
    render_prompt_parts,
    render_refinement,
    render_system,
)
from ..compiler.validate import (  # noqa: F401
    Deadline,
    OutOfTime,
    extract_json,
    fill_output,
    filled_text,
    template_output,
    validate_output,
)
from ..compiler.validate import template_filled as filled
from ..planfile import PlanError, load_plan  # noqa: F401  (re-exported: plan loading is the runtime's first call)

# ------------------------------------------------------------------ plan loading


LOOP_SECTIONS = {"termination", "progress", "context", "alerts", "recovery", "runaway", "environment",
                 "summary_every"}


def loop_settings(plan: planfile.Plan) -> SimpleNamespace:
    """harness.yaml `loop:` as the plan holds it, read by attribute (`cfg.alerts.milestone_every`).
    A section the plan lacks (a plan built before it existed) gets its defaults (from
    compiler.ir, imported only then: pydantic is not a run's cost)."""
    data = plan.loop or {}
    if data.keys() < LOOP_SECTIONS:
        data = {**loop_defaults(), **data}
    return json.loads(json.dumps(data), object_hook=lambda d: SimpleNamespace(**d))


def loop_defaults() -> dict[str, Any]:
    """harness.yaml `loop:` when it says nothing: every section's defaults (compiler.ir,
    imported only now: pydantic is not a run's cost)."""
    from ..compiler.ir import Loop

    return Loop().model_dump(mode="json")


def stale_sources(plan: planfile.Plan, root: Path) -> list[str]:
    """Source files whose sha256 differs from the one the plan was built from."""
    changed = []
    sources = (plan.metadata or {}).get("sources") or {}
    for rel, digest in sorted(sources.items()):
        try:
            now = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            now = None
        if now != digest:
            changed.append(rel)
    # A spec file that appeared since the build also makes the plan stale.
    for name in SPEC_FILES:
        if sources and name not in sources and (root / name).is_file():
            changed.append(name)
    return changed


def build(root: Path) -> tuple[planfile.Plan | None, Any]:
    """Lint + build through the compiler: (the plan as written, or None; the compiled project,
    whose `diags` and `sources` the caller shows as `harnessc build` would)."""
    project = compile_project(Path(root), write_prompts=True)
    if project.plan is None:
        return None, project
    write_build(project)
    # the plan as written, plain JSON: the same a later `harnessc run` would load
    return load_plan(root), project


PARTIAL_CHECK_SECONDS = 5.0  # re-validating the best answer runs on the event loop: keep it short


def simulated_output(contract: planfile.Contract) -> dict:
    """What the simulate agent answers: valid examples/defaults, else values built from the rules."""
    from ..compiler.synth import synthesize_output

    return synthesize_output(contract).value


def partial_output(contract: planfile.Contract, data: Any) -> tuple[dict, list[dict]]:
    """The best output completed from defaults and examples, and what was filled:
    [{field, from, was}] (compiler.validate.fill_output)."""
    return fill_output(contract, data, Deadline(PARTIAL_CHECK_SECONDS))


def template_filled(contract: planfile.Contract) -> tuple[dict, list[dict]]:
    """The contract's template output, and where each field came from."""
    return filled(contract)


def select_ids(plan: planfile.Plan, selectors: list[str], exclude: list[str]) -> set[str]:
    from ..compiler.select import SelectionError
    from ..compiler.select import select_ids as select

    try:
        return select(plan.nodes, selectors, exclude)
    except SelectionError as e:
        raise PlanError(str(e), e.hint) from None


def select_in(tasks: list[dict], selectors: list[str]) -> set[str]:
    """The ids `selectors` choose among task records (plan nodes, or `linted_tasks`'); none
    without a selector (not a run's default choice: every task but the deferred)."""
    from ..compiler.select import select_ids as select

    return select(tasks, selectors) if selectors else set()


def linted_tasks(root: Path) -> list[dict] | None:
    """Each task as lint reads the roadmap (the plan's task fields), for when plan.json is
    missing or stale; None when the roadmap has no task or cannot be read."""
    from ..compiler.plan import task_view

    project = lint_project(root)
    if project.roadmap is not None and project.tasks:
        return [task_view(t) for t in project.tasks]
    return None


def program_files(argv: list[str], root: Path, first: bool = True) -> list[str]:
    """The words of `argv` naming a file of the project (compiler/gitcheck.py, as lint reads them)."""
    return files(argv, root, first)


def uncommitted(repo, paths: list[str]) -> dict[str, str] | None:
    """Which of `paths` are untracked or modified in `repo` (compiler/gitcheck.py, as lint says it)."""
    return status(repo, paths)


def ensure_plan(root: Path, no_build: bool, say, diagnose=None) -> planfile.Plan:
    """A plan that matches the specs: loaded, or (re)built. `say` prints progress notes;
    `diagnose(project)` shows a build's diagnostics (its warnings too: they are the build's
    word on the plan about to run).

    Raises PlanError (usage problem: exit 2) or BuildFailed (spec errors: exit 1).
    """
    try:
        plan = load_plan(root)
        changed = stale_sources(plan, root)
        if not changed:
            return plan
        why = f"the plan is older than {', '.join(changed)}"
    except PlanError as e:
        why = str(e)
    if no_build:
        raise PlanError(f"{why}; run `harnessc build` (or drop --no-build)")
    say(f"{why}: building")
    plan, project = build(root)
    if diagnose is not None and project.diags.items:
        diagnose(project)
    if plan is None:
        raise BuildFailed(project)
    return plan


class BuildFailed(Exception):
    def __init__(self, project: Any):
        super().__init__("the build failed")
        self.project = project  # its diags and sources
