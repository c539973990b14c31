"""The scheduler: runs a compiled plan's tasks on asyncio, one task = iterations.

A task is ready when its dependencies succeeded, degraded or were done; ready tasks start
by priority, then critical path first (the longest estimated chain of work still behind
them), then roadmap order, at most `jobs` at a time. A failed task skips its dependents
and independent work goes on (unless fail_fast). Those decisions are schedule.Schedule's
(a plain state machine); the Runner drives it on asyncio, owns the stop flags and limits
and what tasks share - built once by session.setup (context.Setup). What one task does - its
iterations - is iteration.TaskRun: it returns the task's Ending and the Runner writes it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import outcome as outcomes
from ..outcome import RunOutcome
from ..planfile import Plan, PlanNode
from ..providers import AgentConfig
from ..states import LANDED, TaskState
from ..textsafe import title_flaw
from ..vocab import priority_rank
from ..workspace import Workspace, WorkspaceError
from . import clock
from . import plan as planmod
from .agents.base import AgentError
from .approaches import Approaches
from .approval import approval_recheck
from .children import reaper
from .context import RunControl, Setup
from .explore import explore_from
from .growth import PlanGrowth
from .iteration import TaskRun, conflict_text
from .observe.cachesaving import cache_figures
from .observe.summaries import Summaries
from .preflight import RunCheck, config_of
from .routing.callbounds import CallBounds
from .routing.tasklimits import CLOCK_EVERY
from .schedule import Graph, Schedule
from .store import outputs
from .store.attempts import Ending, TaskEnd
from .store.state import REVIEW_KEY, StateError, StateStore
from .store.tasks import task_summary
from .work import Work, plan_work
from .worktree.isolation import Landed

STOP_POLL = 0.2  # seconds between looks at .harness/stop


@dataclass(frozen=True)
class RunOptions:
    """What `harnessc run` was asked, fixed once session.py settled it (keep_max_cost); the
    Runner takes what it needs from it when it is built and does not keep it."""

    jobs: int | None = None
    fail_fast: bool = False
    rerun: str | None = None  # stale | failed | all
    max_cost: float | None = None
    select: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    only: set[str] | None = None  # explicit task ids (harnessc retry)
    agent: str | None = None  # run --agent: this agent serves every task
    agents: list[str] | None = None  # run --agents: only these agents serve
    preset: str | None = None  # run --autonomous | --conservative (runtime/loop/loopflags.py)
    max_time: float | None = None  # run --max-time: seconds this run may take, then it stops
    max_iterations: int | str | None = None  # run --max-iterations N | unlimited, for every task
    stuck_after: int | None = None  # run --stuck-after N, for every task
    progress_threshold: float | None = None  # run --progress-threshold X (loop.progress.threshold)
    cassettes: str | None = None  # record | replay: every agent call (runtime/agents/cassettes.py)
    isolation: str | None = None  # run --isolation worktree|none: every task's, over the plan's
    keep_worktrees: bool = False  # run --keep-worktrees: a task that did not succeed keeps its worktree
    executor: str | None = None  # run --executor local|ray: over harness.yaml's (executor/rayconfig.py)
    ray_address: str | None = None  # run --ray-address: implies ray, over harness.yaml's executor.address
    auto_approve: bool = False  # run --auto-approve: `review: true` tasks land as any other


@dataclass
class RunResult:
    run_id: str
    outcome: RunOutcome  # status, exit code and message (harnessc/outcome.py decides them)
    tasks: list[dict]
    stale: list[str]
    elapsed: float
    cost_usd: float = 0.0  # spent or reserved by this run
    total_cost_usd: float = 0.0  # the project's ledger, across runs until `reset --all`
    budget_stop: outcomes.BudgetStop | None = None  # the run budget that stopped the run
    cache: dict | None = None  # this run's prompt-cache figures (cachesaving.cache_figures)
    notes: list[str] = field(default_factory=list)  # isolation: where the results are, kept refs
    outputs: int = 0  # results written to .harness/outputs/ by this run
    simulated: bool = False  # every agent this run called was a simulate agent: its costs are made up

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def exit_code(self) -> int:
        return int(self.outcome.exit_code)

    @property
    def message(self) -> str:
        return self.outcome.message


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(clock.time())) + f"-{os.getpid() % 100000:05d}"


class Runner:
    """Runs the task graph with the collaborators session.setup built (context.Setup), and is
    the TaskContext its tasks call back into."""

    def __init__(self, root: Path, plan: Plan, store: StateStore, setup: Setup):
        self.root, self.plan, self.store = root, plan, store
        self.fail_fast, self.auto_approve = setup.fail_fast, setup.auto_approve
        self.selection = setup.selection  # plan_work's
        self.started = clock.monotonic()
        self.nodes = {n.id: n for n in plan.nodes}
        self.growth = PlanGrowth(self)  # plan.grow: auto, split: true (growth/); before the graph
        self.graph = Graph.of(plan.nodes, priority_rank)  # what orders ready tasks (schedule.py)
        self.jobs = setup.jobs
        self.policy = setup.policy  # what a task's calls share (context.py)
        self.budget, self.health = setup.policy.budget, setup.policy.health
        self.router, self.throttle = setup.policy.router, setup.policy.throttle
        self.executor_settings = setup.executor_settings
        self.executor: Any = None  # started by start_executor (executor/ray.py)
        self.workspace, self.isolation, self.baselines = setup.workspace, setup.isolation, setup.baselines
        self.git, self.attribution, self.memory = setup.git, setup.attribution, setup.memory
        self.cassettes, self.limits = setup.cassettes, setup.limits
        self.run_flags = setup.run_flags  # --max-iterations, --autonomous...: tasks added as it runs get them too
        self.steering, self.alerts, self.notifier = setup.steering, setup.alerts, setup.notifier
        self.deprecations_said: set[str] = set()
        self.agents: dict[str, Any] = {}
        self.outputs_written = 0  # results this run wrote to .harness/outputs/
        self.results = outputs.Writer(self.workspace, store.redact)
        self.writing: dict[asyncio.Future, str] = {}  # results being written -> their task (outputs.Writer.write_soon)
        self.written: list[asyncio.Future] = []  # writes ended, not yet counted (_count_outputs)
        self.stop_mode: str | None = None  # None | stop | abort
        self.calls = CallBounds()  # every agent call's deadline; a stop's grace cuts them
        self.halt: tuple[str, str] | None = None  # (outcome.BUDGET|FAIL_FAST, why): ends the run early
        self.wake = setup.wake
        self._stop_event = asyncio.Event()  # wakes retry delays early
        self.running: dict[str, asyncio.Task] = {}
        self.task_runs: dict[str, TaskRun] = {}  # the running tasks' iterations, for their clocks
        self._clocked = 0.0  # when the running tasks' times were last saved
        self.live: dict[str, dict] = {}  # task id -> {"iteration", "agent"} for displays
        self.show_lines = False  # set by a display that shows each call's last line: live[task]["line"]
        self.finished: list[str] = []  # task ids whose asyncio task ended, not yet processed
        self._system: str | None = None  # the system prompt: one per plan, rendered once
        self.targets: set[str] = set()
        self.stale: list[str] = []
        self.planned: Work | None = None  # what idle_result found to do (the pre-flight checks it)
        self.rows_made = False  # every task of the plan has its row in state.db (idle_result made them)
        self.preflight: RunCheck | None = None  # what the pre-flight found (session.py)
        self.notes: list[str] = []  # the isolation's closing lines
        self.summaries = Summaries(store, planmod.loop_settings(plan).summary_every, lambda: self.targets)
        store.listeners = [*store.listeners, self._count_iteration]
        # what a task's iterations get of the run, besides the store and the checkouts (context.py)
        self.control = RunControl(self.halting, self.halt_run, self.sleep, self.steering)

    def start_executor(self) -> None:
        """Connect to the run's Ray cluster (or start a local one) before anything is recorded:
        raises executor.ExecutorError (the run refuses to start). Needs isolation.check()."""
        if self.executor_settings is None or not self.isolation.wanted:
            return
        from .executor.ray import RayExecutor, forwarded_names  # imports Ray: only for executor ray

        repo = self.isolation.repo
        self.executor = RayExecutor(self.executor_settings, repo.toplevel, repo.prefix,
                                    forwarded_names(self.plan.agents), repo.git_dir)
        self.executor.start()

    def close_executor(self) -> None:
        if self.executor is not None:
            self.executor.close()

    # ------------------------------------------------------------------ control

    def request_stop(self, mode: str, via: str | None = None) -> None:
        """stop: finish in-flight work then exit; abort: cancel now. abort wins.
        `via` says where it came from (signal, SIGTERM, file), for the displays' wording."""
        if mode == "abort":
            if self.stop_mode != "abort":
                self.stop_mode = "abort"
                self.store.event("stop_requested", mode="abort", via=via)
                for t in self.running.values():
                    t.cancel()
                if self.memory is not None:
                    self.memory.cancel()  # a summary refresh in flight
        elif self.stop_mode is None:
            self.stop_mode = "stop"
            self.store.event("stop_requested", mode="stop", via=via)
            self.calls.stop()  # a call in flight gets the stop's grace, no more
        self._stop_event.set()
        self.wake.set()

    def _on_sigint(self) -> None:
        self.request_stop("abort" if self.stop_mode else "stop", via="signal")

    async def _watch_stop_file(self) -> None:
        while True:
            try:
                word = self.workspace.read_bytes(self.workspace.stop).decode("utf-8", "replace").strip().lower()
            except (OSError, WorkspaceError):  # none yet; a link is never read
                word = None
            if word:
                self.request_stop("abort" if word.startswith("abort") else "stop", via="file")
            self._check_state_file()
            self._check_limits()
            self._clock_tasks()
            self.steering.poll()
            self.summaries.tick()
            self.store.flush_mirror()  # events.jsonl lags the db by at most this poll
            await clock.sleep(STOP_POLL)

    def _check_limits(self) -> None:
        """The run's own limits (termination.py): past one, no new call starts and the run
        ends as a stop (exit 3)."""
        why = self.limits.reached()
        if why and self.halt_run(outcomes.STOP, why):
            self.request_stop("stop", via="max-time" if why.startswith("--max-time") else "limit")

    def _clock_tasks(self) -> None:
        """Save the running tasks' times (one commit), every CLOCK_EVERY seconds: what a task
        has left of its max_time survives a kill (tasklimits.py)."""
        now = clock.monotonic()
        if now - self._clocked < CLOCK_EVERY or not self.task_runs:
            return
        self._clocked = now
        try:
            with self.store.tx():
                for run in list(self.task_runs.values()):
                    run.clock()
        except (sqlite3.Error, OSError):  # a full disk: the run's own writes say so; the clock tries again
            pass

    def _count_iteration(self, ev: dict) -> None:
        """A listener: an iteration past the run's iteration limit stops the run at once."""
        self.limits.on_event(ev)
        if ev["kind"] == "attempt_started" and self.limits.max_iterations is not None:
            self._check_limits()

    def _check_state_file(self) -> None:
        """A state.db removed or replaced under the run ends it: nothing it saves would be read."""
        try:
            self.store.check_file()
        except StateError as e:
            if self.halt is None or self.halt[0] != outcomes.STATE_LOST:
                self.halt = (outcomes.STATE_LOST, str(e))
                self.request_stop("abort")

    async def sleep(self, seconds: float, task_id: str | None = None) -> None:
        """Sleep, but wake early when a stop is requested (or an urgent instruction for the task comes)."""
        await self.steering.sleep(seconds, task_id, self._stop_event)

    # ------------------------------------------------------------------ selection

    def idle_result(self) -> RunResult | None:
        """The result of a run with nothing to do (every selected task complete, or waiting
        for `retry`), decided before a run is recorded; None when there is work."""
        self.store.ensure_tasks(self.nodes, {i for i, n in self.nodes.items() if n.done})
        self.rows_made = True  # (_prepare: no task joins the plan before the run starts)
        rows = self.store.tasks()
        work = self.planned = plan_work(self.plan, rows, **self.selection)
        if not work.nothing_to_run(rows) or self._decisions():  # an approval lands in a run
            return None
        try:
            self._restore_outputs(rows, (), outputs.present(self.workspace))
        except WorkspaceError as e:
            self.store.event("output_not_written", reason=f"results not looked for: {e}")
        finally:
            self.results.close()
        self.targets, self.stale = work.targets, work.stale
        return self._result(0.0, (outcomes.NOTHING, None))

    def _prepare(self) -> Work:
        """Decide which tasks this run will execute (work.py) and set them to pending."""
        done = {i for i, n in self.nodes.items() if n.done}
        # a checked task is done, also when a landing the last run left completed it since
        self.store.ensure_tasks(self.nodes, done, made=self.rows_made)
        rows = self.store.tasks()
        work = plan_work(self.plan, rows, **self.selection)
        self.targets, self.stale = work.targets, work.stale
        # a task run again from its end (--rerun, or every task with --rerun all) starts its
        # loop memory afresh: its old iterations are not this round's ("This is iteration 4"
        # on a round's first call); retry and resume keep it
        fresh = [tid for tid in work.todo if self.selection["rerun"] == "all" or rows[tid]["state"] in LANDED]
        with self.store.tx():
            for tid in work.todo:
                if rows[tid]["state"] != TaskState.PENDING:
                    self.store.set_state(tid, TaskState.PENDING)
            self.store.forget_loop_state(fresh)
        try:
            files = outputs.present(self.workspace, sweep=True)
            outputs.forget(self.workspace, work.todo, files)  # results of an earlier run: they run again
        except WorkspaceError as e:
            self.store.event("output_not_written", reason=f"earlier results of this run's tasks not removed: {e}")
        else:
            self._restore_outputs(rows, work.todo, files)
        self.store.event("run_planned", tasks=len(work.todo), stale=self.stale)
        return work

    def _restore_outputs(self, rows: dict[str, dict], todo: set[str] | list[str], files: set[str]) -> None:
        """Write the result files state.db holds and .harness/outputs/ lacks (a run killed
        after a task landed, before its file was written), except of the tasks about to run."""
        todo = set(todo)  # (a list: a look-up per task, and a 1,000-task run's start made a million)
        landed = {tid: row for tid, row in rows.items() if tid in self.nodes and tid not in todo}
        for tid in outputs.missing(self.workspace, landed, files):
            self._write_output(tid)

    def _output_of(self, tid: str) -> dict:
        """The task's result (outputs.result), from state.db."""
        node = self.nodes[tid]
        row, final = self.store.task_result(tid)
        return outputs.result(row, node, self.plan.contract_of(node), final)

    def _write_output(self, tid: str) -> bool:
        """Write the task's result file now; False when it could not be (the run's warning)."""
        try:
            self.results.write(self._output_of(tid))
            return True
        except WorkspaceError as e:
            self._output_not_written(tid, e)
            return False

    def _output_not_written(self, tid: str, e: WorkspaceError) -> None:
        self.store.event("output_not_written", tid,
                         reason=f"{e} (state.db keeps the result: `harnessc show {tid}` prints it)")

    def _land_output(self, tid: str, now: bool) -> None:
        """Write the result of a task that just succeeded or degraded (outputs.py); a failed
        write is a warning (state.db keeps the result). `now`: before returning, for a task
        whose dependents start next (their agents or accept commands may read the file);
        else in the writer's thread, which the loop does not wait for."""
        if now:
            self.outputs_written += self._write_output(tid)
            return
        written = self.results.write_soon(self._output_of(tid))
        self.writing[written] = tid
        written.add_done_callback(self._output_written)

    def _output_written(self, written: asyncio.Future) -> None:
        """A write ended: the scheduler counts it (or says it failed) when a task next ends, or
        at the run's end, where a state.db failure ends the run as any other does (not in
        this callback)."""
        if not written.cancelled():
            written.exception()  # retrieved: a run that ends on an error before counting it is not told
        self.written.append(written)

    def _count_outputs(self) -> None:
        """Count the results written since the last look, and warn of those that could not be;
        a write that failed on something else than a file's trouble (a bug) is raised."""
        done, self.written = self.written, []
        for written in done:
            tid = self.writing.pop(written)
            if written.cancelled():  # (never: the loop ended under it)
                continue
            e = written.exception()
            if e is None:
                self.outputs_written += 1
            elif isinstance(e, WorkspaceError):
                self._output_not_written(tid, e)
            else:
                raise e

    async def _outputs_written(self) -> None:
        """Wait for the results still being written, and count them (the run's summary says how many)."""
        if self.writing:
            await asyncio.wait(list(self.writing))  # returns after their own done callbacks ran
        self._count_outputs()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> RunResult:
        started = self.started = self.limits.started = clock.monotonic()
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGTERM, lambda: self.request_stop("abort", via="SIGTERM"))
        except (NotImplementedError, RuntimeError):
            pass  # not the main thread (tests): the stop file still works
        self.steering.poll()  # a pause or prioritize already in the inbox applies from the start
        watcher = asyncio.create_task(self._watch_stop_file())
        try:
            self.isolation.start()  # first: a landing a killed run committed completes its task
            await self._take_reviews()  # then what was approved or rejected while no run went on
            work = self._prepare()
            self._step_down_if_short(work)
            self.git.start()
            await self._schedule(work)
            if self.memory is not None:  # a summary refresh in flight ends (the watcher still hears an abort)
                await self.memory.settle()
            self._check_state_file()  # a removal since the watcher's last look
        finally:
            watcher.cancel()
            if self.memory is not None:  # an error or an abort: a refresh still in flight is cancelled
                await self.memory.settle(abort=True)
            self.store.flush()  # a record still waiting to ride along with a commit (state.defer)
            await self._outputs_written()
            await self.notifier.settle()  # the one in flight ends (within notify.timeout); close() sends the rest
            self.results.close()
            self.attribution.close()
            self.notes = self.isolation.end()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        return self._result(clock.monotonic() - started)

    def _step_down_if_short(self, work: Work) -> None:
        """When the budget left cannot pay for this run's tasks at their estimates, the router
        asks one tier less of tasks that are not critical or high priority. Said once."""
        limit = self.budget.run_limit
        costs = [self.nodes[t].estimate.cost_usd for t in work.startable if self.nodes[t].estimate]
        need = sum(c for c in costs if c is not None)
        left = (limit - self.store.spent()) if limit is not None else None
        if left is not None and need > left:
            self.router.step_down = True
            self.store.event("budget_step_down", message=(
                f"the budget left (${max(left, 0):.4f}) is short of this run's estimate (${need:.4f}): "
                "tasks that are not critical or high priority step down a tier"))

    async def _schedule(self, work: Work) -> None:
        """Drive the run's Schedule (schedule.py): start what it says, tell it what ended.
        The tasks are supervised by a TaskGroup: a task's error (a state.db failure, a bug)
        cancels the others and ends the run with that error."""
        sched = Schedule(self.graph, self.store.states(), work.todo,
                         work.blocked, self.jobs, fail_fast=self.fail_fast, prioritized=self.steering.priority)
        # A dependency that cannot complete in this run skips its dependents before anything starts.
        self._skip(sched.opening)
        try:
            async with asyncio.TaskGroup() as tasks:
                await self._drive(sched, tasks)
        except BaseExceptionGroup as group:  # raised as it was before the group: session.py says what failed
            raise group.exceptions[0] from None
        self.running.clear()  # abort: the cancelled tasks checkpointed as the group ended

    async def _drive(self, sched: Schedule, tasks: asyncio.TaskGroup) -> None:
        # Event-driven: a task's done callback queues its id and sets `wake`; each wake-up
        # handles exactly the tasks that ended (no polling, no scan of the running set).
        def ended(t: asyncio.Task) -> None:
            self.finished.append(t.get_name())
            self.wake.set()

        while sched.busy and self.stop_mode != "abort":
            if self.steering.take_reviews():  # `harnessc approve` / `reject`: this run lands, never the command
                for tid, outcome in (await self._take_reviews()).items():
                    self._skip(sched.reviewed(tid, outcome))
            if self.steering.take_reorder():  # `prioritize` moved a task ahead
                sched.prioritize(self.steering.priority)
            if self.halting():
                sched.halt()
            sched.pause(self.steering.paused)
            for tid in sched.start():
                t = self.running[tid] = tasks.create_task(self._run_task(tid), name=tid)
                t.add_done_callback(ended)
            if sched.over:
                break
            if not self.finished:
                self.wake.clear()
                await self.wake.wait()
            self._count_outputs()
            batch, self.finished = self.finished, []
            for tid in batch:
                t = self.running.pop(tid, None)
                if t is None:
                    continue
                self.live.pop(tid, None)
                outcome = TaskState.INTERRUPTED if t.cancelled() else t.result()
                if (split := self.growth.split_ended(sched, tid)) is not None:  # it waits for its subtasks now
                    self._skip(split)
                    continue
                end = sched.ended(tid, outcome)
                if outcome in LANDED:
                    self._land_output(tid, now=end.write_now)
                    self._skip(await self.growth.landed(sched, tid))  # plan.grow: auto: what it proposed joins the run
                self._skip(end.skipped)
                if self.memory is not None:  # after the landing: a summary refresh due runs aside
                    self.memory.task_ended(self, self.nodes[tid])
                if end.halt:
                    self.halt_run(outcomes.FAIL_FAST, end.halt)

    def _skip(self, skipped: list[tuple[str, str]]) -> None:
        for tid, why in skipped:
            self.store.set_state(tid, *self.growth.skipped(tid, why))

    # ------------------------------------------------------------------ one task
    # What a task's iterations (iteration.TaskRun) need from the run: the TaskContext.

    async def _run_task(self, tid: str) -> str:
        try:
            return await self._run_node(self.nodes[tid])
        except planmod.TemplateProblem as e:  # a retry's refine.md.j2 failed to render
            return self._end(tid, Ending(TaskEnd(TaskState.FAILED, error=f"could not render the retry prompt: "
                                                 f"{e.span.path}:{e.span.line}: {e.code}: {e.message}")))

    def _end(self, tid: str, ending: Ending) -> str:
        self.store.end_task(tid, ending)
        return ending.state

    async def _run_node(self, node: PlanNode) -> str:
        """Run the task (its iterations, or its approaches) to its ending, write that - the
        task's final state and its attempt's last record, one commit - then let it wind up."""
        tid = node.id
        flaw = title_flaw(node.title)
        if flaw is not None:  # the lint refuses it (HC108): a plan.json edited by hand
            return self._end(tid, Ending(TaskEnd(TaskState.FAILED, error=(
                f"its title holds {flaw[1]} at character {flaw[0] + 1}: a title is one line of plain text "
                "(it becomes a commit's subject); fix it in roadmap.md and build again"))))
        route = self.router.route(node)
        if node.split:  # its subtasks first (growth/), then it is done without a call
            if (done := self.growth.split_done(node)) is not None:
                return self._end(tid, done)
            return await self.run_to_end(tid, self.growth.split_run(node, route))
        if node.approaches is not None and self.isolation.is_isolated(node):
            run = self.task_runs[tid] = Approaches(self, node, route)  # best-of-N (approaches.py)
        else:
            if node.approaches is not None:
                self.store.event("approaches_off", tid, message=(
                    f"{tid}: approaches and score need isolation: worktree; this run (--isolation none) "
                    "runs the task once, without its score"))
            run = self.task_runs[tid] = TaskRun(self, node, route)
        return await self.run_to_end(tid, run)

    async def run_to_end(self, tid: str, run: Any) -> str:
        """Run a task's run (TaskRun, Approaches, growth's SplitRun) to its ending, write that,
        then let it wind up; the ending's state."""
        written = None
        try:
            ending = await run.run()
            await run.log.end(ending)  # store.end_task, in the group commit when its attempt is still open
            written = ending
            return ending.state
        except asyncio.CancelledError:  # abort: the attempt in flight interrupted, the task pending
            await run.interrupted()
            raise
        finally:
            try:
                await run.ended(written)  # what follows the written ending, the task's clean-up
            finally:
                self.task_runs.pop(tid, None)

    def register(self, nodes: list[PlanNode]) -> None:
        """Tasks added to the running plan (growth/): the isolation and git commits know them."""
        self.isolation.add(nodes)
        self.git.titles.update({n.id: n.title for n in nodes})

    # ------------------------------------------------------------------ review (`review: true`)

    def reviewed(self, node: PlanNode) -> bool:
        """Whether the task's verified result waits for a person (not with run --auto-approve)."""
        return bool(getattr(node, "review", None)) and not self.auto_approve

    def _decisions(self) -> dict[str, dict]:
        """Task in review -> the decision `harnessc approve` / `reject` recorded for it."""
        keys = self.store.meta_keys(REVIEW_KEY)
        states = self.store.states() if keys else {}
        out = {}
        for key in keys:
            tid = key.removeprefix(REVIEW_KEY)
            try:
                rec = json.loads(self.store.meta_get(key) or "{}")
            except ValueError:
                rec = {}
            if tid in self.nodes and states.get(tid) == TaskState.REVIEW and isinstance(rec, dict):
                out[tid] = rec
            else:  # decided already, or damaged: nothing to do
                self.store.meta_set(key, None)
        return out

    async def _take_reviews(self) -> dict[str, str]:
        """Apply the recorded decisions: an approved task lands (isolated) and succeeds, a
        conflict blocks it; a rejected one goes back to pending with the reason as a
        reviewer's feedback in its prompts. Task -> its new state."""
        done = {}
        for tid, rec in sorted(self._decisions().items()):
            node, row = self.nodes[tid], self.store.tasks([tid])[tid]
            if rec.get("decision") == "rejected":
                why = str(rec.get("why") or "")
                self.steering.feedback(tid, f"A reviewer rejected your last result (`harnessc reject`): {why}")
                with self.store.tx():
                    self.store.set_state(tid, TaskState.PENDING)
                    self.store.meta_set(REVIEW_KEY + tid, None)
                    self.store.event("review_rejected", tid, why=why, message=f"{tid}: rejected in review: {why}")
                done[tid] = TaskState.PENDING
                continue
            result = (await self.isolation.approve(node, approval_recheck(self.plan, self.store, self.baselines,
                                                                           self.isolation, node))
                      if tid in self.isolation.held() else None)
            if result is not None and not isinstance(result, Landed):
                error = (f"approved, but {conflict_text(result)}"
                         + (f": {'; '.join(result.errors[:3])}" if result.errors else "")
                         + f"; it is kept at {self.isolation.blocked_refs.get(tid, '')}: merge it by hand, "
                         f"or `harnessc retry {tid}`")
                self.isolation._record(tid, {"state": TaskState.BLOCKED, "ref": self.isolation.blocked_refs.get(tid, ""),
                                             "branch": self.isolation.integration.branch})
                with self.store.tx():
                    self.store.finish_task(tid, TaskState.BLOCKED, error=error)
                    self.store.meta_set(REVIEW_KEY + tid, None)
                done[tid] = TaskState.BLOCKED
                continue
            with self.store.tx():
                self.store.finish_task(tid, TaskState.SUCCEEDED, output=row["output"], fingerprint=row.get("fingerprint"))
                self.store.meta_set(REVIEW_KEY + tid, None)
                self.store.event("review_approved", tid, message=f"{tid}: approved in review"
                                 + (f"; landed {result.sha[:10]}" if result is not None else ""))
            if result is not None:
                self.isolation.landed(node, result)
            self._land_output(tid, now=True)
            done[tid] = TaskState.SUCCEEDED
        return done

    def halting(self) -> bool:
        return self.stop_mode is not None or self.halt is not None

    def halt_run(self, kind: str, why: str) -> bool:
        """End the run early (no new call starts). The first reason is kept: False when
        the run was already halting."""
        if self.halt:
            return False
        self.halt = (kind, why)
        self._stop_event.set()
        return True

    def agent(self, name: str) -> tuple[Any, AgentConfig]:
        if name not in self.agents:
            cfg = config_of(self.plan.agents, name)
            if cfg is None:
                raise AgentError(f"agent '{name}' is not defined in harness.yaml")
            self.agents[name] = (self.cassettes.agent(name, cfg), cfg)
        return self.agents[name]

    def system_prompt(self) -> str:
        """The system prompt: one per plan, rendered once."""
        if self._system is None:
            try:
                self._system = planmod.render_system(self.plan, self.root)
            except Exception:
                self._system = ""
        return self._system

    async def explore(self, run: TaskRun, why: str) -> None:
        """The `explore` recovery rung of a stuck task: branches from its stuck point (explore.py)."""
        await explore_from(run, why)

    def adopt_children(self, attempt_id: int) -> int:
        """Child processes started from here on belong to this attempt (see reaper.py)."""
        reaper.enter(self.store.proc_marker(attempt_id), functools.partial(self.store.record_child, attempt_id))
        return attempt_id

    def deps(self, node: PlanNode) -> dict[str, dict]:
        if not node.depends_on:
            return {}
        rows = self.store.tasks(list(node.depends_on))
        return {d: {"output": rows[d]["output"], "state": rows[d]["state"], "error": rows[d]["error"],
                    "filled": rows[d].get("filled")}
                if d in rows else {"output": None, "state": TaskState.PENDING, "error": None}
                for d in node.depends_on}

    # ------------------------------------------------------------------ the end

    def _result(self, elapsed: float, ending: tuple[str, str | None] | None = None) -> RunResult:
        rows = self.store.tasks()
        run_id = self.store.run_id or ""
        paths = self.store.agent_paths(run_id) if run_id else {}
        tasks = [task_summary(rows[t], paths.get(t)) for t in sorted(self.targets, key=lambda i: self.nodes[i].order)
                 if t in rows]
        states = [t["state"] for t in tasks]
        outcome = outcomes.run_outcome(states, *(ending or self._ending()))
        left = [self.nodes[t["id"]] for t in tasks if t["state"] not in (*outcomes.COMPLETE, *outcomes.BROKEN)]
        providers = {cfg.provider for _, cfg in self.agents.values()}
        return RunResult(run_id, outcome, tasks, self.stale,
                         elapsed, cost_usd=self.store.run_spent(run_id),
                         total_cost_usd=self.store.spent(),
                         budget_stop=self.budget.stop(left) if outcome.status == "budget" else None,
                         cache=cache_figures(self.store, self.plan.agents, run_id) if run_id else None,
                         notes=list(self.notes), outputs=self.outputs_written,
                         simulated=providers == {"simulate"})

    def _ending(self) -> tuple[str, str | None]:
        """How the run ended (outcome.FINISHED, STOP, ABORT, BUDGET, FAIL_FAST, STATE_LOST) and why."""
        if self.halt and self.halt[0] == outcomes.STATE_LOST:
            return self.halt
        if self.stop_mode == "abort":
            return outcomes.ABORT, None
        if self.halt:
            return self.halt
        if self.stop_mode == "stop":
            return outcomes.STOP, None
        return outcomes.FINISHED, None


def write_results(workspace: Workspace, result: RunResult, run: dict | None) -> Path:
    """.harness/runs/<run-id>/run_results.json, like dbt's."""
    path = workspace.run_results(result.run_id)
    data: dict[str, Any] = {"run_id": result.run_id, "status": result.status, "exit_code": result.exit_code,
            "message": result.message, "elapsed": round(result.elapsed, 3), "stale": result.stale,
            "run": run, "results": result.tasks}
    # Indented, one result per line: readable, and each line is encoded by the C encoder
    # (an indented dump of thousands of results costs more than running them).
    results = data.pop("results")
    head = json.dumps(data, indent=2, sort_keys=True, default=str)
    encode = json.JSONEncoder(sort_keys=True, default=str).encode  # (json.dumps made one per result)
    rows = ",\n".join("    " + encode(r) for r in results)
    text = head[:-2] + ',\n  "results": [' + (f"\n{rows}\n  ]" if rows else "]") + "\n}\n"
    workspace.write_atomic(path, text)
    return path
