"""One task's iterations, as a small state machine that returns the task's outcome.

Each iteration is the same short sequence of named steps:

    steer -> check limits -> choose agent -> reserve budget for that agent -> call -> verify
    -> then one of: succeed | keep working (no claim yet; stuck: climb the recovery ladder)
                    | refine (a rejected claim: a sharper prompt, or escalate)
                    | recover (a failed call: back off, or fall back to the next agent)
                    | give up (on_failure decides)

(The prompt is rendered once, when the task starts; refinement and recovery rewrite it.)

The scheduler (scheduler.py) owns only the graph; everything one task does lives here. What
a step needs from the run - the state store, the budget, agents, the stop flag - comes
through `TaskContext`, a small interface the Runner implements. A step that ends the task
decides and does not write: it raises `Done` with an `Ending` (store/attempts.py: the
task's end and the last record of its open attempt), `run` returns it, and the scheduler
writes it in one commit (AttemptLog.end -> store.end_task) before `ended` does what follows
a written end (a landing's record, the shared tree's commit, run memory, clean-up).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
from dataclasses import dataclass, field, replace
from itertools import accumulate
from pathlib import Path
from typing import Any

from .. import outcome as outcomes
from ..gitcmd import GitFailed
from ..planfile import Contract, PlanNode
from ..providers import AgentConfig
from ..states import TaskState
from ..workspace import WorkspaceError
from . import clock, protect
from . import plan as planmod
from .agents import deprecation
from .agents.base import AgentError, Request, Response
from .agents.errors import retry_delay
from .agents.usage import Charge
from .baseline import base_checks
from .context import TaskContext
from .executor import AttemptLost
from .loop import useredits
from .loop.assist import GRACE, Assistant
from .loop.loop import Seen, TaskLoop
from .routing.router import Route
from .routing.tasklimits import TaskLimits
from .store.attempts import AttemptEnd, Ending, TaskEnd
from .store.outputs import verified_by
from .store.state import StateStore
from .verify import Verdict, verify
from .worktree import landing as landingmod
from .worktree.isolation import Conflict, IsolationError, Landed, Tampered

TRANSIENT_LIMIT = 5  # consecutive transient errors on one agent before it counts as failing
LOST_LIMIT = 5  # attempts in a row lost with their worker (executor ray) before the call counts as failed


BUDGET_POLL = 0.05  # seconds between looks while calls in flight hold the run budget's reservations


class Done(Exception):
    """Ends the task's loop with its ending (store/attempts.py), which the scheduler writes."""

    def __init__(self, ending: Ending):
        self.ending = ending

    @property
    def outcome(self) -> str:
        return self.ending.state


@dataclass
class Progress:
    """What the task has been through in this run."""

    iteration: int = 0
    failures: int = 0  # failed claims and failed calls on the current agent
    transient_errors: int = 0  # in a row, on the current agent
    calls: outcomes.CallTally = field(default_factory=outcomes.CallTally)  # every agent, for the final error
    best: Any = None  # the parsed JSON object closest to the contract, for partial fallbacks
    best_errors: int | None = None  # its contract errors
    agent: str = ""  # the agent of the current iteration


def answer_end(status: str, resp: Response, *, parsed: Any = None, errors: list[str] | None = None,
               checks: list[dict] | None = None, seen: Seen | None = None,
               answered_at: float | None = None) -> AttemptEnd:
    """The end of an attempt that answered: its text, the call's charge, what the verdict read
    and a loop task's progress (`seen`). What ends the task too is added with replace().
    `answered_at`: when the answer came (else AttemptLog adds it, with a copy of the record)."""
    return AttemptEnd(status, raw=resp.text, parsed=parsed, errors=errors or (), checks=checks, charge=resp.charged(),
                      progress=seen.progress if seen else None, loop_state=seen.loop_state if seen else None,
                      answered_at=answered_at)


class AttemptLog:
    """The task's attempt rows, written through the store's group commit: `await`ing a write
    means it is durable. Knows which write was in flight when the task was cancelled."""

    def __init__(self, store: StateStore, task_id: str):
        self.store, self.tid = store, task_id
        self.id: int | None = None
        self._begin: asyncio.Future | None = None
        self._closing: asyncio.Future | None = None
        self._closing_id: int | None = None
        self._closing_final = False
        self.answer_charge = Charge()  # the attempt's answer's ledger, once it answered
        self.answered_at: float | None = None  # when its answer came (for the run's trace)

    async def begin(self, **kw: Any) -> int:
        self.answer_charge = Charge()
        self.answered_at = None
        self._begin = self.store.defer(functools.partial(self.write_begin, **kw))
        self.id = await self._begin
        return self.id

    async def finish(self, end: AttemptEnd) -> None:
        if self.answered_at is not None and end.answered_at is None:
            end = replace(end, answered_at=self.answered_at)
        self._closing_id, self._closing_final = self.id, end.task is not None
        self._closing = self.store.defer(functools.partial(self.write_finish, self.id, end))
        await self._closing
        self.id = None

    async def end(self, ending: Ending) -> None:
        """Write the task's ending (the scheduler's call): one store.end_task. With the attempt
        still open, in the group commit, known as finish's write is when the task is cancelled."""
        if ending.attempt is None:
            self.write_end(ending)
            return
        if self.answered_at is not None and ending.attempt.answered_at is None:
            ending = replace(ending, attempt=replace(ending.attempt, answered_at=self.answered_at))
        self._closing_id, self._closing_final = ending.attempt_id, True
        self._closing = self.store.defer(functools.partial(self.write_end, ending))
        await self._closing
        self.id = None

    def interrupted(self) -> bool:
        """After a cancel: record the attempt in flight as interrupted. True when the task's
        end had already committed (leave it as it is)."""
        if self._begin is not None and _committed(self._begin):
            self.id = self._begin.result()
        if self.id is not None and self.id == self._closing_id and _committed(self._closing):
            if self._closing_final:
                return True
            self.id = None
        if self.id is not None:
            # an answer that came back before the abort (e.g. during verification) is charged
            self.write_finish(self.id, AttemptEnd("interrupted", errors=["aborted"], charge=self.answer_charge))
        return False

    # The two writes, in the store's group commit (approaches.ApproachLog writes them its own way).

    def write_begin(self, **kw: Any) -> int:
        return self.store.begin_attempt(self.tid, **kw)

    def write_finish(self, attempt_id: int, end: AttemptEnd) -> None:
        self.store.finish_attempt(attempt_id, self.tid, end)

    def write_end(self, ending: Ending) -> None:
        self.store.end_task(self.tid, ending)


class TaskRun:
    """The iterations of one task until it succeeds, gives up, or the run stops."""

    def __init__(self, ctx: TaskContext, node: PlanNode, route: Route):
        self.ctx, self.node, self.route = ctx, node, route
        self.tid = node.id
        self.store = ctx.store
        self.contract: Contract | None = ctx.plan.contract_of(node)
        self.limits = TaskLimits(ctx.store, node, self.contract)  # counted across resumes (tasklimits.py)
        self.max_time = self.limits.max_time
        self.t0 = clock.monotonic()  # (moved on by paused time)
        self.p = Progress(iteration=self.limits.iterations_before)
        self.log = AttemptLog(ctx.store, node.id)
        self.original = self.base = self.prompt = ""  # the rendered prompt; base: what iterations start from
        self.shared_ends: tuple[int, ...] = ()  # where the original's shared parts end (prompts.render_prompt_parts)
        self.operator = ""  # the operator's instructions, sent after the prompt (steering.py)
        self.edits = ""  # the user's edits to its files since its last attempt (useredits.py)
        self.level = 0  # refinement level of the prompt (0: the first prompt)
        self.shown: dict = {}  # what displays show of the call in flight (ctx.live[task])
        self.answer: str | None = None  # the text of the answer that passed verification (run memory)
        self.output: Any = None  # and its validated output (its memory fields: runtime/memory/capture.py)
        # isolation: worktree - the attempt's worktree is where everything of the task happens
        self.iso = ctx.isolation if ctx.isolation.is_isolated(node) else None
        self.workdir = ctx.isolation.workdir(node) if self.iso else ctx.root
        self.attempt: Any = None  # its worktree (worktree.Attempt), once made
        self.conflict: Conflict | None = None  # the landing conflict it is running again after
        # which changed files of the shared checkout are this task's (None: not tracked; an
        # isolated loop task's file evidence is what changes in its worktree: open_attempt)
        self.files = None if self.iso else ctx.attribution.task(node)
        self.loop = TaskLoop.of(self.workdir, ctx.plan, node, ctx.store, self.files)  # progress, stuck, memory
        self.assist = Assistant(ctx, node, self.time_left)  # cheap agents' mutations and summaries (assist.py)
        # executor ray: the attempt's agent call and checks run on a worker (executor/ray.py)
        executor = getattr(ctx, "executor", None)
        self.remote = executor.attempts(self) if executor is not None and self.iso else None
        self.lost = 0  # attempts lost with their worker in a row
        self._guard: Any = None  # (made at its first use: `guard`)
        self.guarding = True  # whether the call in flight is guarded (guard_before)
        # the timed steps before the coming attempt ({"prompt"|"route": [start, end]}, wall
        # times), told with it so the run's trace shows where that time went (telemetry.py)
        self.steps: dict[str, list[float]] = {}
        self.routing_since: float | None = None
        self.iterated = False  # its iterations began (their wind-up is due)
        self.then: Any = None  # what follows its ending once written (a landing's record, a commit)

    async def run(self) -> Ending:
        """The task's iterations until it ends: its ending, not yet written. The scheduler
        writes it (AttemptLog.end), then calls `ended` - also when this raised."""
        if self.node.routing.auto:
            self.store.event("routed", self.tid, agents=self.route.agents)
        if self.iso:
            try:
                self.attempt = await self.open_attempt()
            except (GitFailed, OSError, IsolationError) as e:
                return self.failed(f"could not create its worktree: {e}").ending
        try:
            with self.timed("prompt"):
                self.original = self.base = self.prompt = self.render()
        except Exception as e:  # a template problem is this task's failure, not the run's
            return self.failed(f"could not render the prompt: {e}").ending
        if not self.iso and base_checks(self.node):  # the shared tree: before the agent touches it
            await self.floors()
        return await self.iterations()

    async def interrupted(self) -> None:
        """Abort (the task was cancelled before its ending was written): the attempt in flight
        is interrupted and the task goes back to pending. A write that committed after the
        cancel was requested still counts. (Before its iterations began: left as it is.)"""
        if self.iterated and not self.log.interrupted():
            self.requeue(running_s=self.used_time())

    async def ended(self, ending: Ending | None) -> None:
        """After the scheduler wrote the ending (None: it was not, the task was cancelled or
        failed): what follows it - the landing's record, the shared tree's commit, run memory,
        the shared files - then the task's clean-up and its worktree's."""
        outcome = ending.state if ending is not None else TaskState.INTERRUPTED
        try:
            if self.iterated:
                await self.wind_up(ending)
        finally:
            await self.close_worktree(outcome)

    async def wind_up(self, ending: Ending | None) -> None:
        try:
            if ending is not None:
                if self.then is not None:
                    await self.then()
                self.remember(ending.state)
                if self.files:
                    await self.files.end()  # its last changes, for the tasks still running
                await self.ctx.git.task_ended(self.tid, ending.state)  # what a succeeded task shared with this one
        finally:
            if self.files:
                self.files.forget()
            if not self.iso:
                useredits.UserEdits.of(self.ctx).done(self.tid)
            if self.loop:
                self.loop.close()
            try:
                if self._guard is not None:
                    self._guard.close()  # a shared tree's copies of the protected files
            except (OSError, WorkspaceError):
                pass  # left in .harness/protected/: the next run of the task replaces them

    async def close_worktree(self, outcome: str) -> None:
        if self.iso and self.attempt is not None:
            await self.iso.close(self.node, outcome)

    async def open_attempt(self, base: str | None = None, k: int = 1) -> Any:
        """The attempt's worktree, where a loop task's file evidence is measured from now on.
        Executor ray: put on disk only when a change comes back (executor/ray.py), or when
        something here reads it: its context files (the prompt), a stuck loop task's
        exploration (explore.py makes it)."""
        lazy = self.remote is not None and not self.node.context
        attempt = await self.iso.open(self.node, base=base, k=k, make=not lazy)
        self.measure_in(attempt)
        return attempt

    def measure_in(self, attempt: Any) -> None:
        """A loop task's file evidence is what changes in the attempt's worktree, where it is
        alone, from the files it holds now: snapshots of it (its own ledger and private
        index, per worktree: approaches and exploration branches run at once), or with
        executor ray the change each call brings back (which the worktree may never hold)."""
        if not self.loop:
            return
        if self.remote is not None:
            self.loop.meter.measure_with(self.remote.evidence())
        else:
            index = self.ctx.store.workspace.loop / f"worktree-{attempt.path.name}.index"
            self.loop.meter.measure_in(attempt.workdir, index)

    def render(self) -> str:
        """The task's first prompt (an isolated task's context files read in its worktree);
        notes where its shared parts end (prompts.render_prompt_parts), for prompt caching."""
        parts = planmod.render_prompt_parts(self.ctx.plan, self.tid, self.ctx.deps(self.node), self.ctx.root,
                                            files_root=self.workdir)
        self.shared_ends = tuple(accumulate(len(p) for p in parts[:-1]))
        return "".join(parts) + self.memory_section()

    def memory_section(self) -> str:
        """What run memory tells this task (runtime/memory/), after the cacheable prefix."""
        memory = getattr(self.ctx, "memory", None)
        return memory.section(self.node) if memory is not None else ""

    def remember(self, outcome: str) -> None:
        """A task that ended well: what its last answer told goes to run memory."""
        memory = getattr(self.ctx, "memory", None)
        if memory is None or outcome not in (TaskState.SUCCEEDED, TaskState.REVIEW) or self.answer is None:
            return
        earlier = list(self.loop.memory.decisions) if self.loop and getattr(self.loop, "memory", None) else []
        memory.ended(self.node, outcome, self.answer, earlier, output=self.output)

    async def iterations(self) -> Ending:
        self.iterated = True  # `ended` winds them up
        if self.loop:
            self.resume_recovery()
        try:
            self.prompt = await self.next_prompt()  # a resumed loop task remembers its earlier iterations
            while True:
                await self.iteration()
        except Done as d:
            return d.ending

    def resume_recovery(self) -> None:
        """A loop task stopped on its recovery ladder goes on where it was (loop.py saved it):
        from its rewritten prompt, on the agent it escalated to (when that agent is still on
        its route: `run --agent X` serves X only)."""
        loop = self.loop
        if loop.recovered_prompt is not None:
            self.base = self.prompt = loop.recovered_prompt
        if loop.escalated_to is not None:
            self.route.resume_at(loop.escalated_to)
        if loop.ladder.step or loop.recovered_prompt is not None or loop.escalated_to is not None:
            self.store.event("recovery_resumed", self.tid, step=loop.ladder.step, rungs=len(loop.ladder.rungs),
                             rung=loop.ladder.reached(), agent=self.route.agent, escalated_to=loop.escalated_to,
                             rewritten_prompt=loop.recovered_prompt is not None)

    # ------------------------------------------------------------------ the steps

    @contextlib.contextmanager
    def timed(self, step: str):
        """Time a step before the next attempt (from its first start to its last end)."""
        start = clock.time()
        try:
            yield
        finally:
            self.steps.setdefault(step, [start, start])[1] = clock.time()

    async def iteration(self) -> None:
        await self.steer()
        self.check_limits()
        self.routing_since = clock.time()  # choosing the agent, reserving, a slot: until the attempt begins
        name, agent, cfg = await self.choose_agent()
        spell = await self.user_edits()
        try:
            cost, tokens = await self.reserve(cfg)
            await self.guard_before(agent)
            resp = await self.call(name, agent, cfg, cost, tokens)
            if resp is None:  # lost with its worker: the iteration runs again
                return
            self.say_deprecated(name, cfg, resp)
            over = self.limits.count(resp.usage, resp.tool_calls if isinstance(resp, Response) else 0, name)
            if isinstance(resp, AgentError):
                await self.guarded()  # a failed call's changes to protected files are put back too
                await spell.end(again=True)
                self.p.calls.failed_call(resp.kind, resp.message)
                await self.recover(name, resp)
                return
            if over:
                await self.over_limit(resp, over)
            verdict = await self.check(resp)
            await spell.end(again=not (verdict.claim and verdict.ok))
        finally:
            await spell.end(again=True)  # an iteration that ends early may run again
        self.p.calls.answered(verdict.claim, verdict.errors)
        if not verdict.claim:
            await self.keep_working(resp)
            return
        self.ctx.policy.router.record(name, self.node, verdict.ok, resp.cost_usd)  # history learns
        if verdict.ok:
            await self.succeed(resp, verdict)
        else:
            await self.refine(resp, verdict)

    def say_deprecated(self, name: str, cfg: AgentConfig, resp: Response | AgentError) -> None:
        """Once per agent and run: its model is deprecated (the SDK said so on this call)."""
        date = getattr(resp, "deprecated", None)
        if date and name not in self.ctx.deprecations_said:
            self.ctx.deprecations_said.add(name)
            self.store.event("model_deprecated", self.tid, agent=name, model=cfg.model, end_of_life=date,
                             reason=deprecation.warning(name, cfg.model, date))

    async def steer(self) -> None:
        """The operator's say between iterations (steering.py): wait while the run is paused
        (paused time does not count against max_time), end a task they skipped, and carry
        their instructions into the next prompt."""
        steering = self.ctx.control.steering
        steering.poll(max_age=0.05)
        self.t0 += await steering.hold(self.ctx.control.halting)
        if steering.skipped(self.tid) and not self.ctx.control.halting():
            raise self.done(TaskEnd(TaskState.SKIPPED, error="skipped by the operator (inbox)"))
        try:
            self.operator = planmod.render_operator(self.ctx.plan, steering.instructions_for(self.tid), self.ctx.root)
        except planmod.TemplateProblem as e:  # a project's operator.md.j2
            raise self.failed(f"could not render the operator's instructions: "
                              f"{e.span.path}:{e.span.line}: {e.code}: {e.message}") from None

    # The task's endings: raised as Done, written by the scheduler (an approach's by its coordinator).

    def done(self, task: TaskEnd | None, attempt: AttemptEnd | None = None, running_s: float | None = None) -> Done:
        """The task ends (`task` None: pending again, it runs on resume); `attempt`: the last
        record of the attempt still open, written in the same commit."""
        return Done(Ending(task, self.log.id if attempt is not None else None, attempt, running_s))

    def failed(self, error: str) -> Done:
        return self.done(TaskEnd(TaskState.FAILED, error=error))

    def requeue(self, **extra: Any) -> None:
        """Back to pending after an abort: the task runs again on resume."""
        self.store.set_state(self.tid, TaskState.PENDING, **extra)

    def save_time(self, used: float) -> None:
        self.store.save_running_time(self.tid, used)

    async def user_edits(self) -> useredits.Spell | useredits.NoSpell:
        """The user's edits to the task's files since its last attempt, for its next prompt
        (useredits.py); in the shared tree, the attempt's busy spell begins here."""
        if self.iso:
            if self.p.iteration > self.limits.iterations_before:  # an earlier attempt in this run
                self.edits = await asyncio.to_thread(useredits.uncommitted_note, self.ctx.root, self.node)
            return useredits.NoSpell()
        ledger = useredits.UserEdits.of(self.ctx)
        spell = ledger.spell(self.tid)
        await spell.begin(watch=ledger.watches(self.node, self.p.iteration == self.limits.iterations_before))
        self.edits = await ledger.take(self.tid, self.node)
        return spell

    @property
    def sent_prompt(self) -> str:
        """The prompt as the agent gets it: the working prompt, the user's edits to its
        files, then the operator's instructions."""
        return self.prompt + self.edits + self.operator

    def check_limits(self) -> None:
        """Before a call: the run halting ends the task for now (its time so far kept); its own
        limits, counted across resumes (tasklimits.py), end it for good."""
        if self.ctx.control.halting():
            raise self.done(None, running_s=self.used_time())
        why = self.limits.reached(self.p.iteration, self.used_time())
        if why:
            self.give_up(why)

    async def over_limit(self, resp: Response, why: str) -> None:
        """A call that passed a contract constraint fails the task, whatever its answer says
        (the constraints are part of the contract); the answer is kept with its attempt."""
        raise self.done(TaskEnd(TaskState.FAILED, error=why),
                        AttemptEnd("over_limit", raw=resp.text, errors=[why], charge=resp.charged()))

    def clock(self) -> None:
        """Every CLOCK_EVERY seconds while the task runs (scheduler.py): its time so far is
        saved, so a resumed task has what is left of max_time; near max_time, says so."""
        used = self.used_time()
        self.save_time(used)
        self.limits.near_time(used)

    async def choose_agent(self) -> tuple[str, Any, AgentConfig]:
        """HARNESSC_AGENT (steering) wins; else the route's agent, unless its breaker is open
        or it is at a daily limit: then the next agent of the chain, or (at the end of the
        chain) a wait until it is back."""
        name = self.ctx.control.steering.agent
        if name is None:
            while (blocked := self.ctx.policy.health.blocked(self.route.agent)) is not None:
                if self.fall_back(blocked.reason):
                    continue
                await self.wait(blocked.until - clock.time(), blocked.reason)  # past the time left: the task ends
                self.check_limits()
            name = self.route.agent
        try:
            agent, cfg = self.ctx.agent(name)
        except AgentError as e:
            raise self.failed(e.message) from None
        return name, agent, cfg

    async def reserve(self, cfg: AgentConfig) -> tuple[float, tuple[int, int]]:
        """The estimated cost and tokens of a call on this agent, refused past a budget (it
        waits while only other calls' reservations stand in the way)."""
        budget = self.ctx.policy.budget
        cost = budget.estimate(self.node, cfg, self.sent_prompt)
        tokens = budget.estimate_tokens(self.node, cfg, self.sent_prompt, self.ctx.system_prompt())
        while (refusal := budget.refuse(self.node, cost, sum(tokens))) and refusal[0] == "wait" \
                and not self.ctx.control.halting():
            await clock.sleep(BUDGET_POLL)
        if refusal:
            self.ctx.policy.health.release(self.route.agent)
            scope, msg = refusal
            if scope in ("run", "wait"):  # wait: the run is halting meanwhile
                if scope == "run" and self.ctx.control.halt_run(outcomes.BUDGET, msg):
                    self.store.event("budget_exhausted", self.tid, message=msg)
                raise self.done(None)
            raise self.failed(msg)
        return cost, tokens

    async def begin_attempt(self, name: str, cost: float, tokens: tuple[int, int]) -> None:
        self.p.iteration += 1
        self.ctx.live[self.tid] = self.shown = {"iteration": self.p.iteration, "agent": name}
        self.p.agent = name
        if self.loop:
            await self.loop.begin()  # the files as the call finds them (a loop task's, for its evidence)
        elif self.files:
            await self.files.begin()
        phash = hashlib.sha256(self.sent_prompt.encode()).hexdigest()
        steps, self.steps = self.steps, {}
        if self.routing_since is not None:
            steps["route"] = [self.routing_since, clock.time()]
        aid = await self.log.begin(iteration=self.p.iteration, level=self.level, agent=name, prompt=self.sent_prompt,
                                   prompt_hash=phash, reserve_usd=cost,
                                   start_task=self.p.iteration == self.limits.iterations_before + 1,
                                   reserve_tokens=tokens, steps=steps)
        self.ctx.adopt_children(aid)

    async def call(self, name: str, agent: Any, cfg: AgentConfig, cost: float,
                   tokens: tuple[int, int]) -> Response | AgentError | None:
        """One agent call in one of the agent's slots (throttle.py), recorded as an attempt;
        a failed call's attempt is finished here, with what it was charged. None: the
        worker running it was lost (executor ray) and the iteration runs again."""
        lost = None
        async with self.ctx.policy.throttle.slot(name) as call:
            await self.begin_attempt(name, cost, tokens)
            started = clock.monotonic()  # a failed call's latency: an answer brings its own
            try:
                # the agent bounds the call by request.timeout itself; this is the run's bound
                # for any agent, and the graceful stop's grace (callbounds.py)
                async with self.ctx.calls.bound(self.time_left() + GRACE) as bound:
                    resp = await self.ask(name, agent, cfg)
                self.log.answered_at = clock.time()
                self.log.answer_charge = resp.charged()  # kept if the task is aborted during verification
                call.answered = True
            except AgentError as e:
                call.error = e
            except AttemptLost as e:
                lost = e
            except TimeoutError:
                if not bound.expired():
                    raise
                if bound.by_stop:
                    await self.cut_by_stop(started)
                call.error = AgentError(f"agent '{name}': no answer within the time its task had left of "
                                        f"max_time ({self.max_time:g}s)", kind="timeout")
        if lost is not None:
            return await self.lost_attempt(lost, started)
        self.ctx.policy.health.record(name, call.error)
        if call.error is not None:
            e = call.error
            await self.log.finish(AttemptEnd("error", raw=e.stderr or None, errors=[e.message],
                                             charge=replace(e.charged(), latency=clock.monotonic() - started)))
            return e
        self.p.transient_errors = 0
        self.lost = 0
        return resp

    async def ask(self, name: str, agent: Any, cfg: AgentConfig) -> Response:
        """The agent's answer: called here, or on a worker (executor ray)."""
        if self.remote is not None:
            return await self.remote.call(name, agent, cfg, self.request(cfg))
        return await agent.call(self.request(cfg))

    @property
    def guard(self) -> Any:
        """What its agent may not change (protect.py): checked after each call, before
        verification. Made when first needed (a task of simulate calls in a shared tree never
        needs it, and making it costs more than such a task's call)."""
        if self._guard is None:
            self._guard = protect.guard(self.ctx.plan, self.node, self.ctx.root, self.iso)
        return self._guard

    async def guard_before(self, agent: Any = None) -> None:
        """Record the protected files before the agent's call (a shared tree's; protect.py).
        An agent that writes no file (simulate: `writes_files = False`) is not guarded in a
        shared tree: before and after its call the guard would read every protected file for
        a change it cannot make (what changes meanwhile is someone else's: their guard's, or a
        person's edit, as between attempts). An isolated attempt is always guarded: its guard
        also judges what its checks changed."""
        self.guarding = self.iso is not None or getattr(agent, "writes_files", True)
        if not self.guarding:
            return
        try:
            await self._guard_call(self.guard.reads_before, self.guard.before)
        except (OSError, WorkspaceError) as e:
            raise self.failed(f"could not record its protected files: {e}") from None

    @staticmethod
    async def _guard_call(reads: bool, fn, *args):
        """A guard's step in a thread when it reads files (hashes, git), else here: a thread's
        hand-off costs more than a step with nothing to read (a run of no-op tasks, twice)."""
        return await asyncio.to_thread(fn, *args) if reads else fn(*args)

    async def guarded(self) -> list[str]:
        """What the attempt changed that its agent may not (protected files, outside
        write_scope), put back (protect.py): the errors that reject it; empty when none."""
        if not self.guarding:
            return []
        try:
            errors = await self._guard_call(self.guard.reads_after, self.guard.after, self.attempt)
        except (GitFailed, OSError, WorkspaceError, IsolationError) as e:
            errors = [f"its protected files could not be checked: {e}"]
        if errors:
            self.store.event("protected", self.tid, errors=errors[:20], message="; ".join(errors)[:500])
        return errors

    async def check(self, resp: Response) -> Verdict:
        """The answer's verification, here or on a worker (executor ray); an attempt that
        changed a protected file is rejected first, whatever its checks said (they would
        have judged the change; a worker's change is in the worktree by now)."""
        if errors := await self.guarded():
            return Verdict(claim=True, errors=errors)
        if self.remote is not None:
            return await self.remote.verdict(resp, max(0.1, self.time_left()))
        return await verify(self.node, self.contract, resp.text, self.workdir, max(0.1, self.time_left()),
                            truncated=resp.truncated, floors=await self.floors())

    async def floors(self) -> dict[str, int | None] | None:
        """What the task's `min_passed: base` checks passed at its base (measured once, kept:
        baseline.py); None when it has none."""
        if not base_checks(self.node):
            return None
        if self.iso:
            return await self.ctx.baselines.at_commit(self.node, self.attempt.base, max(0.1, self.time_left()),
                                                      self.iso.checkout)
        return await self.ctx.baselines.in_tree(self.node, self.ctx.root, max(0.1, self.time_left()))

    async def lost_attempt(self, lost: AttemptLost, started: float) -> AgentError | None:
        """A worker or node died with the attempt: it is interrupted (charged nothing: no
        answer came) and its iteration runs again; LOST_LIMIT in a row fail the call."""
        await self.log.finish(AttemptEnd("interrupted", errors=[lost.message],
                                         charge=Charge(latency=clock.monotonic() - started)))
        self.p.iteration -= 1
        self.lost += 1
        self.store.event("attempt_lost", self.tid, message=lost.message[:500])
        if self.lost >= LOST_LIMIT:
            return AgentError(f"{lost.message} ({LOST_LIMIT} attempts in a row)")
        return None

    async def cut_by_stop(self, started: float) -> None:
        """A call still running the stop's grace after a graceful stop was cut: its attempt
        is interrupted, the task goes back to pending (the next run goes on from it)."""
        raise self.done(None, AttemptEnd("interrupted", charge=Charge(latency=clock.monotonic() - started), errors=[
            f"stopped: the call was still running {self.ctx.calls.grace:g}s after the stop, and was cut"]))

    def request(self, cfg: AgentConfig) -> Request:
        prompt = self.sent_prompt
        return Request(task_id=self.tid, prompt=prompt, system=self.ctx.system_prompt(),
                       cache_breaks=tuple(end for end in self.shared_ends if prompt.startswith(self.original[:end])),
                       contract=self.contract,
                       output_schema=self.contract.output_schema if self.contract else None,
                       promise=self.node.completion_promise, iteration=self.p.iteration,
                       complexity=self.node.complexity,
                       timeout=self.time_left(), max_tokens=cfg.max_tokens, root=self.ctx.root,
                       workdir=self.workdir if self.iso else None,
                       on_line=functools.partial(self.shown.__setitem__, "line") if self.ctx.show_lines else None)

    async def recover(self, name: str, e: AgentError) -> None:
        """After a failed call: back off and retry a transient error, move to the next agent
        when this one will not serve the task, else count a failure. A call that used up the
        task's time (cut at max_time) ends it. A call that never answered leaves nothing to
        verify: when no agent is left the task fails (on_failure's content fallbacks are for
        answers that failed verification)."""
        if self.time_left() <= 0:
            self.give_up(f"max_time ({self.max_time:g}s) reached")
        # retry_on / dont_retry judge a call that timed out or failed for good ("crash"); a rate
        # limit, an overloaded or unreachable server is waited out or passed on as before
        kind = "timeout" if e.kind == "timeout" else None if e.transient or e.unreachable else "crash"
        not_retried = self.node.retry.not_retried([kind]) if kind else None
        if not_retried:  # the next agent of its chain, else the task fails
            if not self.fall_back(e.message):
                self.calls_failed(f"not retried ({not_retried})")
            return
        if e.transient:
            self.p.transient_errors += 1
            delay = retry_delay(e, self.p.transient_errors)
            if self.p.transient_errors <= TRANSIENT_LIMIT and delay <= self.time_left():
                await self.wait(delay, f"{name}: {e.kind}")
                return
            why = (f"{self.p.transient_errors} transient agent errors in a row: {e.message}"
                   if self.p.transient_errors > TRANSIENT_LIMIT else e.message)
            if not self.fall_back(why):
                if self.p.transient_errors > TRANSIENT_LIMIT:
                    self.calls_failed()
                await self.wait(delay, f"{name}: {e.kind}")  # longer than the time left: ends the task
            return
        if e.final and self.fall_back(e.message):
            return
        self.p.failures += 1
        if self.p.failures > self.node.retry.max_retries or e.final:
            if not self.fall_back(e.message):
                self.calls_failed()
            return
        await self.wait(self.node.retry.delay(self.p.failures), f"{name}: {e.kind}")

    def calls_failed(self, why: str = "") -> None:
        """End a task whose last call failed and no agent is left: failed, whatever on_failure
        says (its fallback, partial and template outputs stand in for answers that failed
        verification, not for an answer that never came). `harnessc retry` takes it."""
        error = self.p.calls.story()
        if why:
            error = f"{why}; {error}" if error else why
        strategy = self.node.retry.on_failure
        if strategy in ("fallback", "partial", "template") and self.contract and self.contract.output:
            error += f" (on_failure {strategy} not applied: the last call produced no answer)"
        raise self.failed(error)

    def fall_back(self, why: str) -> bool:
        """Move the task to the next agent of its chain; False when there is none."""
        old = self.route.agent
        new = self.route.fall_back()
        if new is None:
            return False
        self.store.event("fallback", self.tid, agent=old, to=new, reason=why[:500])
        self.p.transient_errors = self.p.failures = 0
        return True

    async def keep_working(self, resp: Response) -> None:
        """No claim yet: the loop goes on with what it remembers, unless it is stuck (loop.py):
        then it climbs the recovery ladder."""
        seen = await self.loop.observe(self.p.agent, resp.text, [], [])
        end = answer_end("progress", resp, seen=seen)
        if seen.stuck:
            await self.stuck(seen, end)
        else:
            await self.log.finish(end)
        self.prompt, self.level = await self.next_prompt(), 0

    async def next_prompt(self) -> str:
        """The task's prompt, with a loop task's memory of its earlier iterations (its summary
        rewritten first when that is due; a memory.md.j2 that fails to render fails the task)."""
        if not self.loop:
            return self.base
        with self.timed("prompt"):
            await self.assist.summarize(self.loop)
            try:
                return self.loop.prompt(self.base)
            except planmod.TemplateProblem as e:
                raise self.failed(f"could not render the memory section: {e.span.path}:"
                                  f"{e.span.line}: {e.code}: {e.message}") from None

    async def succeed(self, resp: Response, verdict: Verdict) -> None:
        self.answer, self.output = resp.text, verdict.output
        seen = await self.loop.observe(self.p.agent, resp.text, [], verdict.checks, succeeded=True) \
            if self.loop else None
        end = answer_end("succeeded", resp, parsed=verdict.output, checks=verdict.checks, seen=seen,
                         answered_at=self.log.answered_at)
        if self.iso:
            await self.land(resp, verdict, end)
            return
        # shared tree: the work is there already
        state = TaskState.REVIEW if self.ctx.reviewed(self.node) else TaskState.SUCCEEDED

        async def commit() -> None:  # once its success is written
            if self.files and not self.loop:
                await self.files.end(text=resp.text)
            await self.ctx.git.commit(self.node, self.how_verified(verdict), self.p.iteration, self.route.agent,
                                      self.files)

        self.then = commit
        raise self.done(TaskEnd(state, output=verdict.output, fingerprint=self.node.fingerprint), end)

    async def land(self, resp: Response, verdict: Verdict, attempt: AttemptEnd) -> None:
        """An isolated task's verified change (`attempt`: its verified end): committed in its
        worktree, then landed on the integration branch (worktree/isolation.py). A conflict runs
        the task once more from the new commit; a second one blocks it, its change kept on its ref."""
        message = landingmod.message(self.tid, self.node.title, self.how_verified(verdict), self.p.iteration,
                                     self.route.agent, self.store.run_id or "")
        if errors := await self.guarded():  # what its checks changed: never lands
            await self.refine(resp, Verdict(claim=True, errors=errors))
            return
        try:
            await self.iso.commit(self.attempt, message)
            if self.ctx.reviewed(self.node):  # review: true - kept on its ref until approved
                result = await self.iso.hold(self.node, self.attempt, verdict.output)
                if result is None:
                    raise self.done(TaskEnd(TaskState.REVIEW, output=verdict.output,
                                            fingerprint=self.node.fingerprint), attempt)
            else:
                async with useredits.UserEdits.of(self.ctx).writing():  # the user's tree: harnessc's write
                    result = await self.iso.land(self.node, self.attempt, verdict.output, self.recheck(resp.text))
        except (GitFailed, OSError, IsolationError) as e:
            why = f"could not land its change: {e}"
            raise self.done(TaskEnd(TaskState.FAILED, error=why),
                            replace(attempt, status="rejected", errors=[why])) from None
        if isinstance(result, Landed):
            async def record() -> None:  # once its success is written: the landing is done
                self.iso.landed(self.node, result)

            self.then = record
            raise self.done(TaskEnd(TaskState.SUCCEEDED, output=verdict.output, fingerprint=self.node.fingerprint),
                            attempt)
        if isinstance(result, Tampered):  # a failed attempt: tried again in a fresh worktree, told why
            verdict.ok, verdict.errors = False, [result.why]
            self.p.calls.answered(True, [result.why])  # iteration() counted it as verified
            self.attempt = await self.open_attempt(base=self.attempt.base)
            await self.refine(resp, verdict)
            return
        why = conflict_text(result)
        if self.conflict is None:
            self.conflict = result
            await self.log.finish(replace(attempt, status="rejected", errors=[why]))
            self.store.event("conflict", self.tid, paths=result.paths[:200], why=result.why, tip=result.tip,
                             message=f"{why}; running it once more from {result.tip[:10]}")
            self.attempt = await self.open_attempt(base=result.tip)
            self.original = self.render()
            self.base = self.prompt = self.original + conflict_prompt(result)
            self.p.failures, self.level = 0, 0
            return
        ref = self.iso.blocked(self.node, self.attempt)
        error = (f"blocked: {why}, again after running once more from the new commit; its change is kept at "
                 f"{ref} (`git show {ref}`): merge it by hand, or `harnessc retry {self.tid}`")
        raise self.done(TaskEnd(TaskState.BLOCKED, error=error), replace(attempt, status="rejected", errors=[why]))

    def recheck(self, text: str):
        """The task's checks again, on the merged tree in its worktree: their errors."""
        async def run(workdir: Path) -> list[str]:
            verdict = await verify(self.node, self.contract, text, workdir, max(0.1, self.time_left()),
                                   floors=await self.floors())
            return verdict.errors
        return run

    def how_verified(self, verdict: Verdict) -> str:
        """For the commit message: what the result passed."""
        return (", ".join(verified_by(self.node, self.contract, verdict.checks))
                or "the agent's answer (no contract, promise or accept commands)")

    async def refine(self, resp: Response, verdict: Verdict) -> None:
        """A rejected claim: retry with a sharper prompt, escalate, or give up as on_failure says
        (a loop task that is stuck gives up)."""
        self.keep_best(verdict)
        self.p.failures += 1
        seen = await self.loop.observe(self.p.agent, resp.text, verdict.errors, verdict.checks) \
            if self.loop else None
        if (memory := getattr(self.ctx, "memory", None)) is not None:
            memory.rejected(self.node, resp.text, verdict.errors)
        rejected = answer_end("rejected", resp, parsed=verdict.parsed, errors=verdict.errors, checks=verdict.checks,
                              seen=seen)
        kinds = [*verdict.kinds, *(["tool_denied"] if resp.denials else [])]
        not_retried = self.node.retry.not_retried(kinds)  # retry_on / dont_retry: on_failure at once
        if self.p.failures > self.node.retry.max_retries or not_retried:
            # auto-routed tasks escalate whatever on_failure says; on_failure applies at the top
            escalates = self.node.retry.on_failure == "escalate" or self.node.routing.auto
            failed = f"{outcomes.plural(self.p.failures, 'failed verification')}: " + "; ".join(verdict.errors)
            if not_retried:
                failed = f"not retried ({not_retried}): {failed}"
            if escalates and self.escalate(failed):
                if self.loop:
                    rejected = replace(rejected, loop_state=self.loop.state())  # with the agent it escalated to
                await self.log.finish(rejected)
                self.prompt, self.level = await self.next_prompt(), 0
                return
            state, output, error, filled = self.on_failure()
            if not_retried:
                error = f"not retried ({not_retried}); {error}"
            raise self.done(TaskEnd(state, output=output, fingerprint=self.node.fingerprint, error=error,
                                    filled=filled), rejected)
        if seen and seen.stuck:
            await self.stuck(seen, rejected)
            self.prompt, self.level = await self.next_prompt(), 0
            return
        await self.log.finish(rejected)
        self.level = self.node.retry.level(self.p.failures)
        with self.timed("prompt"):
            self.prompt = planmod.render_refinement(self.ctx.plan, self.tid, await self.next_prompt(), self.level,
                                                    verdict.errors, resp.text, self.ctx.root)
        await self.wait(self.node.retry.delay(self.p.failures), "retry delay")

    def keep_best(self, verdict: Verdict) -> None:
        """Keep the rejected answer closest to the contract (fewest contract errors; on a tie
        the later one, which had the sharper prompt): a partial fallback starts from it."""
        if not isinstance(verdict.parsed, dict) or verdict.contract_errors is None:
            return
        if self.p.best_errors is None or verdict.contract_errors <= self.p.best_errors:
            self.p.best, self.p.best_errors = verdict.parsed, verdict.contract_errors

    async def stuck(self, seen: Seen, attempt: AttemptEnd) -> None:
        """A loop task found stuck (loop.py says which signal, with its evidence) climbs the
        recovery ladder one rung (recovery.py): a rewritten prompt, a stronger agent, then a
        human (the task is blocked) - or it fails, as its rungs say."""
        why = seen.stuck.reason.removeprefix("stuck: ")
        # before the attempt's end, so the alert (alerts.py) carries the signal's evidence
        self.store.event("stuck", self.tid, signal=seen.stuck.signal, reason=why[:500])
        ladder = self.loop.ladder
        rung = ladder.climb()
        if rung.kind == "explore" and self.iso is None:
            rung = ladder.climb()  # branch exploration needs worktrees (isolation: worktree): the next rung
        if rung.kind == "escalate" and self.route.next_agent is None:
            rung = ladder.climb()  # no stronger agent to go to: the next rung
        if rung.kind == "mutate":
            example = planmod.template_output(self.contract) if self.contract and self.contract.output else None
            self.base = self.loop.recovered_prompt = await self.assist.mutation(
                self.original, rung.mutation, why, attempt.raw or "", example, self.loop.iterations)
        elif rung.kind == "escalate":
            self.loop.escalated_to = self.route.next_agent
        self.loop.stuck.restart()  # the next rung gets stuck_after iterations of its own
        # saved with the attempt, in its commit: a run stopped from here on resumes past this rung
        await self.log.finish(replace(attempt, status="stuck", loop_state=self.loop.state()))
        self.store.event("recovery", self.tid, step=rung.kind, mutation=rung.mutation, reason=why[:500])
        if rung.kind == "explore":
            await self.ctx.explore(self, why)  # explore.py builds on this module: the run hands it over
            self.measure_in(self.attempt)  # the chosen branch's files were its evidence: not the next iteration's
        if rung.kind == "escalate":
            self.escalate(f"stuck: {why}")
        elif rung.kind == "human":
            raise self.done(TaskEnd(TaskState.BLOCKED, error=(
                f"blocked: stuck ({why}) after every recovery step (prompt rewrites: "
                f"{', '.join(ladder.rewrites_tried()) or 'none'}; agents: "
                f"{' > '.join(self.route.agents[:self.route.index + 1])}); tell the agent what to do differently "
                f"(`harnessc tell {self.tid} \"...\"`), then `harnessc retry {self.tid}`")))
        elif rung.kind == "give_up":
            self.give_up(f"{seen.stuck.reason} (after every recovery step)")

    def escalate(self, why: str) -> bool:
        """Move to the next stronger agent with the retry count reset; False at the top."""
        old = self.route.agent
        new = self.route.escalate()
        if new is None:
            return False
        if self.loop:
            self.loop.escalated_to = new  # kept with the loop state: a resumed run stays on it
        self.store.event("escalated", self.tid, agent=old, to=new, reason=why[:600])
        self.p.failures = self.p.transient_errors = 0
        return True

    async def wait(self, seconds: float, why: str) -> None:
        """Sleep before the next call; a wait past the task's remaining time ends the task
        now with the reason, instead of sleeping into its limit."""
        left = self.time_left()
        if seconds > left:
            if round(left, 1) <= 0:  # nothing left to wait in: the limit itself ended the task
                self.give_up(f"max_time ({self.max_time:g}s) reached")
            self.give_up(f"{why}: the next call would wait {seconds:.1f}s, past the {left:.1f}s left of "
                         f"max_time ({self.max_time:g}s)")
        await self.ctx.control.sleep(seconds, self.tid)

    # ------------------------------------------------------------------ endings

    def on_failure(self) -> tuple[str, Any, str, list[dict] | None]:
        """After max_retries of answers that failed verification: (final state, output, error,
        the fields filled from the contract) as on_failure says."""
        strategy = self.node.retry.on_failure or "retry"
        reason = self.p.calls.story()
        has_output = bool(self.contract and self.contract.output)
        if strategy in ("fallback", "partial") and has_output:
            output, filled = planmod.partial_output(self.contract, self.p.best)
            return TaskState.DEGRADED, output, f"degraded ({strategy}): {reason}", filled
        if strategy == "template" and has_output:
            output, filled = planmod.template_filled(self.contract)
            return TaskState.DEGRADED, output, f"degraded (template): {reason}", filled
        if strategy in ("fallback", "partial", "template"):
            return (TaskState.FAILED, None,
                    f"{reason} (on_failure {strategy}: the task has no contract output to fall back on)", None)
        if strategy == "escalate":
            return (TaskState.FAILED, None,
                    f"{reason} (on_failure escalate: no stronger agent left after '{self.route.agent}')", None)
        return TaskState.FAILED, None, reason, None

    def give_up(self, why: str) -> None:
        """End the task as failed at a limit (or stuck after every recovery step): why, then
        what its calls did in this run."""
        story = self.p.calls.story()
        raise self.failed(f"{why}; {story}" if story else why)

    def used_time(self) -> float:
        """Seconds the task has run in its round: in earlier runs, then in this one (pauses not counted)."""
        return self.limits.time_before + clock.monotonic() - self.t0

    def time_left(self) -> float:
        return self.max_time - self.used_time()


def conflict_text(conflict: Conflict) -> str:
    paths = ", ".join(conflict.paths[:10]) + (", ..." if len(conflict.paths) > 10 else "")
    if conflict.why == "merge":
        return f"its change does not merge onto the integration branch (conflicting paths: {paths})"
    return f"its checks fail on the integration branch merged with its change (paths changed on both: {paths})"


def conflict_prompt(conflict: Conflict) -> str:
    """What a task run again after a conflict is told: the paths and the other changes."""
    lines = ["", "", "## Conflict", "",
             "Your earlier change for this task conflicted with work that landed meanwhile; this worktree now "
             "holds that work. Do the task again on top of it.", "",
             "Conflicting paths: " + ", ".join(conflict.paths[:50])]
    if conflict.others:
        lines += ["", "The changes that landed meanwhile:", *(f"- {s}" for s in conflict.others[:20])]
    if conflict.errors:
        lines += ["", "The checks that failed on the merged tree:", *(e[:1500] for e in conflict.errors[:5])]
    return "\n".join(lines) + "\n"


def _committed(fut: asyncio.Future | None) -> bool:
    return fut is not None and fut.done() and not fut.cancelled() and fut.exception() is None
