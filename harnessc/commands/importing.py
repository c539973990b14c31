"""`harnessc import taskmaster|speckit`: a roadmap.md from another tool's task list."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..wording import plural
from .common import Context, echo_visible, fail_usage, pass_ctx, read_bounded


@click.group(name="import")
def import_cmd() -> None:
    """Write a roadmap.md from a task list another tool keeps (Taskmaster, spec-kit)."""


def _import_options(f):
    f = click.option("--force", is_flag=True, help="Overwrite an existing roadmap.md.")(f)
    f = click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
                     help="Where to write (default: roadmap.md in the project directory, -C, or here).")(f)
    return click.argument("path", type=click.Path(dir_okay=False))(f)


@import_cmd.command(name="taskmaster")
@_import_options
@click.option("--tag", default=None, help="The tagged task list to import (default: master).")
@pass_ctx
def import_taskmaster(ctx: Context, path: str, out: str | None, force: bool, tag: str | None) -> None:
    """Import Taskmaster's .taskmaster/tasks/tasks.json (tagged or older layout)."""
    from ..importers import taskmaster

    _import(ctx, path, out, force, lambda text, source: taskmaster.read(text, source, tag))


@import_cmd.command(name="speckit")
@_import_options
@pass_ctx
def import_speckit(ctx: Context, path: str, out: str | None, force: bool) -> None:
    """Import spec-kit's specs/NNN-feature/tasks.md."""
    from ..importers import speckit

    _import(ctx, path, out, force, lambda text, source: speckit.read(text, source))


def _import(ctx: Context, path: str, out: str | None, force: bool, read) -> None:
    """Read PATH, write the roadmap (never over one without --force, never through a link),
    list what did not map, then say what to run next. `read(text, source)` is given the
    source's name relative to the project (the roadmap's directory), which the roadmap and
    its messages use: never the absolute path."""
    from ..importers import NotImportable, source_name

    target = Path(out) if out else Path(ctx.explicit or ".") / "roadmap.md"
    if target.is_symlink():  # a dangling one too: writing would create the file it points to
        fail_usage(f"{target} is a symbolic link; not written through it (not even with --force)",
                   "remove the link, or pass -o to write elsewhere")
    if target.exists() and not force:
        fail_usage(f"{target} exists; not overwritten", "pass --force to replace it, or -o to write elsewhere")
    if target.exists() and not target.is_file():
        fail_usage(f"{target} is not a regular file; not replaced", "pass -o to write elsewhere")
    text = _read_bounded(path)
    try:
        imported = read(text, source_name(path, target.parent))
        roadmap_text = imported.checked_text()  # read back: exactly the imported tasks, or nothing is written
    except NotImportable as e:
        fail_usage(str(e), e.hint)
    _write(target, roadmap_text, force)
    tasks = imported.roadmap.tasks  # what the written roadmap holds (checked_text compared them)
    done = sum(t.done for t in tasks)
    echo_visible(f"wrote {target}: {plural(len(tasks), 'task')} ({done} done) from {path}")
    for line in imported.summary():
        echo_visible(line)
    echo_visible(f"next: harnessc{' -C ' + str(target.parent) if target.parent != Path('.') else ''} lint "
                 "(tasks without accept:, contract: or completion_promise: get warning HC410)")


def _read_bounded(path: str) -> str:
    """The file to import as text, at most MAX_IMPORT_BYTES (a usage error beyond, or when
    it cannot be read)."""
    from ..importers import MAX_IMPORT_BYTES

    return read_bounded(path, MAX_IMPORT_BYTES, "not imported",
                        "a task list that large is not one to import as a roadmap; is this the right file?")


def _write(target: Path, text: str, force: bool) -> None:
    """Write the roadmap without following a link: a new file is created exclusively (a file
    or link that appeared since the checks stops it); with --force a file written beside it
    replaces the old one (a rename replaces a link, never writes through it)."""
    data = text.encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    where = target if not force else target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(where, flags, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if force:
            os.replace(where, target)
    except FileExistsError:
        fail_usage(f"{where} appeared while importing; not overwritten", "run the import again")
    except OSError as e:
        if force:
            where.unlink(missing_ok=True)
        fail_usage(f"cannot write {target}: {e}")
