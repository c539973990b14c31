"""The commands that run the plan: run (and its --dry-run), retry, doctor."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn

import click

from .. import completion
from ..exitcodes import Exit
from ..outcome import BROKEN, next_steps, run_summary_line
from ..textsafe import visible
from ..wording import command_prefix, plural, table
from ..workspace import Workspace
from .common import (
    SELECTOR_HINT,
    USD,
    Context,
    fail_usage,
    output_option,
    pass_ctx,
    project_relative,
    where_from_here,
)

if TYPE_CHECKING:
    from ..planfile import Plan


def _runtime_plan(root: Path, no_build: bool) -> Plan:
    from ..runtime import plan as planmod

    try:
        return planmod.ensure_plan(root, no_build, say=lambda m: click.echo(f"harnessc: {m}", err=True),
                                   diagnose=_show_build_diagnostics)
    except planmod.BuildFailed:
        click.echo("harnessc: the build failed; fix the errors above and run again", err=True)
        sys.exit(Exit.PROBLEMS)
    except planmod.PlanError as e:
        fail_usage(str(e))


def _show_build_diagnostics(project) -> None:
    """A build's errors and warnings as `harnessc build` prints them (source line, caret,
    hint), on stderr: the run's own output follows on stdout."""
    from ..diagnostics import REPEATS_SHOWN, render_text
    from .spec import shown_paths

    items = project.diags.sorted()
    click.echo(render_text(items, project.sources, shown_paths(items, project.root), REPEATS_SHOWN), nl=False, err=True)


UNRESOLVED: Any = object()  # executor settings not resolved yet


def _executor_settings(plan, opts, need_ray: bool = False, settings: Any = UNRESOLVED):
    """The run's executor settings (None: local) from the plan and `opts.executor` /
    `opts.ray_address` (or `settings`, resolved already); exits with a usage error for flags
    that cannot be used, or, with `need_ray`, when Ray cannot be imported."""
    from ..runtime.executor import ExecutorError
    from ..runtime.executor.rayconfig import require_ray, resolve_executor

    try:
        if settings is UNRESOLVED:
            settings = resolve_executor(plan, opts.executor, opts.ray_address)
        if settings is not None and need_ray:
            require_ray()
    except ExecutorError as e:
        fail_usage(e.message, hint=e.hint)
    return settings


def _execute(root: Path, plan: dict, opts, detached_fd: int | None = None, settings: Any = UNRESOLVED,
             **settled: Any) -> None:
    """Run with a display, print the summary, exit with the run's code. Everything said
    once the run started also goes to its run.log (observe/runlog.py). `detached_fd`: this
    is the child of `run --detach`, reporting on that pipe once the run started (children/detach.py).
    `settings`: the executor's, when the caller resolved them (else resolved here, once);
    `settled`: the router and the selected tasks, when the caller worked them out (session.setup)."""
    from rich.console import Console

    # before anything starts: Ray is importable
    settings = _executor_settings(plan, opts, need_ray=True, settings=settings)

    from ..runtime.children import prctl
    from ..runtime.observe import display as displaymod
    from ..runtime.observe.runlog import RunLog

    # Before any child exists: our environment holds API keys, and a child running as the
    # same user could otherwise read it from /proc/<harnessc>/environ. (Only run and retry
    # start children; other commands keep their start-up cost and stay debuggable.)
    prctl.make_undumpable()
    from ..gitrepo import IsolationError
    from ..runtime.executor import ExecutorError
    from ..runtime.preflight import Refused
    from ..runtime.session import execute
    from ..runtime.store.lock import Locked
    from ..runtime.store.state import StateError

    _leave_out_redirected_output(root)
    # detached: the terminal is only borrowed until the run starts; the log is never live
    console = Console(force_terminal=False) if detached_fd is not None else Console()
    view = displaymod.make_display(console)
    log = RunLog(view)  # a plain view's lines are the log's

    def say(text: str, err: bool = False) -> None:
        """A line on the terminal and in the run's log."""
        click.echo(text, err=err)
        log.line(text)

    def on_start(runner, recovered):
        lines = _start_lines(runner, recovered)
        workspace = Workspace(root)
        if detached_fd is not None:
            for line in lines:  # on the user's terminal too, before it is let go
                click.echo(line, err=True)
            from ..runtime.children.detach import hand_off

            hand_off(detached_fd, workspace, runner.store.run_id)
        log.open(workspace, runner, runner.store.run_id)
        for line in lines:
            say(line, err=True)
        view.start(runner, 0)

    try:
        result = execute(root, plan, opts, listeners=[view.on_event, *([log.on_event] if log.listens else [])],
                         on_start=on_start, executor_settings=settings, **settled)  # worked out once
    except Locked as e:
        fail_usage(str(e), hint="wait for it, or stop it with `harnessc stop`")
    except Refused as e:  # nothing was called or charged
        for line in e.lines:
            click.echo(visible(f"harnessc: error: {line}"), err=True)
        if any("cannot be used" in line for line in e.lines):
            click.echo("  hint: nothing was run; fix these agents or choose others with --agent/--agents "
                       "(`harnessc doctor` checks every agent)", err=True)
        else:  # only checks that cannot start
            click.echo("  hint: nothing was run; fix the commands, or leave the tasks out with --exclude "
                       "(`harnessc lint` points at them)", err=True)
        sys.exit(Exit.USAGE)
    except StateError as e:
        log.line(f"harnessc: error: {e}")
        log.close()
        fail_usage(str(e))
    except (IsolationError, ExecutorError) as e:
        fail_usage(e.message, hint=e.hint)
    finally:
        view.close()
    from ..runtime.observe.cachesaving import cache_line

    if result.run_id:
        text = displaymod.plain_summary(result.tasks, title=f"run {result.run_id}")  # (the log's, and a pipe's)
        displaymod.print_summary(console, result.tasks, title=f"run {result.run_id}", plain=text)
        log.line(text)
    if result.stale:
        say(f"stale: {', '.join(result.stale)} — use --rerun stale", err=True)
    prog = command_prefix(root)
    if result.outputs:
        say(f"outputs: {plural(result.outputs, 'result')} in .harness/outputs/<task>.json; "
            f"`{prog} show TASK` prints one and how it was verified")
    if result.simulated:
        say("costs: simulated prices (every call went to a simulate agent); no money was spent")
    if result.outcome.nothing_to_run:
        say(visible(result.outcome.headline()))
    else:
        say(visible(run_summary_line(result.outcome, result.cost_usd, result.total_cost_usd, result.elapsed)))
        cached = cache_line(result.cache) if result.cache else None
        if cached:
            say(cached)
    for line in result.notes:  # isolation: a landing's conflict names git's words
        say(visible(line.replace("`harnessc ", f"`{prog} ")))  # a command it names works pasted here
    for line in next_steps(result.outcome, result.tasks, result.budget_stop, prog):  # skip reasons: agents' words
        say(visible(line))
    # status "error": state.db was lost under the run, and no longer holds it to report on
    if result.run_id and not result.outcome.nothing_to_run and result.status != "error":
        say(_report_line(root, result.run_id, prog))
    log.close()
    sys.exit(result.exit_code)


def _start_lines(runner, recovered: dict) -> list[str]:
    """What a run says as it starts (on stderr): the pre-flight's warning, what it resumes,
    the budget it kept."""
    lines = []
    warning = runner.preflight.warning() if runner.preflight else None
    if warning:
        lines.append(f"warning: {warning}")
    if recovered["interrupted_attempts"]:
        n = len(recovered["interrupted_attempts"])
        lines.append(f"resuming: {plural(n, 'interrupted attempt')} will start again")
    if recovered.get("max_cost_kept") is not None:
        lines.append(f"budget: ${recovered['max_cost_kept']:g} from an earlier --max-cost "
                     "(pass --max-cost to change it; `harnessc reset --all` forgets it)")
    if recovered.get("max_cost_ignored"):
        lines.append(f"budget: the --max-cost kept from an earlier run was ignored and forgotten "
                     f"({recovered['max_cost_ignored']}); harness.yaml's budget applies")
    return lines


def _leave_out_redirected_output(root: Path) -> None:
    """`harnessc run > run.log` inside the project: that file grows with every line the run
    prints, and would count as file progress for every loop task (a task repeating itself
    would never be found stuck). It is left out of progress evidence, with a warning."""
    from ..runtime.loop import files

    for path in files.redirected_output(root):
        files.leave_out(path)
        click.echo(f"warning: this run's output goes to {project_relative(root, path)}, inside the project: "
                   "it is left out of progress evidence", err=True)
        click.echo("  hint: `harnessc run --detach` runs in the background and logs to "
                   ".harness/runs/<id>/run.log", err=True)


def _report_line(root: Path, run_id: str, prog: str) -> str:
    """Where the run's HTML report goes. `run` does not draw it: the chart library costs a
    second of start-up that a short run (and `run`'s import budget) should not pay."""
    return f"report: `{prog} report` writes {where_from_here(Workspace(root).run_dir(run_id) / 'report.html')}"


@click.command()
@click.option("-s", "--select", "select", multiple=True, metavar="SELECTOR", help="Tasks to run (repeatable).",
              shell_complete=completion.selectors)
@click.option("--exclude", multiple=True, metavar="SELECTOR", help="Tasks to leave out (repeatable).",
              shell_complete=completion.selectors)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Tasks at once (default: concurrency).")
@click.option("--fail-fast", is_flag=True, help="Stop starting tasks after the first failure.")
@click.option("--rerun", type=click.Choice(["stale", "failed", "all"]), default=None,
              help="Also re-run tasks that are stale, failed (and skipped), or all.")
@click.option("--max-cost", type=USD, default=None, metavar="USD",
              help="Run budget in USD (overrides harness.yaml), kept across resumes.")
@click.option("--no-build", is_flag=True, help="Refuse to run when the plan is missing or stale.")
@click.option("--dry-run", is_flag=True,
              help="Show what would run, on which agent, at what estimated cost; call nothing.")
@click.option("--record", is_flag=True, help="Store every agent call in .harness/cassettes/ (for --replay).")
@click.option("--replay", is_flag=True,
              help="Answer every agent call from .harness/cassettes/: no network, no keys.")
@click.option("--agent", "agent", default=None, metavar="NAME", shell_complete=completion.agents,
              help="Serve every task with this agent (one of harness.yaml's agents).")
@click.option("--agents", "agents", default=None, metavar="A,B", shell_complete=completion.agents,
              help="Use only these agents: each task's chain keeps the ones listed.")
@click.option("--max-time", "max_time", default=None, metavar="DURATION",
              help="Stop the run after this long (e.g. 8h); in-flight work finishes; `run` goes on.")
@click.option("--max-iterations", "max_iterations", default=None, metavar="N|unlimited",
              help="Iterations per task for this run, over the plan's.")
@click.option("--stuck-after", "stuck_after", type=click.IntRange(min=1), default=None, metavar="N",
              help="Iterations in a row without progress before a loop task is stuck (and climbs the "
                   "recovery ladder), for this run.")
@click.option("--progress-threshold", "progress_threshold", type=click.FloatRange(0, 1), default=None,
              metavar="X", help="A loop iteration scoring below this made no progress (loop.progress.threshold).")
@click.option("--autonomous", is_flag=True,
              help="Preset for a run left alone: --max-time 24h, every recovery step, no pause on alerts.")
@click.option("--conservative", is_flag=True,
              help="Preset with more oversight: at most 100 iterations a task, milestones every 5, "
                   "critical alerts pause the run.")
@click.option("--isolation", type=click.Choice(["worktree", "none"]), default=None,
              help="Every task's isolation for this run, over the plan's: worktree runs each task in its own "
                   "git worktree and lands verified changes on harnessc/run/<run-id>.")
@click.option("--auto-approve", "auto_approve", is_flag=True,
              help="Unattended runs: `review: true` tasks land when verified, as any other.")
@click.option("--keep-worktrees", is_flag=True,
              help="Keep the worktree of a task that did not succeed, for inspection (`log` says where).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where attempts run, over harness.yaml's `executor:`: local (this machine) or ray (a Ray "
                   "cluster: pip install 'harnessc[ray]').")
@click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
              help="The Ray cluster (implies --executor ray): auto, HOST:PORT or ray://HOST:PORT; "
                   "without one a local cluster is started for the run.")
@click.option("--detach", is_flag=True,
              help="Run in the background (its own session: closing the terminal does not end it); "
                   "print the run id, its pid and its log, and return.")
@click.option("--detached-fd", "detached_fd", type=int, default=None, hidden=True)  # runtime/children/detach.py
@pass_ctx
def run(ctx: Context, select, exclude, jobs, fail_fast, rerun, max_cost, no_build, dry_run,
        record, replay, agent, agents, max_time, max_iterations, stuck_after, progress_threshold,
        autonomous, conservative, isolation, auto_approve, keep_worktrees, executor, ray_address, detach,
        detached_fd) -> None:
    """Run the compiled plan: route, call agents, verify, retry, checkpoint, resume."""
    if record and replay:
        fail_usage("--record and --replay cannot be used together")
    if detach and dry_run:
        fail_usage("--dry-run calls nothing: it has nothing to run in the background (--detach)")
    if agent and agents:
        fail_usage("--agent and --agents cannot be used together")
    if autonomous and conservative:
        fail_usage("--autonomous and --conservative cannot be used together")
    if progress_threshold is not None and not 0 <= progress_threshold <= 1:  # nan passes FloatRange
        fail_usage(f"--progress-threshold {progress_threshold}: a number from 0 to 1, like 0.15")
    preset = "autonomous" if autonomous else "conservative" if conservative else None
    only = [a.strip() for a in agents.split(",") if a.strip()] if agents is not None else None
    if only == []:
        fail_usage("--agents needs at least one agent name (--agents a,b)")
    root = ctx.root()
    plan = _runtime_plan(root, no_build)
    if detach:  # the run itself checks the rest, on this terminal still, and starts sooner without our imports
        _duration_option("--max-time", max_time)
        _iterations_option(max_iterations)
        _detach(root)
    from ..runtime import plan as planmod
    from ..runtime.routing.router import Router, RoutingError
    from ..runtime.scheduler import RunOptions

    opts = RunOptions(jobs=jobs, fail_fast=fail_fast, rerun=rerun, max_cost=max_cost,
                      select=list(select), exclude=list(exclude),
                      cassettes="record" if record else "replay" if replay else None,
                      agent=agent, agents=only, preset=preset, stuck_after=stuck_after,
                      progress_threshold=progress_threshold,
                      max_time=_duration_option("--max-time", max_time),
                      max_iterations=_iterations_option(max_iterations),
                      isolation=isolation, keep_worktrees=keep_worktrees, auto_approve=auto_approve,
                      executor=executor, ray_address=ray_address)
    settings = _executor_settings(plan, opts)  # a bad --ray-address or flag pair: a usage error, even for --dry-run
    try:
        targets = planmod.select_ids(plan, opts.select, opts.exclude)
        router = Router(plan.agents, force=opts.agent, only=opts.agents)
    except RoutingError as e:
        fail_usage(str(e))
    except planmod.PlanError as e:  # a selector that matches nothing, or a bad one
        fail_usage(str(e), e.hint or SELECTOR_HINT)
    if not opts.select:  # work put off is left out in silence nowhere
        default = targets if not opts.exclude else planmod.select_ids(plan, [], [])  # the run's own, when it is
        put_off = {n.id for n in plan.nodes if not n.done} - default
        if put_off:
            click.echo(f"put off: {plural(len(put_off), 'open task')} tagged deferred, or waiting for one, "
                       "not selected (`-s tag:deferred+` runs them)", err=True)
    if dry_run:
        _dry_run(root, plan, opts, router)
    if detached_fd is not None:
        os.set_inheritable(detached_fd, False)  # no agent or tool the run starts holds the parent waiting
    _execute(root, plan, opts, detached_fd, settings, router=router, targets=targets)


def _detach(root: Path) -> NoReturn:
    """`run --detach`: the same run (this command's flags but --detach) in the background,
    once it has started; its id, pid, log and how to follow it (runtime/children/detach.py)."""
    from ..runtime.children import detach

    ctx = click.get_current_context()
    started = detach.start(root, _flags_again(ctx, leave=("detach", "detached_fd")))
    if isinstance(started, int):  # it ended before a run started, and said why
        sys.exit(started)
    prog = command_prefix(root)
    click.echo(f"run {started.run_id} started in the background (pid {started.pid})")
    click.echo(f"log: {where_from_here(Path(started.log))}")
    click.echo(f"follow it: `{prog} log --run {started.run_id} --follow` or `{prog} status --watch`; "
               f"stop it: `{prog} stop`")
    sys.exit(Exit.OK)


def _flags_again(ctx: click.Context, leave: tuple[str, ...]) -> list[str]:
    """The command's options as given (parsed values back into flags), but those in `leave`."""
    out: list[str] = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if not isinstance(param, click.Option) or param.name in leave or value in (None, False, ()):
            continue
        flag = max(param.opts, key=len)
        if param.is_flag:
            out.append(flag)
        else:
            for v in (value if param.multiple else (value,)):
                out += [flag, str(v)]
    return out


@click.command()
@output_option("text", "json")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Check this executor instead of harness.yaml's (as `run --executor`).")
@click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
              help="Check this Ray cluster (implies --executor ray), as `run --ray-address`.")
@pass_ctx
def doctor(ctx: Context, output: str, executor: str | None, ray_address: str | None) -> None:
    """Check that every agent can be used (keys, SDKs, CLIs and their versions, base_url
    reachable, replay cassettes), the git identity when a task commits, whether the sandbox
    (bubblewrap) can start and, with the ray executor, Ray, the cluster's address and each node's git and agent CLIs; calls no agent."""
    from ..runtime import doctor as doctormod
    from ..runtime.children import prctl

    root = ctx.root()
    plan = _runtime_plan(root, no_build=False)  # the plan `run` would use (built when stale)
    settings = _executor_settings(plan, SimpleNamespace(executor=executor, ray_address=ray_address))
    prctl.make_undumpable()  # before `<cli> --version` runs: our environment holds the keys
    result = doctormod.diagnose(root, plan, settings)
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for line in _doctor_lines(result):  # a CLI's --version output, an API's error: shown, not obeyed
            click.echo(visible(line))
    sys.exit(Exit.OK if result.ok else Exit.PROBLEMS)


def _doctor_lines(result) -> list[str]:
    """`doctor`: a row per agent (its verdict, then what was checked), git, and what a run
    would refuse."""
    rows = [(a.agent, a.provider, a.verdict, "; ".join(c.detail for c in a.checks) or "nothing to check (offline)")
            for a in result.agents]
    lines = [table(("agent", "provider", "verdict", "checks"), rows)]
    lines += [f"git: {c.detail}" for c in result.git]
    lines += [f"executor: {c.what}: {c.detail}" for c in result.executor]
    if result.sandbox is not None and result.asked:  # `--output json` always says
        lines.append(f"sandbox: {result.sandbox.detail}")
    lines += [f"run would refuse: task '{task}' has no usable agent ({', '.join(route)})"
              for task, route in result.stranded.items()]
    lines += [f"run would refuse: task '{task}': {why}" for task, whys in result.programs.items() for why in whys]
    lines += [f"worktree: {c.detail}" for c in result.files]
    lines.append("ok: no problems found" if result.ok else f"{plural(result.problems, 'problem')} found")
    return lines


def _duration_option(flag: str, text: str | None) -> float | None:
    from ..vocab import parse_duration

    if text is None:
        return None
    try:
        seconds = float(parse_duration(text.strip()))
    except ValueError as e:
        fail_usage(f"{flag} {text!r}: {e}")
    if seconds <= 0:
        fail_usage(f"{flag} must be more than 0")
    return seconds


def _iterations_option(text: str | None) -> int | str | None:
    if text is None or text.strip() == "unlimited":
        return text and "unlimited"
    if not text.strip().isdigit() or int(text) < 1:
        fail_usage(f"--max-iterations {text!r}: a whole number of at least 1, or unlimited")
    return int(text)


def _dry_run(root: Path, plan: Plan, opts, router) -> NoReturn:
    from ..runtime.preview import preview

    view = preview(root, plan, opts.select, opts.exclude, opts.rerun, opts.max_cost, router,
                   replaying=opts.cassettes == "replay")
    for line in view.lines():
        click.echo(visible(line))
    sys.exit(Exit.USAGE if view.check.refused else Exit.OK)  # the run would refuse to start


@click.command()
@click.argument("tasks", nargs=-1, metavar="[TASK]...", shell_complete=completion.task_ids)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Tasks at once.")
@click.option("--max-cost", type=USD, default=None, metavar="USD",
              help="Run budget in USD (overrides harness.yaml), kept across resumes.")
@click.option("--no-build", is_flag=True, help="Refuse to run when the plan is missing or stale.")
@click.option("--record", is_flag=True, help="Store every agent call in .harness/cassettes/ (for --replay).")
@click.option("--replay", is_flag=True,
              help="Answer every agent call from .harness/cassettes/: no network, no keys.")
@pass_ctx
def retry(ctx: Context, tasks, jobs, max_cost, no_build, record, replay) -> None:
    """Re-run the failed, blocked and skipped tasks of the last run (or only TASK..., with
    the tasks skipped because of them)."""
    from ..diagnostics import did_you_mean
    from ..runtime.observe import report
    from ..runtime.scheduler import RunOptions

    root = ctx.root()
    data = report.status(root)
    if data["run"] is None:
        fail_usage("nothing to retry: no run yet", hint="use `harnessc run`")
    if record and replay:
        fail_usage("--record and --replay cannot be used together")
    states = {t["id"]: t["state"] for t in data["tasks"] if not t.get("removed")}
    broken = {tid for tid, state in states.items() if state in BROKEN}
    for tid in tasks:
        if tid not in states:
            fail_usage(f"no task '{tid}' in the plan", did_you_mean(tid, list(states)) or "`harnessc ls` lists the tasks")
        if tid not in broken:
            fail_usage(f"'{tid}' is {states[tid]}: retry re-runs failed, blocked and skipped tasks",
                       f"`harnessc reset {tid}` makes it run again")
    plan = _runtime_plan(root, no_build) if tasks or broken else None
    ids = _with_skipped_dependents(plan, set(tasks), broken) if tasks else broken
    if not ids:
        click.echo("nothing to retry: no failed, blocked or skipped tasks")
        return
    _execute(root, plan, RunOptions(jobs=jobs, max_cost=max_cost, only=ids,
                                    cassettes="record" if record else "replay" if replay else None))


def _with_skipped_dependents(plan, named: set[str], broken: set[str]) -> set[str]:
    """The named tasks and, transitively, the broken tasks that depend on them (skipped
    because of them): retrying a blocked task lets its dependents run after it."""
    ids, grew = set(named), True
    while grew:
        more = {n.id for n in plan.nodes if n.id in broken and n.id not in ids and ids & set(n.depends_on)}
        ids |= more
        grew = bool(more)
    return ids
