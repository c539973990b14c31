"""Writing .harness/build: prompts/<task-id>.md and plan.json.

A build writes each prompt as it is rendered (PromptFiles, promptfiles.py), so a 100k-task build never
holds its prompts; plan.json is written last. Every file is written atomically (a temporary
file renamed into place), so a failure — a full disk — leaves no half-written prompt and the
previous plan.json untouched. A rebuild rewrites only the prompts that changed and removes
those of tasks that are gone: an unchanged prompt costs a read, not a new file. All of it
goes through the confined directory descriptors of harnessc.workspace: no link is followed.
"""

from __future__ import annotations

from pathlib import Path

from ..workspace import Workspace
from .project import Project
from .promptfiles import PromptFiles


def write_build(project: Project) -> Path:
    """Write what is left of .harness/build: prompts not written yet, plan.json."""
    from .planjson import write_plan_json

    workspace = Workspace(project.root)
    files = project.prompt_files
    if files is None:  # compiled without writing: the prompts are in memory
        files = PromptFiles(workspace)
        for tid, text in project.prompts.items():
            files.write(f"{tid}.md", text)
    try:
        files.write("_system.md", project.system_prompt)
        files.finish()
    finally:
        files.close()
    with workspace.atomic_file(workspace.plan) as f:
        write_plan_json(project.plan, f.write)
        f.write(b"\n")
    return workspace.build
