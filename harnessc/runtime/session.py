"""One `harnessc run`: take the lock, open and recover the state, build the run's
collaborators once from the plan and the frozen RunOptions (`setup`), run, checkpoint, report."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .. import nogc, proposals, providers
from ..states import LANDED
from ..workspace import Workspace, WorkspaceError, storage_reason
from . import plan as planmod
from . import preflight
from .agents.cassettes import Cassettes
from .baseline import Baselines
from .children import procs, reaper
from .context import CallPolicy, Setup
from .executor.rayconfig import resolve_executor
from .loop import loopflags
from .loop.attribution import Attribution
from .memory.run import RunMemory
from .observe import telemetry
from .observe.alerts import Alerts
from .observe.notify import Notifier
from .routing.budget import Budget
from .routing.health import Health
from .routing.history import History
from .routing.router import Router
from .routing.throttle import Throttle
from .scheduler import Runner, RunOptions, RunResult, new_run_id, write_results
from .steering import Steering
from .store.lock import RunLock
from .store.state import StateError, StateStore
from .termination import RunLimits
from .work import selected
from .worktree.gitops import GitCommits
from .worktree.isolation import WORKTREE, Isolation

if TYPE_CHECKING:  # an annotation only (plan.json's typed contract)
    from ..planfile import Plan

UNRESOLVED: Any = object()  # execute's executor_settings when the caller did not resolve them


def setup(root: Path, plan: Plan, store: StateStore, opts: RunOptions,
          listeners: list[Callable[[dict], None]] | None = None,
          executor_settings: Any = UNRESOLVED, router: Router | None = None, targets: set[str] | None = None) -> Setup:
    """The run's collaborators, each built once from the plan and `opts` (the --preset and
    limit flags are applied to the plan first). `executor_settings`, `router` (without its
    history) and `targets` (work.selected): worked out already by the caller (the CLI,
    which refuses bad flags before anything starts)."""
    flags = loopflags.resolve(opts.preset, opts.max_time, opts.max_iterations, opts.stuck_after,
                              opts.progress_threshold)
    loopflags.apply(plan, opts.preset, flags)
    nodes = {n.id: n for n in plan.nodes}
    jobs = max(1, opts.jobs or int(plan.concurrency or 4))
    caps = plan.budget or {}
    limit = opts.max_cost if opts.max_cost is not None else caps.get("max_cost_usd")
    max_tokens = caps.get("max_tokens")
    budget = Budget(store, limit, int(max_tokens) if max_tokens is not None else None)
    if router is None:
        router = Router(plan.agents, force=opts.agent, only=opts.agents)
    router.history = History(store, plan)
    # a task's approaches run at once (approaches.py): an agent may have as many calls in
    # flight as the widest task has approaches, unless its own limits.concurrency says fewer
    widest = max((n.approaches.n for n in plan.nodes if n.approaches is not None and not n.done), default=1)
    policy = CallPolicy(budget, Health(store, plan.agents), router, Throttle(plan.agents, max(jobs, widest)))
    if executor_settings is UNRESOLVED:
        executor_settings = resolve_executor(plan, opts.executor, opts.ray_address)
    # executor ray: every attempt runs on a worker, each task isolated whatever isolation: says;
    # isolated tasks work in worktrees and land as commits (worktree/), the others share the tree
    isolation = Isolation(root, plan.nodes, store, WORKTREE if executor_settings is not None else opts.isolation,
                          hooks=bool(plan.git_hooks), worktrees=plan.worktrees, keep_failed=opts.keep_worktrees)
    baselines = Baselines(store)  # min_passed: base - each base measured once (baseline.py)
    shared = [n for n in plan.nodes if not isolation.is_isolated(n)]
    git = GitCommits(root, store, shared, hooks=bool(plan.git_hooks))
    workspace = Workspace(root)
    # which changed files are whose, when tasks run at the same time (progress, commits)
    attribution = Attribution(root, workspace.loop / "run.index", shared, jobs, make_dir=workspace.make_dir,
                              event=store.event)
    memory = RunMemory.of(root, plan, store)  # .harness/memory/: what tasks learn (runtime/memory/)
    cassettes = Cassettes(workspace, opts.cassettes)
    if listeners:
        store.listeners = listeners
    # The operator's side of a run: the inbox and overrides, alerts, notifications.
    loop_cfg = planmod.loop_settings(plan)
    wake = asyncio.Event()
    steering = Steering(workspace, store, set(nodes), budget, set(plan.agents), wake.set,
                        instructions=loop_cfg.environment.inbox, env_overrides=loop_cfg.environment.env_overrides)
    alerts = Alerts(workspace, store, loop_cfg, budget,
                    lambda tid: nodes[tid].limits.max_iterations if tid in nodes else 0,
                    lambda why: steering.pause("alert", why))
    notifier = Notifier(plan.notify, root, store, alerts.alert, plan.agents)  # told of the alerts' (notify.py)
    store.listeners = [*store.listeners, alerts.on_event, notifier.on_event]
    return Setup(
        jobs=jobs, fail_fast=opts.fail_fast, auto_approve=opts.auto_approve,
        selection=dict(targets=selected(plan, opts.select, opts.exclude, opts.only) if targets is None else targets,
                       rerun=opts.rerun, only=opts.only),
        limits=RunLimits.of(opts.max_time, flags.get("max_time"), loop_cfg), policy=policy,
        executor_settings=executor_settings, workspace=workspace, isolation=isolation, baselines=baselines,
        git=git, attribution=attribution, memory=memory, cassettes=cassettes, steering=steering, alerts=alerts,
        notifier=notifier, wake=wake, run_flags=functools.partial(loopflags.apply_to, preset=opts.preset, flags=flags))


def new_runner(root: Path, plan: Plan, store: StateStore, opts: RunOptions,
               listeners: list[Callable[[dict], None]] | None = None, **settled: Any) -> Runner:
    """A Runner of the plan with its collaborators (`setup`; `settled`: its keywords)."""
    return Runner(root, plan, store, setup(root, plan, store, opts, listeners, **settled))


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
    states = store.states(list(todo))
    landed = [t for t in todo if states.get(t) in LANDED and t not in runner.growth.handled]
    lines = runner.growth.closing_lines()  # plan.grow: auto and split: true took theirs as they landed
    if not landed:
        return lines
    try:
        return lines + proposals.collect(runner.root, runner.plan.growth, store, landed, store.run_id)
    except (OSError, WorkspaceError) as e:  # a full disk, a link: the run's work stands
        return [f"proposals: not filed ({e})"]


def execute(root: Path, plan: Plan, opts: RunOptions,
            listeners: list[Callable[[dict], None]] | None = None,
            on_start: Callable[[Runner, dict], None] | None = None, **settled: Any) -> RunResult:
    """Run the plan to the end (or a stop). Raises lock.Locked, state.StateError,
    workspace.WorkspaceError, preflight.Refused (nothing was started). `settled`: what the
    caller worked out already (setup's executor_settings, router, targets)."""
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
        runner = new_runner(root, plan, store, opts, listeners, **settled)
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
