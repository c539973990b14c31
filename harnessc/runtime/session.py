"""One `harnessc run`: take the lock, open and recover the state, run, checkpoint, report."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .. import nogc, proposals, providers
from ..states import LANDED
from ..workspace import Workspace, WorkspaceError, storage_reason
from . import preflight
from .children import procs, reaper
from .observe import telemetry
from .scheduler import Runner, RunOptions, RunResult, new_run_id, write_results
from .store.lock import RunLock
from .store.state import StateError, StateStore

if TYPE_CHECKING:  # an annotation only (plan.json's typed contract)
    from ..planfile import Plan


def keep_max_cost(store: StateStore, opts: RunOptions, recovered: dict) -> RunOptions:
    """--max-cost is kept across resumes: an explicit one is remembered in state.db, and a run
    without one uses the last one (until `reset --all`). Sets recovered["max_cost_kept"] to
    the kept limit when one was applied; a kept value that is no amount of USD (an older
    harnessc took `--max-cost nan`) is forgotten and recovered["max_cost_ignored"] says why:
    the plan's budget applies."""
    recovered["max_cost_kept"] = None
    if opts.max_cost is not None:
        store.remember_max_cost(opts.max_cost)
        return opts
    try:
        kept = store.remembered_max_cost()
    except ValueError as e:
        store.forget_max_cost()
        recovered["max_cost_ignored"] = str(e)
        return opts
    if kept is None:
        return opts
    recovered["max_cost_kept"] = kept
    return dataclasses.replace(opts, max_cost=kept)


def check_agents(runner: Runner, workspace: Workspace, opts: RunOptions) -> None:
    """The pre-flight of the tasks this run would start: raises preflight.Refused when one of
    them has no usable agent, else has the router pass the unusable ones over."""
    usability = preflight.Usability(runner.plan.agents, workspace, replaying=opts.cassettes == "replay",
                                    remote_programs=runner.executor_settings is not None)
    checked = preflight.check_run(runner.plan, runner.router, runner.planned.startable, usability)
    if checked.refused:
        raise preflight.Refused(checked.problem_lines())
    runner.router.unusable = usability.unusable
    runner.preflight = checked


def file_proposals(runner: Runner, store: StateStore) -> list[str]:
    """The tasks this run's succeeded tasks proposed, checked and filed for review
    (proposals.py); the run's closing lines about them. Never changes the run's outcome."""
    todo = [*(runner.planned.todo if runner.planned else []), *runner.growth.added]
    rows = store.tasks(list(todo))
    landed = [t for t in todo if rows.get(t, {}).get("state") in LANDED and t not in runner.growth.handled]
    lines = runner.growth.closing_lines()  # plan.grow: auto and split: true took theirs as they landed
    if not landed:
        return lines
    try:
        return lines + proposals.collect(runner.root, runner.plan.growth, store, landed, store.run_id)
    except (OSError, WorkspaceError) as e:  # a full disk, a link: the run's work stands
        return [f"proposals: not filed ({e})"]


def execute(root: Path, plan: Plan, opts: RunOptions,
            listeners: list[Callable[[dict], None]] | None = None,
            on_start: Callable[[Runner, dict], None] | None = None) -> RunResult:
    """Run the plan to the end (or a stop). Raises lock.Locked, state.StateError,
    workspace.WorkspaceError, preflight.Refused (nothing was started)."""
    workspace = Workspace(root)
    lock = RunLock(workspace)
    lock.acquire()
    store = tracing = runner = None
    try:
        store = StateStore(workspace, secret_names=providers.key_envs(plan.agents))
        recovered = store.recover()
        ended = reaper.end_leftovers(recovered["leftovers"])  # before any agent starts again
        workspace.unlink(workspace.stop)  # a stop meant for an earlier run
        opts = keep_max_cost(store, opts, recovered)
        runner = Runner(root, plan, store, opts, listeners)
        idle = runner.idle_result()
        if idle is not None:
            return idle  # nothing to run: no run recorded, no run directory
        check_agents(runner, workspace, opts)
        runner.isolation.check()  # raises IsolationError: nothing was started
        runner.start_executor()  # executor ray: raises ExecutorError, nothing was started
        tracing = telemetry.tracing(runner.plan, store)  # None when off: opentelemetry is never imported
        if tracing:
            store.listeners.append(tracing.on_event)
        options = {k: (sorted(v) if isinstance(v, set) else v)
                   for k, v in dataclasses.asdict(opts).items()}
        store.start_run(new_run_id(), options)
        if recovered["interrupted_attempts"]:
            store.event("recovered", attempts=recovered["interrupted_attempts"],
                        tasks=recovered["interrupted_tasks"])
        if ended:
            store.event("leftovers_ended", pids=ended)
        if runner.preflight.passed_over:
            store.event("agents_passed_over", message=runner.preflight.warning(),
                        agents={a: sorted(set(whys.values())) for a, whys in runner.preflight.passed_over.items()})
        if on_start:
            on_start(runner, recovered)
        with reaper.adopting(store.run_id), procs.child_watching(), nogc.for_a_run():
            result = asyncio.run(runner.run())
        result.notes += runner.memory.closing() if runner.memory is not None else []
        result.notes += file_proposals(runner, store)
        store.end_run(result.status, result.exit_code, result.message)
        write_results(workspace, result, store.last_run())
        return result
    except (sqlite3.Error, OSError) as e:  # a full disk, a read-only project: one line, not "internal error"
        path = Path(e.filename) if isinstance(e, OSError) and e.filename else workspace.state_db
        raise StateError(
            f"{workspace.rel(path)} failed during the run ({storage_reason(path.parent, e)}); the run"
            " stopped and what was committed is kept: fix the cause, then `harnessc run` resumes") from None
    finally:
        if runner is not None:
            try:  # run_end (and what is pending) is delivered before we exit, within notify.timeout
                runner.notifier.close()
            except KeyboardInterrupt:  # Ctrl-C while it waits: stop waiting, end as the run ended
                pass
            except (sqlite3.Error, OSError):  # its failure alerts could not be recorded: not the run's
                pass
            runner.close_executor()
        if tracing:
            tracing.close()  # the run's spans, sent within telemetry.FLUSH_TIMEOUT (never raises)
        try:
            workspace.unlink(workspace.stop)
        finally:
            if store is not None:
                store.close()
            lock.release()
