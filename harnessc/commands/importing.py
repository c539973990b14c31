"""`harnessc import taskmaster|speckit`: a roadmap.md from another tool's task list."""

from __future__ import annotations

from pathlib import Path

import click

from ..wording import plural
from .common import Context, fail_usage, pass_ctx, read_input


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

    _import(ctx, path, out, force, lambda text: taskmaster.read(text, path, tag))


@import_cmd.command(name="speckit")
@_import_options
@pass_ctx
def import_speckit(ctx: Context, path: str, out: str | None, force: bool) -> None:
    """Import spec-kit's specs/NNN-feature/tasks.md."""
    from ..importers import speckit

    _import(ctx, path, out, force, lambda text: speckit.read(text, path))


def _import(ctx: Context, path: str, out: str | None, force: bool, read) -> None:
    """Read PATH, write the roadmap (never over one without --force), list what did not map,
    then lint what was written."""
    from ..compiler.roadmap import parse_roadmap
    from ..diagnostics import Diagnostics
    from ..importers import NotImportable

    target = Path(out) if out else Path(ctx.explicit or ".") / "roadmap.md"
    if target.exists() and not force:
        fail_usage(f"{target} exists; not overwritten", "pass --force to replace it, or -o to write elsewhere")
    text = read_input(path)
    try:
        imported = read(text)
    except NotImportable as e:
        fail_usage(str(e))
    roadmap_text = imported.text()
    check = Diagnostics()
    parse_roadmap(roadmap_text, "roadmap.md", check)
    if check.errors:  # an importer bug: say so rather than write a roadmap lint refuses
        fail_usage(f"the imported roadmap would not parse: {check.errors[0].message} (line {check.errors[0].span.line})",
                   "please report it with the file you imported")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(roadmap_text, encoding="utf-8")
    tasks = imported.roadmap.tasks
    done = sum(t.done for t in tasks)
    click.echo(f"wrote {target}: {plural(len(tasks), 'task')} ({done} done) from {path}")
    if imported.unmapped:
        click.echo(f"not mapped ({len(imported.unmapped)}):")
        for line in imported.unmapped:
            click.echo(f"  - {line}")
    click.echo(f"next: harnessc{' -C ' + str(target.parent) if target.parent != Path('.') else ''} lint "
               "(tasks without accept:, contract: or completion_promise: get warning HC410)")
