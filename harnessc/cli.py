"""The harnessc command line: the `harnessc` group and `main()`. The commands are in
harnessc/commands/ (parse flags, call the library, print), each module imported when one of
its commands is used: `lint` loads the checking code and not run's, status's or report's.

Exit codes come from harnessc/exitcodes.py; a run's code and summary lines from outcome.py.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys

import click

from . import __version__
from .commands.common import Context, fail_usage
from .errors import HarnesscError
from .exitcodes import Exit

# Every command: its name -> "module:function" in harnessc/commands/ (one module per area).
COMMANDS = {
    **{name: f"spec:{name}" for name in ("lint", "build", "graph", "validate", "schema", "contracts", "explain", "init")},
    "ls": "spec:ls_cmd",
    "import": "importing:import_cmd",
    "draft": "drafting:draft",
    **{name: f"running:{name}" for name in ("run", "retry", "doctor")},
    **{name: f"steering:{name}" for name in ("stop", "tell", "pause", "resume")},
    **{name: f"state:{name}" for name in ("status", "log", "runs", "show", "stats", "reset", "clean")},
    "report": "state:report_cmd",
    "memory": "memory:memory",
    **{name: f"review:{name}" for name in ("review", "approve", "reject")},
    "accept-proposal": "review:accept_proposal",
    "reject-proposal": "review:reject_proposal",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use (`lazy_commands`: name -> "module:function"
    under harnessc.commands). `--help` and shell completion list them all, importing each."""

    def __init__(self, *args, lazy_commands: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            module, _, attr = self.lazy[name].partition(":")
            self.add_command(getattr(importlib.import_module(f"{__package__}.commands.{module}"), attr), name)
        return self.commands.get(name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            if getattr(e, "command_name", None) is None:  # not click's NoSuchCommand (click >= 8.2)
                raise
            # click's "did you mean" looks among the commands loaded so far: look among them all
            raise type(e)(e.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None  # type: ignore[attr-defined, call-arg]


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
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
        # the completion variable is _HARNESSC_COMPLETE however harnessc was started (python -m)
        cli.main(standalone_mode=False, complete_var="_HARNESSC_COMPLETE")
    except click.exceptions.Abort:
        click.echo("harnessc: aborted", err=True)
        sys.exit(Exit.STOPPED)
    except click.NoSuchOption as e:
        if e.option_name in ("-C", "--project"):
            fail_usage(f"{e.option_name} is an option of harnessc, not of the command",
                       hint=f"put -C before the command: {_project_first(sys.argv[1:])}")
        e.show()
        sys.exit(Exit.USAGE)
    except click.ClickException as e:
        e.show()
        sys.exit(Exit.USAGE)
    except SystemExit:
        raise
    except HarnesscError as e:  # errors.py: a damaged state.db, a link refused, a full disk, ...
        fail_usage(e.message, e.hint)
    except KeyboardInterrupt:
        click.echo("harnessc: interrupted", err=True)
        sys.exit(Exit.STOPPED)
    except Exception as e:
        if type(e).__module__ == "sqlite3" and not os.environ.get("HARNESSC_DEBUG"):
            # state.db is the only SQLite file: damaged in a way the check at open did not see
            damaged = type(e).__name__ == "DatabaseError"  # not locked, I/O or a full disk
            fail_usage(f".harness/state.db cannot be used ({e})",
                       "restore it from a backup, or move it aside to start fresh" if damaged else None)
        # an internal error: say so plainly, never a traceback
        click.echo(f"harnessc: internal error: {type(e).__name__}: {e}", err=True)
        click.echo("  hint: set HARNESSC_DEBUG=1 for the traceback, and please report it", err=True)
        if os.environ.get("HARNESSC_DEBUG"):
            raise
        sys.exit(Exit.USAGE)


def _project_first(args: list[str]) -> str:
    """The command line with a misplaced -C DIR (or --project[=]DIR) moved to the front."""
    rest, moved, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a in ("-C", "--project") and i + 1 < len(args):
            moved, i = ["-C", args[i + 1]], i + 2
            continue
        if a.startswith("--project="):
            moved = ["-C", a.split("=", 1)[1]]
        elif a.startswith("-C") and len(a) > 2:
            moved = ["-C", a[2:]]
        else:
            rest.append(a)
        i += 1
    return shlex.join(["harnessc", *moved, *rest])
