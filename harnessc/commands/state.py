"""What runs left behind: status, log, runs, show, stats, report; reset and clean."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from pathlib import Path

import click

from .. import completion
from ..exitcodes import Exit
from ..textsafe import json_text, visible
from ..wording import accept_name, duration, plural, table
from ..workspace import Workspace, WorkspaceError
from .common import Context, echo_visible, fail_usage, known_task_or_exit, output_option, pass_ctx, where_from_here


@click.command()
@output_option("text", "json", old="--json")
@click.option("--watch", is_flag=True, help="Show it again every --interval seconds until the run ends (Ctrl-C quits).")
@click.option("--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True, metavar="S",
              help="Seconds between two looks with --watch.")
@pass_ctx
def status(ctx: Context, output: str, watch: bool, interval: float) -> None:
    """Task states of the current or last run (works while a run goes on)."""
    from rich.console import Console

    from ..runtime.observe import report

    root = ctx.root()
    console = Console()
    try:
        if not watch:
            data = report.status(root)
            if output == "json":
                click.echo(json_text(data, indent=2, sort_keys=True, default=str))
            else:
                for part in _status_parts(data, console.is_terminal):
                    echo_visible(part) if isinstance(part, str) else console.print(part)
        elif output == "json":  # a JSON document a line, a line per look
            for data in report.watch_status(root, interval):
                click.echo(json_text(data, sort_keys=True, default=str))
        elif console.is_terminal:
            _watch_status_live(console, report.watch_status(root, interval), interval)
        else:  # a block per look, with the time between two
            for n, data in enumerate(report.watch_status(root, interval)):
                if n:
                    click.echo(f"\n--- {_clock()}")
                for part in _status_parts(data, False):
                    echo_visible(part)  # what agents and servers wrote is shown, never obeyed
    except KeyboardInterrupt:
        if not watch:
            raise
        sys.exit(Exit.OK)  # Ctrl-C is how watching ends: not an interrupted command


def _clock() -> str:
    return time.strftime("%H:%M:%S")


def _watch_status_live(console, looks, interval: float) -> None:
    """`status --watch` on a terminal: the status redrawn in place; the last one stays."""
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    with Live(console=console, auto_refresh=False, transient=False) as live:
        for data in looks:
            parts = [Text(visible(p)) if isinstance(p, str) else p for p in _status_parts(data, True)]
            if data["run"] and data["run"]["active"]:  # the last look, the run's end, stays without it
                parts.insert(0, Text(f"every {interval:g}s, {_clock()} · Ctrl-C quits", style="dim"))
            live.update(Group(*parts), refresh=True)


def _status_parts(data: dict, terminal: bool) -> list:
    """What `status` prints, in order: lines, and the task table (a rich table on a terminal,
    aligned text otherwise)."""
    from ..runtime.observe import report
    from ..runtime.observe.display import plain_summary, summary_table

    parts: list = []
    run_ = data["run"]
    if run_ is None:
        parts.append("no runs yet")
    else:
        state = f"running for {duration(run_['elapsed'])}" if run_.get("active") else run_["status"]
        if run_.get("paused"):
            state += ", paused (`harnessc resume` continues)"
        if run_["status"] == "interrupted":
            state = "interrupted (harnessc is not running; `harnessc run` goes on)"
        counts = ", ".join(f"{v} {k}" for k, v in sorted(run_["counts"].items()))
        pid = f" (pid {run_['pid']})" if run_.get("pid") else ""
        reserved = run_.get("reserved_usd") or 0.0
        cost = (f"${run_['cost_usd'] - reserved:.4f} spent + ${reserved:.4f} reserved by unsettled calls"
                if reserved > 0 else f"${run_['cost_usd']:.4f} spent")
        parts.append(f"run {run_['id']}: {state}{pid} — {counts}; {cost}")
    running = [t for t in data["tasks"] if "elapsed" in t and "loop" not in t]
    if running:
        parts.append("running: " + ", ".join(f"{t['id']} ({duration(t['elapsed'])}, iteration {t['iterations']})"
                                             for t in running))
    for t in data["tasks"]:
        if "loop" in t:
            parts.append(_loop_line(t, duration))
    if data["tasks"]:
        # A running task's time column is its time so far.
        rows = [{**t, "duration": t["elapsed"]} if "elapsed" in t else t for t in data["tasks"]]
        parts.append(summary_table(rows) if terminal else plain_summary(rows))
    totals = data["totals"]
    if totals and totals["attempts"]:
        sources = report.cost_sources_text(totals["cost_sources"])
        parts.append(f"total: {totals['tokens']:,} tokens = {report.usage_text(totals)}; "
                     f"${totals['cost_usd']:.4f} over {plural(totals['attempts'], 'attempt')} (cost: {sources})")
    unknown = (totals or {}).get("unknown") or {}
    if unknown.get("calls"):
        parts.append(report.unknown_text(unknown["calls"], unknown["estimated_usd"]))
    assists = (totals or {}).get("assists") or {}
    if assists.get("calls"):
        parts.append(f"assist calls: {assists['tokens']:,} tokens; ${assists['cost_usd']:.4f} over "
                     f"{plural(assists['calls'], 'call')} (prompt mutations and summaries by cheap agents)")
    stale = [t["id"] for t in data["tasks"] if t.get("stale")]
    if stale:
        parts.append(f"stale: {', '.join(stale)} — use --rerun stale")
    parts += _agent_lines(data.get("agents") or {})
    return parts


def _agent_lines(agents: dict[str, dict]) -> list[str]:
    """`status`: agents with a daily limit, or whose breaker is not closed."""
    from ..runtime.routing.health import clock_text

    out = []
    for name, a in agents.items():
        parts = []
        if a["breaker"] != "closed":
            until = clock_text(a["open_until"])
            parts.append(f"breaker {a['breaker']}" + (f" until {until}" if a["breaker"] == "open" else "")
                         + (f" ({a['reason']})" if a["reason"] else ""))
        for key, cap in a["limits"].items():
            field = {"daily_calls": "calls", "daily_tokens": "tokens", "daily_cost_usd": "cost_usd"}[key]
            parts.append(f"{field.replace('_usd', '')} today {a['today'][field]:g}/{cap:g}")
        if parts:
            out.append(f"agent {name}: " + "; ".join(parts))
    return out


def _progress_line(p: dict) -> str:
    """A loop iteration's progress evidence (runtime/loop/progress.py) in one line."""
    signals = ", ".join(f"{k} {v:.2f}" for k, v in sorted((p.get("signals") or {}).items()))
    files = p.get("files")
    what = [f"{files['files']} file(s) changed" + (f", +{files['added']} -{files['removed']} lines"
                                                 if files.get("source") == "git" else "")
            + (f", {files['commits']} commit(s)" if files.get("commits") else "")] if files else []
    what += [f"marker: {m}" for m in p.get("markers") or []]
    what += [f"done: {d}" for d in p.get("done") or []]
    return (f"--- progress {p.get('score', 0):.2f}" + (" (no progress)" if p.get("low") else "")
            + f": {signals}" + ("; " + "; ".join(what) if what else ""))


def _loop_line(t: dict, duration) -> str:
    """A running loop task in one line: iteration N/limit, last-5 progress, agent, elapsed, the
    recovery rung it is on (once it climbed one), marker."""
    loop = t["loop"]
    limit = loop["max_iterations"] if loop["max_iterations"] is not None else "unlimited"
    progress = f"{loop['progress']:.2f}" if loop["progress"] is not None else "-"
    marker = loop["last_marker"]
    if marker and len(marker) > 60:
        marker = marker[:57] + "..."
    rung = loop.get("recovery")
    return (f"loop {t['id']}: iteration {loop['iteration']}/{limit} · progress {progress} (last 5 avg) · "
            f"{t['agent']} · {duration(t['elapsed'])}"
            + (f" · recovery {rung['step']}/{rung['rungs']} ({rung['rung']})" if rung else "")
            + (f' · last marker: "{marker}"' if marker else ""))


@click.command()
@click.argument("tasks", nargs=-1, shell_complete=completion.task_ids)
@click.option("--all", "all_", is_flag=True,
              help="Forget every task, attempt, the budget ledger, the kept --max-cost and the agents' breakers.")
@click.option("--downstream", is_flag=True, help="Also reset every task that depends on TASK, transitively.")
@click.option("--breakers", is_flag=True, help="Close every agent's circuit breaker (alone, or with TASK/--all).")
@pass_ctx
def reset(ctx: Context, tasks, all_: bool, downstream: bool, breakers: bool) -> None:
    """Forget the state of the given tasks (or --all) so they run again."""
    from ..diagnostics import did_you_mean
    from ..runtime.routing.health import clear_breakers
    from ..runtime.store import reset as resetmod
    from ..runtime.store.lock import Locked, RunLock
    from ..runtime.store.outputs import forget as forget_outputs
    from ..runtime.store.state import NoState, StateStore

    if tasks and all_ or not (tasks or all_ or breakers):
        fail_usage("give task ids or --all (not both), or --breakers")
    if downstream and all_:
        fail_usage("--downstream goes with task ids; --all resets everything already")
    root = ctx.root()
    workspace = Workspace(root)
    project = resetmod.project_tasks(root) if tasks else None

    def check_known(rows: dict) -> None:
        known = [t["id"] for t in project or []] + sorted(set(rows) - {t["id"] for t in project or []})
        unknown = [t for t in tasks if t not in known]
        if unknown:
            fail_usage(f"no task {', '.join(repr(t) for t in unknown)} in the project",
                       did_you_mean(unknown[0], known) or "`harnessc ls` lists the tasks")

    if not workspace.state_db.exists():
        check_known({})
        click.echo("nothing to reset: no state yet")
        return
    try:
        with RunLock(workspace):
            try:
                store = StateStore(workspace, create=False)
            except NoState:  # a run is creating it right now
                check_known({})
                click.echo("nothing to reset: no state yet")
                return
            try:
                rows = store.tasks()
                check_known(rows)
                ids = None if all_ else resetmod.downstream(project, list(tasks)) if downstream else list(tasks)
                stale = resetmod.stale_dependents(project, rows, ids) if project and ids else []
                n = store.reset(ids) if tasks or all_ else None
                closed = clear_breakers(store) if breakers or all_ else []
            finally:
                store.close()
            try:
                forget_outputs(workspace, ids)  # their results no longer stand
            except WorkspaceError as e:
                click.echo(f"warning: {e}", err=True)
    except Locked as e:
        fail_usage(str(e), hint="stop it first with `harnessc stop`")
    if n is not None:
        click.echo(f"reset {plural(n, 'task')}" + (f" (with --downstream: {', '.join(ids)})" if downstream else ""))
    if breakers or closed:
        click.echo(f"closed the breaker of {', '.join(closed)}" if closed else "no breaker was open")
    if stale:
        click.echo(f"warning: {', '.join(stale)} succeeded on the output of what was reset and "
                   f"{'is' if len(stale) == 1 else 'are'} now stale (a reset does not re-run dependents)",
                   err=True)
        click.echo(f"  hint: reset {'it' if len(stale) == 1 else 'them'} too with "
                   f"`harnessc reset --downstream {' '.join(tasks)}`", err=True)


@click.command()
@click.option("--keep", type=click.IntRange(min=0), default=10, show_default=True, metavar="N",
              help="How many of the newest run directories to keep.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@click.option("--branches", is_flag=True,
              help="Remove every integration branch harnessc/run/<id> of this project, merged or not.")
@pass_ctx
def clean(ctx: Context, keep: int, dry_run: bool, branches: bool) -> None:
    """Remove old .harness/runs/<run-id>/ directories, keeping the newest N (never the run in progress),
    stale .harness/loop/<task>.index files of earlier versions, and the integration branches
    harnessc/run/<id> your branch already holds (--branches: all of them)."""
    from ..runtime.store.clean import prune, remove_stale_indexes
    from ..runtime.worktree.isolation import clean_leftovers
    from ..runtime.worktree.runbranches import clean_branches

    workspace = Workspace(ctx.root())
    result = prune(workspace, keep, dry_run)
    indexes = remove_stale_indexes(workspace, dry_run)
    leftovers = clean_leftovers(workspace.root, dry_run)
    integration = clean_branches(workspace.root, branches, dry_run)
    for name in leftovers:
        click.echo(f"{'would remove' if dry_run else 'removed'} {name} (left by a run that stopped)")
    for name in integration.removed:
        click.echo(f"{'would remove' if dry_run else 'removed'} branch {name}"
                   + (" (merged into your branch)" if not branches else ""))
    if integration.kept:
        click.echo(f"kept {plural(len(integration.kept), 'integration branch', 'integration branches')} your branch does not hold: "
                   f"{', '.join(integration.kept)} (`git merge <branch>` takes its work; "
                   "`harnessc clean --branches` removes them)")
    leftovers = leftovers + integration.removed
    for link in result.links:
        click.echo(f"warning: left .harness/runs/{link} alone: a symbolic link, not a run directory", err=True)
    for name in indexes:
        click.echo(f"{'would remove' if dry_run else 'removed'} .harness/loop/{name} (a stale index of an earlier version)")
    if not result.removed:
        click.echo(f"{'no run to remove' if indexes or leftovers else 'nothing to clean'}: "
                   f"{plural(len(result.kept), 'run')} in .harness/runs/, keeping {keep}")
        return
    if dry_run:
        for run_id in result.removed:
            click.echo(f"would remove .harness/runs/{run_id}/")
    click.echo(f"{'would remove' if dry_run else 'removed'} {plural(len(result.removed), 'run')}, "
               f"kept {plural(len(result.kept), 'run')}" + (f" (newest: {result.kept[-1]})" if result.kept else ""))


@click.command()
@output_option("text", "json")
@pass_ctx
def stats(ctx: Context, output: str) -> None:
    """How each agent has done per task complexity and per contract, across runs."""
    from ..runtime.observe import report

    rows = report.stats(ctx.root())
    if output == "json":
        click.echo(json_text(rows, indent=2, sort_keys=True))
        return
    if not rows:
        click.echo("no verified or rejected attempts yet")
        return
    for i, kind in enumerate(k for k in ("complexity", "contract") if any(k in r for r in rows)):
        part = [r for r in rows if kind in r]
        if part:
            click.echo(("\n" if i else "") + table(("agent", kind, "attempts", "succeeded", "rate", "cost/success"), [
                (r["agent"] or "-", r[kind] if r[kind] is not None else "-", str(r["attempts"]),
                 str(r["successes"]), f"{r['success_rate']:.0%}",
                 f"${r['cost_per_success']:.4f}" if r["cost_per_success"] is not None else "-") for r in part],
                right=("attempts", "succeeded", "rate", "cost/success")))
    cache = [(r["agent"], r["cache"]) for r in rows if "cache" in r]
    if cache:
        columns = ("agent", "input tokens", "cache read", "cache written", "cached share", "saved")
        click.echo("\nprompt cache\n" + table(columns, [
            (agent, f"{c['input_tokens']:,}", f"{c['cache_read_tokens']:,}", f"{c['cache_write_tokens']:,}",
             f"{c['share']:.0%}", f"${c['saved_usd']:.4f}" if c["saved_usd"] is not None else "-")
            for agent, c in cache], right=columns[1:]))


@click.command(name="report")
@click.option("--run", "run_id", default=None, metavar="ID", help="The run to report on (default: the last one).")
@click.option("--out", "out", default=None, metavar="FILE",
              help="Where to write it (default: .harness/runs/<run>/report.html or .md; - for stdout).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default="html", show_default=True,
              help="html: one self-contained page; md: a summary for a CI job summary or a PR comment.")
@pass_ctx
def report_cmd(ctx: Context, run_id: str | None, out: str | None, fmt: str) -> None:
    """Write a run's report: summary, plan graph, timeline, cost and tokens, each task's
    verified output and failures, alerts."""
    from ..nogc import no_cyclic_gc

    with no_cyclic_gc(freeze=True):  # the process ends after the report
        _report(ctx, run_id, out, fmt)


def _report(ctx: Context, run_id: str | None, out: str | None, fmt: str) -> None:
    from .. import runreport

    root = ctx.root()
    try:
        if out == "-":
            click.echo(runreport.render(root, run_id, fmt), nl=False)
            return
        path = runreport.write(root, run_id, Path(out) if out else None, fmt)
    except OSError as e:
        fail_usage(f"cannot write {out}: {e.strerror or e}")
    click.echo(f"report: {where_from_here(path)}")  # opens from where it was typed (-C DIR)
    if fmt == "html" and not runreport.charts_available():
        click.echo(f"note: the page has no cost and token charts; they need matplotlib: {runreport.INSTALL}", err=True)


@click.command()
@click.argument("task", required=False, shell_complete=completion.task_ids)
@output_option("text", "json", old="--json")
@click.option("--last", is_flag=True, help="Only the task's latest attempt.")
@click.option("--attempt", "number", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the task's N-th attempt (1 is its first).")
@click.option("-f", "--follow", is_flag=True,
              help="Then print new attempts and events as they are recorded, until the task ends (Ctrl-C quits); "
                   "with --run, the run's log as it grows, until the run ends.")
@click.option("--run", "run_id", default=None, metavar="ID|last",
              help="Instead of a task: the run's log (.harness/runs/ID/run.log); `harnessc runs` lists the runs.")
@pass_ctx
def log(ctx: Context, task: str | None, output: str, last: bool, number: int | None, follow: bool,
        run_id: str | None) -> None:
    """Every attempt of TASK, numbered 1, 2, 3...: prompt, raw and parsed output, errors, agent,
    tokens, cost, time. With --run ID instead: what that run printed (its run.log)."""
    from ..runtime.observe import report
    from ..runtime.store.scoreboard import lines as scoreboard_lines

    if run_id is not None:
        if task is not None or last or number is not None or output == "json":
            fail_usage("--run shows a run's log: it takes no TASK, --last, --attempt or --output json",
                       hint="`harnessc log TASK` shows a task's attempts across runs")
        _run_log(ctx.root(), run_id, follow)
        return
    if task is None:
        fail_usage("give a TASK, or --run ID for a run's log", hint="`harnessc ls` lists the tasks, "
                   "`harnessc runs` the runs")
    if last and number is not None:
        fail_usage("give --last or --attempt N, not both")
    if follow and (number is not None or output == "json"):
        fail_usage(f"--follow prints attempts as they come: it takes no {'--attempt' if number else '--output json'}")
    root = ctx.root()
    if follow:
        known_task_or_exit(root, task)
        try:
            _follow_log(root, task, last)
        except KeyboardInterrupt:
            sys.exit(Exit.OK)  # Ctrl-C is how following ends: not an interrupted command
        return
    attempts = report.log(root, task)
    if not attempts:
        known_task_or_exit(root, task)
    if number is not None and number > len(attempts):
        fail_usage(f"'{task}' has {plural(len(attempts), 'recorded attempt')}; there is no attempt {number}")
    total = len(attempts)
    if last:
        attempts = attempts[-1:]
    elif number is not None:
        attempts = [attempts[number - 1]]
    if output == "json":
        click.echo(json_text(attempts, indent=2, sort_keys=True, default=str))
        return
    if not attempts:
        click.echo(f"no attempts recorded for '{task}'")
        return
    for a in attempts:
        for line in _attempt_lines(a, total):
            echo_visible(line)  # an agent's output and errors are shown, never obeyed
    board = report.approaches(root, task) if not last and number is None else None
    if board is not None:  # best-of-N: which approach did what, and which landed
        for line in scoreboard_lines(board):
            echo_visible(line)  # an approach's why quotes agent output: shown, never obeyed


def _run_log(root: Path, run_id: str, follow: bool) -> None:
    """`log --run ID [--follow]`: the run's run.log; following, what is added to it until the
    run ends (a log deleted under the run: following goes on while the run does)."""
    from ..runtime.observe import report

    runs = report.runs(root)
    if run_id == "last" and runs:
        run_id = runs[-1]["id"]
    if run_id not in {r["id"] for r in runs}:
        fail_usage(f"no run '{run_id}' recorded", hint="`harnessc runs` lists the runs")
    path = Workspace(root).run_log(run_id)
    offset = 0
    try:
        while True:
            going = follow and report.run_going_on(root, run_id)  # before reading: no line is missed at the end
            offset = _print_from(path, offset)
            if not going:
                break
            time.sleep(FOLLOW_POLL)
    except KeyboardInterrupt:
        sys.exit(Exit.OK)  # Ctrl-C is how following ends
    if offset == 0 and not path.is_file():
        click.echo(f"no log for run {run_id} (.harness/runs/{run_id}/run.log: runs before this harnessc "
                   "wrote none, or it was removed)")


def _print_from(path: Path, offset: int) -> int:
    """Print the whole lines of `path` from byte `offset`; the offset after them."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return offset
    end = data.rfind(b"\n") + 1  # a line still being written waits for its end
    if end:
        for line in data[:end].decode("utf-8", "replace").splitlines():
            echo_visible(line)  # agents' words are in it: shown, never obeyed
    return offset + end


@click.command()
@output_option("text", "json")
@pass_ctx
def runs(ctx: Context, output: str) -> None:
    """Every recorded run, oldest first: id, start, end, state, tasks attempted, cost."""
    from ..runtime.observe import report

    rows = report.runs(ctx.root())
    if output == "json":
        click.echo(json_text(rows, indent=2, sort_keys=True))
        return
    if not rows:
        click.echo("no runs yet: `harnessc run` starts one")
        return

    def when(t):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"

    cells = [(r["id"], when(r["started_at"]), when(r["ended_at"]),
              r["status"] + (f" (pid {r['pid']})" if r["pid"] else ""), str(r["tasks"]), f"${r['cost_usd']:.4f}")
             for r in rows]
    echo_visible(table(("run", "started", "ended", "state", "tasks", "cost"), cells, right=("tasks", "cost")))


def _follow_log(root: Path, task: str, last: bool) -> None:
    """`log --follow`: the attempts so far (the last one only with --last), then each new one
    as it starts and as it ends, until the task ends."""
    from ..runtime.observe import report

    past = len(report.log(root, task))
    skip = max(past - 1, 0) if last else 0  # --last: the attempts before the latest are not shown
    said = False
    for kind, item in report.follow_log(root, task, FOLLOW_POLL):
        if kind == "after":
            lines = [f"--- {line}" for line in item]
        elif item["attempt"] <= skip:
            continue
        elif kind == "started":
            lines = [f"--- {line}" for line in item.get("events") or ()]
            lines.append(f"=== attempt {item['attempt']} · run {item['run_id']} · iteration {item['iteration']}"
                         f" · level {item['level']} · {item['agent']} · started at "
                         f"{time.strftime('%H:%M:%S', time.localtime(item['started_at']))}, running")
        else:
            lines = _attempt_lines(item, max(past, item["attempt"]), events=not item["announced"])
        for line in lines:
            echo_visible(line)  # an agent's output and errors are shown, never obeyed
        said = True
    if not said:
        click.echo(f"no attempts recorded for '{task}'")


FOLLOW_POLL = 0.5  # seconds between two looks at state.db for `log --follow`


def _attempt_cost(a: dict) -> str:
    """An attempt's cost for `log`: a call cut off by a killed run has none, only its estimate."""
    if a["cost_source"] == "unknown":
        return f"cost unknown, ~${a.get('estimated_usd') or 0:.6f} estimated"
    return f"${a['cost_usd'] or 0:.6f}"


def _attempt_lines(a: dict, total: int, events: bool = True) -> list[str]:
    """One attempt as `log` prints it; `events`: with the lines of what came before it."""
    from ..runtime.observe import report

    tokens = (a["input_tokens"] or 0) + (a["output_tokens"] or 0)
    cost = "cost unknown" if a["cost_source"] == "unknown" else f"${a['cost_usd'] or 0:.4f}"
    lines = [f"=== attempt {a['attempt']} of {total} · run {a['run_id']} · iteration {a['iteration']}"
             f" · level {a['level']} · {a['agent']} · {a['status']} · {tokens} tokens"
             f" · {cost} · {a['latency'] or 0:.2f}s",
             f"ledger: {report.usage_text(a)}; {_attempt_cost(a)} ({report.cost_source_text(a['cost_source'])})"]
    if events:
        lines += [f"--- {line}" for line in a.get("events") or ()]
    lines += ["--- prompt", a["prompt"] or "", "--- raw output",
              a["raw_output"] if a["raw_output"] is not None else "(none)"]
    if a["parsed_output"] is not None:
        lines += ["--- parsed output", jsonlib.dumps(a["parsed_output"], indent=2, sort_keys=True)]
    if a["errors"]:
        lines.append("--- errors")
        lines += [f"- {e}" for e in a["errors"]]
    lines += [f"--- denied: {d.get('tool')} {d.get('target')}".rstrip()  # tool calls its permissions refused
              for d in a.get("denials") or ()]
    lines += [f"--- check {accept_name(c)}: exit {c['returncode']}"
              + (" (timed out)" if c.get("timed_out") else "") for c in a["checks"] or []]
    if a.get("progress"):
        lines.append(_progress_line(a["progress"]))
    lines += [f"--- {line}" for line in a.get("after") or ()]
    return lines


@click.command()
@click.argument("task")
@output_option("text", "json")
@pass_ctx
def show(ctx: Context, task: str, output: str) -> None:
    """TASK's result: its verified output (JSON, or the answer's text) and what verified it;
    a degraded task's fallback output and the fields filled from the contract; what it told
    run memory and the memory its last attempt was given; a best-of-N task's scoreboard."""
    from ..diagnostics import did_you_mean
    from ..runtime.observe import report
    from ..runtime.store.outputs import text

    try:
        rec = report.show(ctx.root(), task)
    except report.UnknownTask as e:
        fail_usage(f"no task '{task}' in the plan", did_you_mean(task, e.known) or "`harnessc ls` lists the tasks")
    from .memory import entries_of_task, memory_lines

    remembered = entries_of_task(ctx.root(), task)  # what it told run memory (runtime/memory/)
    if output == "json":
        click.echo(json_text({**rec, **({"memory": remembered} if remembered else {})}, indent=2, sort_keys=True, ensure_ascii=False,
                             default=str))
        return
    click.echo(visible(text(rec)))  # the agent's words: shown, never obeyed
    for line in memory_lines(remembered, rec.get("memory_given"), task):
        echo_visible(line)
    from ..proposals import lineage

    for line in lineage(ctx.root(), task):  # a grown plan: who proposed it, what it added
        echo_visible(line)
    if rec.get("context_auto") is not None:
        from .spec import auto_context_lines

        for line in auto_context_lines(task, rec["context_auto"]):
            echo_visible(line)
    if rec.get("approaches"):
        from ..runtime.store.scoreboard import lines as scoreboard_lines

        for line in scoreboard_lines(rec["approaches"]):
            echo_visible(line)  # an approach's why quotes agent output: shown, never obeyed
