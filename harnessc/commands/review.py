"""The review gate (`review: true`): `harnessc review`, `approve TASK...`, `reject TASK "why"`.

A decision is recorded in state.db (meta `review.<task>`, under BEGIN IMMEDIATE: two
`approve`s at once record one decision) and an inbox command wakes the running run, which
applies it (runtime/scheduler.py `_take_reviews`): the run lands, never this command, so
two processes never land. With no run going on, the next `harnessc run` applies it first.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from .. import completion
from ..exitcodes import Exit
from ..states import TaskState
from ..textsafe import visible
from ..workspace import Workspace, WorkspaceError
from .common import Context, fail_usage, pass_ctx


def _open(ctx: Context):
    from ..runtime.store.state import NoState, StateStore

    workspace = Workspace(ctx.root())
    try:
        return workspace, StateStore(workspace, create=False)
    except NoState:
        fail_usage("no run yet: nothing waits for review", "harnessc run")


def _held(store) -> dict[str, dict]:
    from ..runtime.worktree.landing import LANDING_KEY

    out = {}
    for key in store.meta_keys(LANDING_KEY):
        try:
            rec = json.loads(store.meta_get(key) or "{}")
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("state") == TaskState.REVIEW:
            out[key.removeprefix(LANDING_KEY)] = rec
    return out


def _diffstat(root, base: str, change: str) -> str:
    from .. import gitrepo as repo

    try:  # harnessc's own git: its git directory named, the repository's config only (gitcmd.py)
        return repo.find(root).git().run("diff", "--shortstat", base, change, worktree=False).strip() \
            or "no changes"
    except Exception as e:  # the diff is a courtesy: the listing goes on
        return f"diff stat unavailable ({str(e)[:100]})"


@click.command()
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@pass_ctx
def review(ctx: Context, output: str) -> None:
    """List the tasks whose verified result waits for review, with how to see each diff."""
    from .. import proposals
    from ..runtime.plan import PlanError, load_plan
    from ..runtime.store.state import REVIEW_KEY

    proposed = [p for p in proposals.Store(ctx.root()).all()
                if p.status in (proposals.WAITING, proposals.REJECTED) and not p.dismissed]
    if proposed and not ctx.root().joinpath(".harness", "state.db").exists():
        _show_proposals(proposed, output, [])
        return
    workspace, store = _open(ctx)
    try:
        rows = {t: r for t, r in store.tasks().items() if r["state"] == TaskState.REVIEW}
        held, decided = _held(store), {k.removeprefix(REVIEW_KEY) for k in store.meta_keys(REVIEW_KEY)}
    finally:
        store.close()
    try:
        titles = {n["id"]: n["title"] for n in load_plan(ctx.root())["nodes"]}
    except PlanError:
        titles = {}
    items = []
    for tid in sorted(rows):
        rec, out = held.get(tid), rows[tid]["output"]
        summary = titles.get(tid, "")
        if isinstance(out, str) and out.strip():
            summary += f" — {out.strip().splitlines()[0][:120]}"
        item = {"task": tid, "summary": summary, "decided": tid in decided}
        if rec and rec.get("change"):
            item.update(ref=rec.get("ref"), diffstat=_diffstat(ctx.root(), rec["base"], rec["change"]),
                        diff=f"git diff {rec['base'][:12]} {rec['change'][:12]}")
        else:
            item.update(diffstat="in the working tree (not isolated): review gates its dependents only",
                        diff="git diff")
        items.append(item)
    if proposed:
        _show_proposals(proposed, output, items)
        return
    if output == "json":
        click.echo(json.dumps(items, indent=2))
        return
    if not items:
        click.echo("nothing waits for review")
        return
    _show_held(items)


def _show_held(items: list[dict]) -> None:
    for it in items:
        click.echo(f"{it['task']}: {it['summary']}" + (" (decided: the run applies it)" if it["decided"] else ""))
        click.echo(f"  {it['diffstat']}")
        click.echo(f"  see it:  {it['diff']}")
    first = items[0]["task"]
    click.echo(f'then: harnessc approve {first}   or   harnessc reject {first} "why"')


def _show_proposals(proposed: list, output: str, items: list[dict]) -> None:
    """Proposed tasks (proposals.py) after the held results: waiting ones first, then rejected."""
    from .. import proposals

    if output == "json":
        click.echo(json.dumps({"review": items, "proposals": [asdict(p) for p in proposed]}, indent=2))
        return
    if items:
        _show_held(items)
        click.echo("")
    waiting = [p for p in proposed if p.status == proposals.WAITING]
    rejected = [p for p in proposed if p.status == proposals.REJECTED]
    if waiting:
        click.echo("proposed tasks waiting for review:")
    for p in waiting:
        deps = f" (depends on {', '.join(p.depends_on)})" if p.depends_on else ""
        click.echo(f"  {p.id}: {visible(p.title)}{deps}  [proposed by {p.proposed_by}, generation {p.generation}]")
        click.echo(f"    goal: {visible(p.goal[:200])}")
    if rejected:
        click.echo("proposed tasks rejected:")
    for p in rejected:
        click.echo(f"  {p.id}: {visible(p.title)}  [proposed by {p.proposed_by}]")
        for d in p.diagnostics[:5]:
            click.echo(f"    {visible(d)}")
    if waiting:
        click.echo(f"then: harnessc accept-proposal {waiting[0].id}   (appends it to roadmap.md and rebuilds; "
                   ".harness/proposals/ has them in roadmap syntax)")


@click.command("accept-proposal")
@click.argument("task_ids", nargs=-1, required=True, metavar="ID...")
@pass_ctx
def accept_proposal(ctx: Context, task_ids: tuple) -> None:
    """Append proposed tasks to roadmap.md (each linted again first) and rebuild the plan."""
    from .. import proposals
    from ..compiler import compile_project, write_build
    from .spec import report

    root = ctx.root()
    for tid in dict.fromkeys(task_ids):  # in the order given: a dependency first
        try:
            p, line = proposals.accept(root, tid)
        except proposals.ProposalError as e:
            fail_usage(str(e), "`harnessc review` lists the proposed tasks and why any was rejected")
        except (OSError, UnicodeDecodeError) as e:
            fail_usage(f"roadmap.md could not be changed ({e})")
        click.echo(f"{p.id}: appended to roadmap.md at line {line} (proposed by {p.proposed_by}); "
                   "`git diff roadmap.md` shows it")
    project = compile_project(root, write_prompts=True)
    code = report(project.diags, project.sources, "text", False, quiet_ok=True, root=project.root)
    if code != Exit.OK or project.plan is None:
        sys.exit(code)
    write_build(project)
    click.echo("rebuilt .harness/build/plan.json: the next `harnessc run` runs the new task"
               + ("s" if len(task_ids) > 1 else ""))


@click.command("reject-proposal")
@click.argument("task_ids", nargs=-1, required=True, metavar="ID...")
@pass_ctx
def reject_proposal(ctx: Context, task_ids: tuple) -> None:
    """Reject proposed tasks: they leave `harnessc review` (kept in .harness/proposals/, marked rejected)."""
    from .. import proposals

    root = ctx.root()
    for tid in dict.fromkeys(task_ids):
        try:
            p = proposals.reject(root, tid)
        except proposals.ProposalError as e:
            fail_usage(str(e), "`harnessc review` lists the proposed tasks")
        except (OSError, WorkspaceError) as e:
            fail_usage(f".harness/proposals/ could not be changed ({e})")
        click.echo(f"{p.id}: rejected (proposed by {p.proposed_by}); "
                   f"{proposals.Store(root).path(p.proposed_by)} keeps it")


def _decide(ctx: Context, tasks: tuple[str, ...], decision: str, why: str | None = None) -> None:
    from ..runtime.steering import InboxError, write_inbox
    from ..runtime.store.lock import holder
    from ..runtime.store.state import REVIEW_KEY

    workspace, store = _open(ctx)
    said = []
    try:
        rows = store.tasks()
        for tid in tasks:  # every name checked before anything is recorded
            if tid not in rows:
                from ..diagnostics import did_you_mean
                near = did_you_mean(tid, list(rows))
                fail_usage(f"no task '{tid}'" + (f" ({near})" if near else ""),
                           "`harnessc review` lists the tasks waiting for review")
            if rows[tid]["state"] != TaskState.REVIEW:
                fail_usage(f"task '{tid}' is not in review (it is {rows[tid]['state']})",
                           "`harnessc review` lists the tasks waiting for review")
        for tid in dict.fromkeys(tasks):
            with store.tx():  # BEGIN IMMEDIATE: one decision, whoever comes first
                row = store.tasks([tid]).get(tid, {})
                taken = store.meta_get(REVIEW_KEY + tid)
                if row.get("state") == TaskState.REVIEW and not taken:
                    store.meta_set(REVIEW_KEY + tid, json.dumps({"decision": decision, "why": why}))
                    store.event(f"review_{decision}_asked", tid, why=why)
                    said.append((tid, None))
                else:
                    said.append((tid, "already decided" if taken else f"no longer in review ({row.get('state')})"))
    finally:
        store.close()
    pid = holder(workspace)
    for tid, already in said:
        if already:
            click.echo(f"{tid}: {already}: nothing more to do")
            continue
        try:
            write_inbox(workspace, "review", {"command": "review", "task": tid})  # wakes a running run
        except (InboxError, WorkspaceError):
            pass  # the decision is in state.db: the next run applies it
        does = "lands it and releases its dependents" if decision == "approved" else \
            "runs it again with your reason in its prompt"
        click.echo(f"{tid}: {decision}; " + (f"the run in progress (pid {pid}) {does}" if pid
                                             else f"no run is in progress: the next `harnessc run` {does}"))


@click.command()
@click.argument("tasks", nargs=-1, required=True, metavar="TASK...", shell_complete=completion.task_ids)
@pass_ctx
def approve(ctx: Context, tasks: tuple) -> None:
    """Approve tasks in review: their changes land and their dependents run."""
    _decide(ctx, tasks, "approved")


@click.command()
@click.argument("task", metavar="TASK", shell_complete=completion.task_ids)
@click.argument("why", metavar='"WHY"')
@pass_ctx
def reject(ctx: Context, task: str, why: str) -> None:
    """Reject a task in review: it runs again with WHY in its prompt as a reviewer's feedback."""
    if not why.strip():
        fail_usage("the reason is empty", f'harnessc reject {task} "what is wrong with it"')
    _decide(ctx, (task,), "rejected", why.strip())
