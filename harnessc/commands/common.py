"""What the commands share: the project directory (`Context`), usage errors, the
`--output` option, echoing text harnessc did not write, and the task ids of the built plan."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path
from typing import NoReturn

import click

from ..exitcodes import Exit
from ..textsafe import visible
from ..workspace import find_project_root


class Context:
    """What every command gets: the project directory."""

    def __init__(self, project: str | None):
        self.explicit = project

    def root(self, must_exist: bool = True) -> Path:
        if self.explicit:
            root = Path(self.explicit)
            if not root.is_dir():
                fail_usage(f"project directory '{self.explicit}' does not exist")
            return root.resolve()
        root = find_project_root(Path.cwd())
        if root is None:
            if must_exist:
                fail_usage(
                    "no harnessc project here: no roadmap.md or harness.yaml in this directory or above",
                    hint="run `harnessc init` to create one, or pass -C DIR",
                )
            return Path.cwd()
        return root


class USDParam(click.ParamType):
    """An amount of USD: a finite number >= 0 (`nan` and `inf` would turn a budget off)."""

    name = "usd"

    def convert(self, value, param, ctx):
        try:
            usd = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not an amount of USD", param, ctx)
        if not (math.isfinite(usd) and usd >= 0):
            self.fail(f"{value!r} is not an amount of USD (a finite number, 0 or more)", param, ctx)
        return usd


USD = USDParam()


def read_input(path: str) -> str:
    """A file the user named on the command line, as text; unreadable: a usage error."""
    try:
        return Path(path).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail_usage(f"cannot read {path}: {e}")


def read_bounded(path: str, limit: int, refused: str, hint: str, reason: bool = False) -> str:
    """A file the user named, as UTF-8 text of at most `limit` bytes (read no further); a usage
    error when it cannot be read, is larger (`{path} is larger than N MB; {refused}`, `hint`)
    or is not UTF-8. `reason`: say the OS's reason alone (strerror), not the whole error."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        fail_usage(f"cannot read {path}: {(e.strerror or e) if reason else e}")
    if len(data) > limit:
        fail_usage(f"{path} is larger than {limit // 1_000_000} MB; {refused}", hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail_usage(f"cannot read {path}: not UTF-8 text (byte {e.start})", "save the file as UTF-8")


def fail_usage(message: str, hint: str | None = None) -> NoReturn:
    click.echo(visible(f"harnessc: error: {message}"), err=True)
    if hint:
        click.echo(visible(f"  hint: {hint}"), err=True)
    sys.exit(Exit.USAGE)


def echo_visible(text: str = "") -> None:
    """click.echo for text harnessc did not write: control characters shown, not obeyed."""
    click.echo(visible(text))


pass_ctx = click.make_pass_decorator(Context)


def output_option(*choices: str, old: str | None = None):
    """`--output CHOICE` (default: the first choice), the one spelling for machine output on
    every command.

    `old` names the spelling the command used before, kept working as a hidden alias:
    "--format" (an option with the same choices) or "--json" (a flag meaning `--output json`).
    The command receives the chosen value as `output`.
    """
    def decorate(f):
        @functools.wraps(f)
        def command(*args, output: str | None, output_alias=None, **kwargs):
            if output_alias:
                alias = "json" if output_alias is True else output_alias
                if output is not None and output != alias:
                    fail_usage(f"--output {output} and {old} {alias} disagree", hint="give --output only")
                output = alias
            return f(*args, output=output or choices[0], **kwargs)

        if old == "--json":
            command = click.option("--json", "output_alias", is_flag=True, hidden=True)(command)
        elif old:
            command = click.option(old, "output_alias", type=click.Choice(choices), default=None,
                                   hidden=True)(command)
        return click.option("--output", type=click.Choice(choices), default=None,
                            help=f"Output format (default: {choices[0]}).")(command)
    return decorate


SELECTOR_HINT = "selectors: id, +id, id+, tag:x, phase:x; space = union, comma = intersection"


def plan_task_ids(root: Path) -> list[str] | None:
    """The compiled plan's task ids; None without a readable plan."""
    from ..runtime.plan import PlanError, load_plan

    try:
        return [n["id"] for n in load_plan(root)["nodes"]]
    except PlanError:
        return None


def known_task_or_exit(root: Path, task: str) -> None:
    """A usage error (with did-you-mean) for a task id that the compiled plan does not have."""
    from ..diagnostics import did_you_mean

    ids = plan_task_ids(root)
    if ids is None:
        return  # no readable plan: nothing to compare with
    if task not in ids:
        fail_usage(f"no task '{task}' in the plan", did_you_mean(task, ids) or "`harnessc ls` lists the tasks")


def where_from_here(path: Path) -> str:
    """A path as it opens from the current directory (relative below it, else absolute)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def project_relative(root: Path, path: Path) -> str:
    """A path relative to the project when it is inside it."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
