"""The harnessc command line: click commands only. Parse flags, call the library, pick exit codes.

Exit codes are decided here and nowhere else:
  0  clean / every task succeeded, degraded or done
  1  spec errors, invalid output, or a task failed
  2  usage or internal error
  3  stopped, or a limit or budget reached before the end
"""

from __future__ import annotations

import sys
from enum import IntEnum
from pathlib import Path

import click

from . import __version__


class Exit(IntEnum):
    OK = 0
    PROBLEMS = 1
    USAGE = 2
    STOPPED = 3


SPEC_FILES = ("roadmap.md", "harness.yaml")


def find_project_root(start: Path) -> Path | None:
    """The nearest directory upward from `start` holding roadmap.md or harness.yaml."""
    start = start.resolve()
    for d in (start, *start.parents):
        if any((d / name).is_file() for name in SPEC_FILES):
            return d
    return None


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


def fail_usage(message: str, hint: str | None = None) -> "NoReturn":  # noqa: F821
    click.echo(f"harnessc: error: {message}", err=True)
    if hint:
        click.echo(f"  hint: {hint}", err=True)
    sys.exit(Exit.USAGE)


pass_ctx = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="harnessc")
@click.option(
    "-C", "--project", metavar="DIR", default=None,
    help="Project directory (default: nearest directory upward with roadmap.md or harness.yaml).",
)
@click.pass_context
def cli(ctx: click.Context, project: str | None) -> None:
    """Compile roadmap.md + contracts.yaml into a checked plan, and run it."""
    ctx.obj = Context(project)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("harnessc: aborted", err=True)
        sys.exit(Exit.STOPPED)
    except click.ClickException as e:
        e.show()
        sys.exit(Exit.USAGE)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        click.echo("harnessc: interrupted", err=True)
        sys.exit(Exit.STOPPED)
    except Exception as e:  # an internal error: say so plainly, never a traceback
        click.echo(f"harnessc: internal error: {type(e).__name__}: {e}", err=True)
        click.echo("  hint: set HARNESSC_DEBUG=1 for the traceback, and please report it", err=True)
        import os

        if os.environ.get("HARNESSC_DEBUG"):
            raise
        sys.exit(Exit.USAGE)


# ============================================================== compiler commands
# (lint, build, ls, graph, validate, schema, contracts, init) — see below

# ============================================================== runtime commands
# (run, status, stop, retry, reset, log) — see below
