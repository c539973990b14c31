"""Best-of-N: `approaches: N` runs N approaches of one task at once, each an `ApproachRun` (a
TaskRun of its own) in its own git worktree (.harness/worktrees/<run>/<n>-<k>), and lands one.

* Approach k gets HARNESSC_APPROACH=k, an approach line at the end of its prompt, and starts
  on the k-th of the task's own agents, cycling (`agent: codex, claude` -> codex, claude,
  codex); it falls back and escalates along the rest of the task's route.
* Each is verified as a task is - its retries, refinements, recovery and iteration limits
  are its own - and then scored: `score:` runs in its worktree and the last line it prints
  is the score. A score command that fails, a last line that is not a number, or a score
  under `min_score` is a rejected claim: the approach refines and retries as after a failed
  accept check, and, out of retries, ends not verified with that reason.
* `select: first` lands the first approach that verifies and cancels the others (their
  agent processes are killed, their worktrees removed). `select: best` waits for all and
  lands the verified approach with the highest score; ties go to the cheaper, then the
  smaller diff, then the lower k. A landing conflict (worktree/isolation.py) moves on to the
  next verified approach; when none lands, the task is blocked with the first one's change
  kept on its ref.
* Budgets are shared: every call of every approach reserves its estimate before it starts
  (budget.py), so N approaches at once hold N reservations against the task's budget and
  the run's; a call past the task's budget ends that approach, not the others. A cancelled
  approach's calls are charged like any other (the task's cost and the scoreboard's).
* A task where no approach verifies ends as the best of their endings: degraded (on_failure
  fell back), else blocked, else failed, with every approach's reason.
* A run that stops or is killed while approaches run lands nothing for the task: it is
  pending again and its approaches start over on resume (worktrees and refs of the killed
  run are reconciled; a landing that committed counts once, isolation.py).

The scoreboard (approach, agent, verified, score, cost, diff size, selected, why) is kept in
state.db (scoreboard.py), for `harnessc log TASK` and `status --output json`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
from typing import Any

from ..gitcmd import GitFailed
from ..planfile import PlanNode
from ..providers import AgentConfig
from ..states import TaskState
from . import clock
from .agents.base import Request, Response
from .children import procs
from .context import TaskContext
from .iteration import AttemptLog, Progress, TaskRun, answer_end, conflict_text
from .loop.loop import TaskLoop
from .routing.router import Route
from .store import scoreboard
from .store.attempts import AttemptEnd, Ending, TaskEnd
from .verify import DEFAULT_ACCEPT_TIMEOUT, Verdict, fresh_pycache
from .worktree import landing as landingmod
from .worktree.isolation import Conflict, IsolationError, Landed, Tampered

# a task with no verified approach: the first of these any approach reached
ENDINGS = (TaskState.DEGRADED, TaskState.BLOCKED, TaskState.FAILED)


def approach_route(route: Route, own: list[str], k: int) -> Route:
    """Approach k's route: the k-th of the task's own agents first (cycling), then the rest
    of the task's route in its order."""
    usable = [a for a in own if a in route.agents]
    if len(usable) < 2:
        return Route(list(route.agents))
    first = usable[(k - 1) % len(usable)]
    return Route([first, *(a for a in route.agents if a != first)])


class ApproachLog(AttemptLog):
    """One approach's attempt rows: they are the task's (recorded, charged, counted), but its
    ending is the approach's own - handed to it, never written as the task's state (the
    coordinator decides that)."""

    def __init__(self, store: Any, approach: "ApproachRun"):
        super().__init__(store, approach.tid)
        self.approach = approach

    def write_begin(self, **kw: Any) -> int:
        return self.store.begin_attempt(self.tid, **{**kw, "start_task": False})

    def write_finish(self, attempt_id: int, end: AttemptEnd) -> None:
        # loop_state: the task's, one row; approaches do not resume each other's loops
        self.store.finish_attempt(attempt_id, self.tid, dataclasses.replace(end, loop_state=None, task=None))
        self.approach.cost += float(end.charge.cost_usd or 0.0)

    def write_end(self, ending: Ending) -> None:
        if ending.attempt is not None:
            self.write_finish(ending.attempt_id, ending.attempt)
        if ending.task is not None:  # (None: it would be pending again; the coordinator decides)
            self.approach.outcome_is(ending.task.state, ending.task.error, ending.task.output)


class ApproachRun(TaskRun):
    """Approach k of N: the task's iterations in worktree k, ending at its verification."""

    def __init__(self, ctx: TaskContext, node: PlanNode, route: Route, k: int, n: int):
        super().__init__(ctx, node, route)
        self.k, self.n = k, n
        self.log = ApproachLog(ctx.store, self)
        self.p = Progress()  # its iterations are its own (max_iterations is per approach)
        self.workdir = ctx.isolation.workdir(node, k)
        if self.loop:
            self.loop.close()
        self.loop = TaskLoop.of(self.workdir, ctx.plan, node, ctx.store, None)
        self.outcome: str | None = None  # verified | failed | degraded | blocked | skipped | interrupted | cancelled
        self.why: str | None = None
        self.output: Any = None
        self.text = ""  # the verified answer (its checks run again on a merged tree)
        self.score: float | None = None
        self.diff: int | None = None  # lines added + removed
        self.cost = 0.0
        self.verified_at: float | None = None

    async def run(self) -> Ending:
        """Open its worktree and iterate; the worktree stays (the coordinator lands or removes it)."""
        try:
            self.attempt = await self.open_attempt(k=self.k)
        except (GitFailed, OSError, IsolationError) as e:
            return self.failed(f"could not create its worktree: {e}").ending
        try:
            self.original = self.base = self.prompt = self.render()
        except Exception as e:  # a template problem is this approach's failure
            return self.failed(f"could not render the prompt: {e}").ending
        return await self.iterations()

    async def close_worktree(self, outcome: str) -> None:
        pass  # the coordinator's (Approaches.close)

    def render(self) -> str:
        return super().render() + approach_line(self.k, self.n)

    def request(self, cfg: AgentConfig) -> Request:
        return dataclasses.replace(super().request(cfg), approach=self.k)

    def outcome_is(self, state: str, error: str | None, output: Any = None) -> None:
        self.outcome, self.why, self.output = state, error, output

    # The task's state is the coordinator's (Approaches): an approach's ending is its own.

    def requeue(self, **extra: Any) -> None:
        pass  # "pending" after a cancel: the coordinator sets the task's state

    def save_time(self, used: float) -> None:
        pass  # the coordinator's clock saves the task's

    async def succeed(self, resp: Response, verdict: Verdict) -> None:
        """Verified: scored (a failed score is a rejected claim), its change committed on its
        ref, and the approach ends for the coordinator to select."""
        why = await self.scored()
        if why:
            verdict.ok, verdict.errors = False, [why]
            self.p.calls.answered(True, [why])  # iteration() counted it as verified
            await self.refine(resp, verdict)
            return
        if errors := await self.guarded():  # what its checks changed: never lands
            verdict.ok, verdict.errors = False, errors
            await self.refine(resp, verdict)
            return
        seen = await self.loop.observe(self.p.agent, resp.text, [], verdict.checks, succeeded=True) \
            if self.loop else None
        message = landingmod.message(self.tid, self.node.title, self.how_verified(verdict), self.p.iteration,
                                     self.route.agent, self.store.run_id or "")
        try:
            await self.iso.commit(self.attempt, message)
            self.diff = await asyncio.to_thread(diff_size, self.attempt)
        except (GitFailed, OSError, IsolationError) as e:
            why = f"could not commit its change: {e}"
            raise self.done(TaskEnd(TaskState.FAILED, error=why), answer_end("rejected", resp, errors=[why])) from None
        await self.log.finish(answer_end("succeeded", resp, parsed=verdict.output, checks=verdict.checks, seen=seen))
        self.outcome_is("verified", None, verdict.output)
        self.text, self.verified_at = resp.text, clock.monotonic()
        raise self.done(None)  # verified: the coordinator selects

    def how_verified(self, verdict: Verdict) -> str:
        text = super().how_verified(verdict)
        score = f", score {self.score:g}" if self.score is not None else ""
        return f"{text}; approach {self.k} of {self.n}{score}"

    async def scored(self) -> str | None:
        """Run the score command in the worktree: None when the approach passes (its score
        kept), else why it does not."""
        spec = self.node.approaches
        if spec is None or spec.score is None:
            return None
        res = self.remote.take_score() if self.remote is not None else None  # scored on the worker
        if res is None:
            res = await run_score(spec.score, self.workdir, self.tid, self.k, self.time_left())
        score, why = parse_score(res)
        if why:
            return why
        self.score = score
        if spec.min_score is not None and score < spec.min_score:
            return f"score {score:g} is below min_score {spec.min_score:g}"
        return None


def approach_line(k: int, n: int) -> str:
    return (f"\n\nApproach {k} of {n}: {n} independent attempts at this task run at once, each in its own "
            f"copy of the repository; work out your own solution here.\n")


async def run_score(cmd: Any, workdir: Any, task_id: str, k: int, time_left: float) -> procs.ProcResult:
    timeout = max(0.1, min(float(cmd.timeout or DEFAULT_ACCEPT_TIMEOUT), time_left))
    async with fresh_pycache() as pycache:  # verify.py: no bytecode an agent planted runs
        env = procs.child_env(extra={"HARNESSC_TASK": task_id, "HARNESSC_APPROACH": str(k), **pycache})
        return await procs.run(list(cmd.argv), cwd=workdir, timeout=timeout, stdin=None, env=env)


def parse_score(res: procs.ProcResult) -> tuple[float | None, str | None]:
    """(the score, None) from the command's last output line, or (None, why not)."""
    if not res.ok:
        tail = (res.stdout + res.stderr).strip()[-500:]
        return None, f"score command failed: {res.describe()}" + (f"\n{tail}" if tail else "")
    lines = [line.strip() for line in res.stdout.splitlines() if line.strip()]
    if not lines:
        return None, "score command printed nothing: its last output line must be a number"
    try:
        score = float(lines[-1])
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        return None, f"score command's last output line is not a number: {lines[-1][:200]!r}"
    return score, None


def diff_size(attempt: Any) -> int:
    """Lines added and removed by the approach's change (a binary file counts 1)."""
    if attempt.change is None:
        return 0
    out = attempt.git.run("diff", "--numstat", "--no-renames", attempt.base, attempt.change, worktree=False)
    total = 0
    for line in out.splitlines():
        added, removed = (line.split("\t") + ["", ""])[:2]
        total += (int(added) if added.isdigit() else 1) + (int(removed) if removed.isdigit() else 0)
    return total


class Approaches:
    """The N approaches of one task: run them, select one, land it, record the scoreboard."""

    def __init__(self, ctx: TaskContext, node: PlanNode, route: Route):
        self.ctx, self.node, self.tid, self.store = ctx, node, node.id, ctx.store
        self.spec = node.approaches
        n = self.spec.n
        self.runs = [ApproachRun(ctx, node, approach_route(route, self.spec.agents, k), k, n)
                     for k in range(1, n + 1)]
        self.selected: ApproachRun | None = None
        self.t0 = clock.monotonic()
        self.log = AttemptLog(ctx.store, node.id)  # the scheduler writes the task's ending through it
        self.tasks: dict[asyncio.Task, ApproachRun] = {}
        self.then: Any = None  # what follows the task's ending once written (the landing's record)

    def clock(self) -> None:
        """Every CLOCK_EVERY seconds (scheduler.py): the task's running time so far."""
        self.store.save_running_time(self.tid, self.runs[0].limits.time_before + clock.monotonic() - self.t0)

    async def run(self) -> Ending:
        """Run the approaches, select one, land it: the task's ending, which the scheduler
        writes, then calls `ended` (also when this raised)."""
        self.store.set_state(self.tid, TaskState.RUNNING)
        self.store.event("approaches_started", self.tid, n=len(self.runs), select=self.spec.select,
                         agents=[r.route.agent for r in self.runs])
        self.save()
        self.tasks = {asyncio.create_task(self.drive(r), name=f"{self.tid}#{r.k}"): r for r in self.runs}
        await self.race(self.tasks)
        return await self.finish()

    async def interrupted(self) -> None:
        """Abort: the approaches checkpoint, the task goes back to pending."""
        await _cancel(self.tasks)
        self.store.set_state(self.tid, TaskState.PENDING)

    async def ended(self, ending: Ending | None) -> None:
        """After the scheduler wrote the ending (None: it was not): the landing's record, then
        the approaches' worktrees go and the scoreboard is saved."""
        try:
            if ending is not None and self.then is not None:
                self.then()
        finally:
            await _cancel(self.tasks)
            for r in self.runs:
                await self.close(r)
            self.save()

    @staticmethod
    async def drive(run: ApproachRun) -> str:
        """One approach, as the scheduler drives a task: its ending written (its attempt's
        record; the outcome is its own, ApproachLog), then wound up."""
        written = None
        try:
            ending = await run.run()
            await run.log.end(ending)
            written = ending
            return ending.state
        except asyncio.CancelledError:
            await run.interrupted()
            raise
        finally:
            await run.ended(written)

    async def race(self, tasks: dict[asyncio.Task, ApproachRun]) -> None:
        """Run until all ended, or (select: first) one verified: then cancel the others."""
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                self.approach_ended(tasks[t], t)
            if self.spec.select == "first" and any(tasks[t].outcome == "verified" for t in done) and pending:
                for t in pending:
                    tasks[t].outcome_is(TaskState.CANCELLED,
                                        "cancelled: another approach verified first (select: first)")
                await _cancel({t: tasks[t] for t in pending})
                for t in pending:
                    self.store.event("approach_cancelled", self.tid, approach=tasks[t].k)
                pending = set()

    def approach_ended(self, run: ApproachRun, task: asyncio.Task) -> None:
        if task.cancelled():
            run.outcome = run.outcome or TaskState.CANCELLED
        elif task.exception() is not None:
            run.outcome_is(TaskState.FAILED, f"internal error: {type(task.exception()).__name__}: {task.exception()}")
        elif run.outcome is None:
            run.outcome_is(task.result(), run.why)
        self.store.event("approach_ended", self.tid, approach=run.k, outcome=run.outcome, agent=run.route.agent,
                         score=run.score, cost_usd=round(run.cost, 6), why=(run.why or "")[:500])
        self.save()

    def ranking(self) -> list[ApproachRun]:
        """The verified approaches, best first: first verified (select first), else highest
        score, then cheaper, then smaller diff, then lower k."""
        verified = [r for r in self.runs if r.outcome == "verified"]
        if self.spec.select == "first":
            return sorted(verified, key=lambda r: (r.verified_at or 0.0, r.k))
        return sorted(verified, key=lambda r: (-(r.score if r.score is not None else -math.inf), r.cost,
                                               r.diff or 0, r.k))

    async def finish(self) -> Ending:
        """Land the best verified approach (the next on a conflict), or end the task as the
        approaches' endings say."""
        if self.ctx.control.halting() and any(r.outcome in (TaskState.INTERRUPTED, TaskState.CANCELLED)
                                                for r in self.runs) \
                and self.spec.select == "best":
            return Ending(None, running_s=self.runs[0].used_time())
        ranking = self.ranking()
        if not ranking:
            if self.ctx.control.halting() and any(r.outcome == TaskState.INTERRUPTED for r in self.runs):
                return Ending(None, running_s=self.runs[0].used_time())
            return self.none_verified()
        if self.ctx.reviewed(self.node) and await self.ctx.isolation.hold(self.node, ranking[0].attempt,
                                                                          ranking[0].output) is None:
            run = self.selected = ranking[0]  # review: true - the best waits on its ref until approved
            run.outcome = TaskState.REVIEW
            return Ending(TaskEnd(TaskState.REVIEW, output=run.output, fingerprint=self.node.fingerprint))
        conflicts: list[tuple[ApproachRun, Conflict]] = []
        for run in ranking:
            try:
                result = await self.ctx.isolation.land(self.node, run.attempt, run.output, run.recheck(run.text))
            except (GitFailed, OSError, IsolationError) as e:
                return Ending(TaskEnd(TaskState.FAILED, error=f"could not land approach {run.k}'s change: {e}"))
            if isinstance(result, Landed):
                self.selected = run
                self.then = functools.partial(self.landed, run, result)
                return Ending(TaskEnd(TaskState.SUCCEEDED, output=run.output, fingerprint=self.node.fingerprint))
            if isinstance(result, Tampered):  # it never lands: the next verified approach may
                run.outcome, run.why = TaskState.FAILED, result.why
                continue
            run.why = conflict_text(result)
            conflicts.append((run, result))
            self.store.event("conflict", self.tid, approach=run.k, paths=result.paths[:200], why=result.why,
                             tip=result.tip, message=f"approach {run.k}: {run.why}")
        if not conflicts:  # every verified approach ran while the git directory was tampered with
            return self.none_verified()
        run, _ = conflicts[0]
        run.outcome = TaskState.BLOCKED
        ref = self.ctx.isolation.blocked(self.node, run.attempt)
        return Ending(TaskEnd(TaskState.BLOCKED, error=(
            f"blocked: every verified approach conflicts with the integration branch ({run.why}); approach "
            f"{run.k}'s change is kept at {ref} (`git show {ref}`): merge it by hand, or "
            f"`harnessc retry {self.tid}`")))

    def landed(self, run: ApproachRun, result: Landed) -> None:
        """Once the task's success is written: the landing is done, the approach selected."""
        self.ctx.isolation.landed(self.node, result)
        self.store.event("approach_selected", self.tid, approach=run.k, agent=run.route.agent,
                         score=run.score, sha=result.sha, message=(
                             f"approach {run.k} ({run.route.agent}) landed"
                             + (f" with score {run.score:g}" if run.score is not None else "")))

    def none_verified(self) -> Ending:
        reasons = "; ".join(f"approach {r.k} ({r.route.agent}): {(r.why or r.outcome or '?')[:400]}" for r in self.runs)
        for state in ENDINGS:
            ends = [r for r in self.runs if r.outcome == state]
            if ends or state == TaskState.FAILED:
                output = ends[0].output if ends and state == TaskState.DEGRADED else None
                return Ending(TaskEnd(state, output=output,
                                      fingerprint=self.node.fingerprint if state == TaskState.DEGRADED else None,
                                      error=f"no approach verified: {reasons}"[:4000]))
        return Ending(TaskEnd(TaskState.FAILED))

    async def close(self, run: ApproachRun) -> None:
        """Its worktree goes (the blocked one's ref stays; --keep-worktrees keeps a failed one)."""
        if run.attempt is None:
            return
        outcome = {"verified": "succeeded"}.get(run.outcome or "", run.outcome or "failed")
        await self.ctx.isolation.close(self.node, outcome, k=run.k)
        run.attempt = None

    # ------------------------------------------------------------------ the scoreboard

    def board(self) -> dict:
        return {"run_id": self.store.run_id, "select": self.spec.select,
                "score_command": " ".join(self.spec.score.argv) if self.spec.score else None,
                "min_score": self.spec.min_score,
                "approaches": [{"approach": r.k, "agent": r.p.agent or r.route.agent,
                                "state": r.outcome or TaskState.RUNNING, "verified": r.outcome == "verified"
                                or r is self.selected, "score": r.score, "cost_usd": round(r.cost, 6),
                                "diff_lines": r.diff, "selected": r is self.selected, "why": r.why}
                               for r in self.runs]}

    def save(self) -> None:
        scoreboard.save(self.store, self.tid, self.board())


async def _cancel(tasks: dict[asyncio.Task, Any]) -> None:
    """Cancel the approaches still running and wait for them to checkpoint (their agent
    processes are killed by procs.run on cancellation)."""
    live = [t for t in tasks if not t.done()]
    for t in live:
        t.cancel()
    if live:
        await asyncio.gather(*live, return_exceptions=True)
