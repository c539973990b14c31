"""The compiler: specs -> IR -> checked plan + prompts. No network, no agent calls.

Each pass is a plain function over the Project, listed in order below. Lint runs the
checking passes; build runs them all and writes .harness/build/.
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from pathlib import Path

from ..diagnostics import Diagnostics
from . import check, load
from .project import BUILD_DIR, Project

CHECK_PASSES = (
    load.discover,
    load.parse_roadmap,
    load.load_config,
    load.load_contracts,
    check.resolve_references,
    check.resolve_context,
    check.check_accept_commands,
    check.check_contracts,
    check.check_cycles,
    check.check_verification,
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
    return project


@contextmanager
def _no_cyclic_gc():
    """No cyclic GC while compiling: the passes allocate millions of long-lived objects and
    few cycles, and each collection rescans them all (a third of a 10k-task build)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def lint_project(root: Path, diags: Diagnostics | None = None) -> Project:
    """Every check, no output files. User templates are rendered too when the project has them."""
    project = Project(root=Path(root), diags=diags or Diagnostics())
    with _no_cyclic_gc():
        _run(project, CHECK_PASSES)
        if project.roadmap is not None and project.config.templates and not project.diags.has_errors():
            _run(project, PLAN_PASSES)
    return project


def compile_project(root: Path, diags: Diagnostics | None = None) -> Project:
    """All passes; project.plan is complete when there are no errors."""
    project = Project(root=Path(root), diags=diags or Diagnostics())
    with _no_cyclic_gc():
        _run(project, CHECK_PASSES)
        if project.roadmap is not None and not project.diags.has_errors():
            _run(project, PLAN_PASSES)
    if project.diags.has_errors():
        project.plan = None
    return project


def write_build(project: Project) -> Path:
    """Write prompts/ and plan.json under .harness/build.

    A rebuild rewrites only the prompts that changed (each replaced atomically) and removes
    those of tasks that are gone: unchanged prompts cost a read, not a new file. plan.json,
    written last, is streamed into a temporary file and renamed into place.
    """
    import tempfile  # build only: lint's start-up stays light

    from .plan import write_plan_json

    out = project.root / BUILD_DIR
    prompts_dir = out / "prompts"
    prompts_dir.mkdir(parents=True, exist_ok=True)
    existing = {entry.name for entry in os.scandir(prompts_dir)}
    wanted = set()
    base = os.path.join(prompts_dir, "")  # plain strings: a Path per file costs more than its write
    for name, text in _prompt_files(project):
        wanted.add(name)
        _write_prompt(base + name, text.encode("utf-8"), name in existing)
    for name in existing - wanted:
        if name.endswith(".md"):
            os.unlink(base + name)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            write_plan_json(project.plan, f.write)
            f.write(b"\n")
        os.replace(tmp, out / "plan.json")
    except BaseException:
        os.unlink(tmp)
        raise
    return out


def _prompt_files(project: Project):
    """(file name, text) of every prompt file."""
    yield "_system.md", project.system_prompt
    for tid, text in project.prompts.items():
        yield f"{tid}.md", text


def _write_prompt(path: str, data: bytes, exists: bool) -> None:
    """Create a new file directly (open, write, close); replace an existing one atomically,
    and only when its content changed."""
    if exists:
        try:
            with open(path, "rb") as f:
                if f.read(len(data) + 1) == data:
                    return
        except OSError:
            pass
        import tempfile

        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def build_project(root: Path) -> tuple[dict | None, Diagnostics]:
    """Lint + build + write .harness/build; the plan dict, or None when there are errors."""
    project = compile_project(Path(root))
    if project.plan is None:
        return None, project.diags
    write_build(project)
    return project.plan, project.diags
