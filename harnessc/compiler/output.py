"""Writing .harness/build: prompts/<task-id>.md and plan.json.

A build writes each prompt as it is rendered (PromptFiles), so a 100k-task build never
holds its prompts; plan.json is written last, streamed into a temporary file and renamed
into place. A rebuild rewrites only the prompts that changed (each replaced atomically) and
removes those of tasks that are gone: an unchanged prompt costs a read, not a new file.
"""

from __future__ import annotations

import os
from pathlib import Path

from .project import BUILD_DIR, Project


class PromptFiles:
    """The prompts/ directory of a build, written one prompt at a time."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.base = ""  # set on the first write: a build with errors never touches the directory
        self.unwritten: set[str] = set()  # files that were there and have not been written yet

    def write(self, name: str, text: str) -> None:
        if not self.base:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.unwritten = {entry.name for entry in os.scandir(self.directory)}
            self.base = os.path.join(self.directory, "")  # plain strings: a Path per file costs more than its write
        exists = name in self.unwritten
        if exists:
            self.unwritten.remove(name)
        _write_file(self.base + name, text.encode("utf-8"), exists)

    def remove_stale(self) -> None:
        """Remove the prompts of tasks that are gone (other files are left alone)."""
        for name in self.unwritten:
            if name.endswith(".md"):
                os.unlink(self.base + name)
        self.unwritten = set()


def write_build(project: Project) -> Path:
    """Write what is left of .harness/build: prompts not written yet, plan.json."""
    import tempfile  # build only: lint's start-up stays light

    from .planjson import write_plan_json

    out = project.root / BUILD_DIR
    files = project.prompt_files
    if files is None:  # compiled without writing: the prompts are in memory
        files = PromptFiles(out / "prompts")
        for tid, text in project.prompts.items():
            files.write(f"{tid}.md", text)
    files.write("_system.md", project.system_prompt)
    files.remove_stale()
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


def _write_file(path: str, data: bytes, exists: bool) -> None:
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
