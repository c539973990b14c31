"""Writing .harness/build: prompts/<task-id>.md and plan.json.

A build writes each prompt as it is rendered (PromptFiles), so a 100k-task build never
holds its prompts; plan.json is written last. Every file is written atomically (a temporary
file renamed into place), so a failure — a full disk — leaves no half-written prompt and the
previous plan.json untouched. A rebuild rewrites only the prompts that changed and removes
those of tasks that are gone: an unchanged prompt costs a read, not a new file. All of it
goes through the confined directory descriptors of harnessc.workspace: no link is followed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..workspace import Workspace, WorkspaceError, atomic_file_at, write_atomic_at
from .project import Project


class PromptFiles:
    """The prompts/ directory of a build, written one prompt at a time."""

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self.dir_fd: int | None = None  # opened on the first write: a build with errors never touches it
        self.unwritten: set[str] = set()  # files that were there and have not been written yet

    def write(self, name: str, text: str) -> None:
        if self.dir_fd is None:
            self.dir_fd = self.workspace.open_dir(self.workspace.prompts)
            self.unwritten = {entry.name for entry in os.scandir(self.dir_fd)}
        data = text.encode("utf-8")
        shown = lambda: self.workspace.rel(self.workspace.prompts / name)  # noqa: E731 (for messages only)
        if name in self.unwritten:
            self.unwritten.remove(name)
            if self._holds(name, data):
                return
            with atomic_file_at(self.dir_fd, name, shown) as f:  # refuses a link there
                f.write(data)
        else:
            write_atomic_at(self.dir_fd, name, data, shown)

    def _holds(self, name: str, data: bytes) -> bool:
        """Whether file `name` already holds exactly `data` (a link never does)."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.dir_fd)
        except OSError:
            return False
        with os.fdopen(fd, "rb") as f:
            return f.read(len(data) + 1) == data

    def finish(self) -> None:
        """Remove the prompts of tasks that are gone (other files are left alone); close."""
        if self.dir_fd is None:
            return
        try:
            for name in self.unwritten:
                if name.endswith(".md"):
                    try:
                        os.unlink(name, dir_fd=self.dir_fd)  # a link is removed itself, never followed
                    except FileNotFoundError:
                        pass
                    except OSError as e:
                        raise WorkspaceError(f"cannot delete {self.workspace.rel(self.workspace.prompts / name)}: "
                                             f"{e.strerror}") from None
        finally:
            self.close()

    def close(self) -> None:
        if self.dir_fd is not None:
            os.close(self.dir_fd)
            self.dir_fd, self.unwritten = None, set()


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
