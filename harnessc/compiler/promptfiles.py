"""The prompts/ directory of a build, written one prompt at a time (output.py writes the build;
a Project carries one while its prompts are rendered)."""

from __future__ import annotations

import os

from ..workspace import Workspace, WorkspaceError, atomic_file_at, write_atomic_at


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
