"""Steering a run from outside it: stop, tell, pause, resume (files in .harness/inbox/)."""

from __future__ import annotations

from pathlib import Path

import click

from .. import completion
from ..workspace import Workspace
from .common import Context, fail_usage, known_task_or_exit, pass_ctx, plan_task_ids


@click.command()
@click.option("--abort", is_flag=True, help="Cancel in-flight work now instead of finishing it.")
@pass_ctx
def stop(ctx: Context, abort: bool) -> None:
    """Ask the running `harnessc run` to stop (it checkpoints and exits 3)."""
    from ..runtime.store.lock import holder

    workspace = Workspace(ctx.root())
    workspace.write_atomic(workspace.stop, "abort\n" if abort else "stop\n")
    pid = holder(workspace)
    if pid:
        click.echo(f"asked run (pid {pid}) to {'abort' if abort else 'stop'}")
    else:
        click.echo("no run is in progress; the request will be ignored by the next run")


def _to_inbox(ctx: Context, kind: str, data: dict, what: str, later: str) -> None:
    """Write one inbox file (runtime/steering.py) and say who will read it."""
    from ..runtime.steering import InboxError, write_inbox
    from ..runtime.store.lock import holder

    workspace = Workspace(ctx.root())
    try:
        path = write_inbox(workspace, kind, data)
    except InboxError as e:  # what the run would refuse is refused now, not queued
        fail_usage(f"the {'instruction' if kind == 'tell' else kind} is not queued: it is {e}")
    pid = holder(workspace)
    if pid:
        click.echo(f"{what}: the run in progress (pid {pid}) reads it within a second ({workspace.rel(path)})")
    else:
        click.echo(f"{what}: no run is in progress; {later} ({workspace.rel(path)})")


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="[TASK] TEXT", shell_complete=completion.tell_task)
@click.option("--urgent", is_flag=True, help="Also cut the task's wait before its next iteration short.")
@pass_ctx
def tell(ctx: Context, words: tuple, urgent: bool) -> None:
    """Give the running tasks (or one TASK) an instruction for their next prompts."""
    if len(words) > 2:
        fail_usage("tell takes [TASK] TEXT", hint='quote the text: harnessc tell build "use the v2 API"')
    task, text = (None, words[0]) if len(words) == 1 else words
    if not text.strip():
        fail_usage("the instruction is empty")
    if task is None and text.strip() in (plan_task_ids(ctx.root()) or ()):  # `tell TASK` without the text
        fail_usage(f"'{text.strip()}' is a task: the instruction is missing",
                   hint=f'harnessc tell {text.strip()} "what to do differently"')
    _instructions_on_or_exit(ctx.root(), task)
    _to_inbox(ctx, "tell", {"task": task, "text": text, "urgent": urgent},
              f"instruction for {task or 'every task'} queued",
              "the next run gives it to " + (f"{task}'s first prompt" if task else "every task it runs"))


@click.command()
@pass_ctx
def pause(ctx: Context) -> None:
    """Pause the run: in-flight calls finish, nothing new starts until `harnessc resume`."""
    _to_inbox(ctx, "pause", {"command": "pause"}, "pause queued", "the next run starts paused")


@click.command()
@pass_ctx
def resume(ctx: Context) -> None:
    """Resume a paused run."""
    _to_inbox(ctx, "resume", {"command": "resume"}, "resume queued",
              "the next run reads it after any earlier pause, and does not pause")


def _instructions_on_or_exit(root: Path, task: str | None) -> None:
    """A usage error when the compiled plan refuses inbox instructions (loop.environment.inbox:
    false) or has no task `task`."""
    from ..runtime.plan import PlanError, load_plan, loop_settings

    try:
        plan = load_plan(root)
    except PlanError:
        return  # no readable plan: nothing to compare with
    if not loop_settings(plan).environment.inbox:
        fail_usage("instructions are off in this project (harness.yaml loop.environment.inbox: false): "
                   "a run would refuse this one", "set loop.environment.inbox: true to steer agents from the inbox")
    if task is not None:
        known_task_or_exit(root, task)
