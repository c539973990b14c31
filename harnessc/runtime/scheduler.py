"""The scheduler: runs a compiled plan's tasks on asyncio, one task = iterations.

A task is ready when its dependencies succeeded, degraded or were done; ready tasks start in
priority then roadmap order, at most `jobs` at a time. A failed task skips its dependents
and independent work goes on (unless fail_fast). Each iteration: render, route, call,
verify; failed claims refine the prompt (levels 1-3) until max_retries, then on_failure.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import heapq
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .. import outcome as outcomes
from ..compiler.vocab import priority_rank
from ..outcome import RunOutcome
from ..workspace import Workspace, WorkspaceError
from . import plan as planmod
from . import reaper
from .agents.base import AgentError, Request
from .agents.errors import retry_delay
from .budget import Budget
from .cassettes import Cassettes
from .routing import AttemptState, route
from .state import TERMINAL_OK, StateError, StateStore
from .verify import verify
from .work import Work, plan_work

TRANSIENT_LIMIT = 5  # consecutive transient agent errors before the task fails
STOP_POLL = 0.2  # seconds between looks at .harness/stop


@dataclass
class RunOptions:
    jobs: int | None = None
    fail_fast: bool = False
    rerun: str | None = None  # stale | failed | all
    max_cost: float | None = None
    select: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    only: set[str] | None = None  # explicit task ids (harnessc retry)
    cassettes: str | None = None  # record | replay: every agent call (runtime/cassettes.py)


@dataclass
class RunResult:
    run_id: str
    outcome: RunOutcome  # status, exit code and message (harnessc/outcome.py decides them)
    tasks: list[dict]
    stale: list[str]
    elapsed: float
    cost_usd: float = 0.0  # spent or reserved by this run
    total_cost_usd: float = 0.0  # the project's ledger, across runs until `reset --all`

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
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid() % 100000:05d}"


class Runner:
    def __init__(self, root: Path, plan: dict, store: StateStore, opts: RunOptions,
                 listeners: list[Callable[[dict], None]] | None = None):
        self.root = root
        self.plan = plan
        self.store = store
        self.opts = opts
        self.nodes = {n["id"]: n for n in plan["nodes"]}
        self.children: dict[str, list[str]] = {i: [] for i in self.nodes}
        for n in plan["nodes"]:
            for d in n.get("depends_on") or []:
                if d in self.children:
                    self.children[d].append(n["id"])
        self.jobs = max(1, opts.jobs or int(plan.get("concurrency") or 4))
        limit = opts.max_cost if opts.max_cost is not None else (plan.get("budget") or {}).get("max_cost_usd")
        max_tokens = (plan.get("budget") or {}).get("max_tokens")
        self.budget = Budget(store, limit, int(max_tokens) if max_tokens is not None else None)
        self.agents: dict[str, Any] = {}
        self.stop_mode: str | None = None  # None | stop | abort
        self.halt: tuple[str, str] | None = None  # (outcome.BUDGET|FAIL_FAST, why): ends the run early
        self.wake = asyncio.Event()
        self._stop_event = asyncio.Event()  # wakes retry delays early
        self.workspace = Workspace(root)
        self.cassettes = Cassettes(self.workspace, opts.cassettes)
        self.running: dict[str, asyncio.Task] = {}
        self.live: dict[str, dict] = {}  # task id -> {"iteration", "agent"} for displays
        self.finished: list[str] = []  # task ids whose asyncio task ended, not yet processed
        self._system: str | None = None  # the system prompt: one per plan, rendered once
        self.targets: set[str] = set()
        self.stale: list[str] = []
        if listeners:
            store.listeners = listeners

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
        elif self.stop_mode is None:
            self.stop_mode = "stop"
            self.store.event("stop_requested", mode="stop", via=via)
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
            self.store.flush_mirror()  # events.jsonl lags the db by at most this poll
            await asyncio.sleep(STOP_POLL)

    def _check_state_file(self) -> None:
        """A state.db removed or replaced under the run ends it: nothing it saves would be read."""
        try:
            self.store.check_file()
        except StateError as e:
            if self.halt is None or self.halt[0] != outcomes.STATE_LOST:
                self.halt = (outcomes.STATE_LOST, str(e))
                self.request_stop("abort")

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake early when a stop is requested."""
        if seconds <= 0:
            return
        try:
            await asyncio.wait_for(self._stop_event.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    # ------------------------------------------------------------------ selection

    def idle_result(self) -> RunResult | None:
        """The result of a run with nothing to do (every selected task complete, or waiting
        for `retry`), decided before a run is recorded; None when there is work."""
        self.store.ensure_tasks(self.nodes, {i for i, n in self.nodes.items() if n.get("done")})
        rows = self.store.tasks()
        work = plan_work(self.plan, rows, self.opts.select, self.opts.exclude,
                         rerun=self.opts.rerun, only=self.opts.only)
        if not work.nothing_to_run(rows):
            return None
        self.targets, self.stale = work.targets, work.stale
        return self._result(0.0, (outcomes.NOTHING, None))

    def _prepare(self) -> Work:
        """Decide which tasks this run will execute (work.py) and set them to pending."""
        done = {i for i, n in self.nodes.items() if n.get("done")}
        self.store.ensure_tasks(self.nodes, done)
        rows = self.store.tasks()
        work = plan_work(self.plan, rows, self.opts.select, self.opts.exclude,
                         rerun=self.opts.rerun, only=self.opts.only)
        self.targets, self.stale = work.targets, work.stale
        with self.store.tx():
            for tid in work.todo:
                if rows[tid]["state"] != "pending":
                    self.store.set_state(tid, "pending")
        self.store.event("run_planned", tasks=len(work.todo), stale=self.stale)
        return work

    # ------------------------------------------------------------------ the loop

    async def run(self) -> RunResult:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            loop.add_signal_handler(signal.SIGTERM, lambda: self.request_stop("abort", via="SIGTERM"))
        except (NotImplementedError, RuntimeError):
            pass  # not the main thread (tests): the stop file still works
        watcher = asyncio.create_task(self._watch_stop_file())
        try:
            await self._schedule(self._prepare())
            self._check_state_file()  # a removal since the watcher's last look
        finally:
            watcher.cancel()
            await self._settle()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass
        return self._result(time.monotonic() - started)

    async def _settle(self) -> None:
        """Cancel and await the tasks still running when the loop ended early on an error
        (a state.db failure), so none is left with an exception nobody retrieved."""
        if self.running:
            for t in self.running.values():
                t.cancel()
            await asyncio.gather(*self.running.values(), return_exceptions=True)
            self.running.clear()

    async def _schedule(self, work: Work) -> None:
        state = {i: r["state"] for i, r in self.store.tasks().items()}
        pending = set(work.todo)
        waiting: dict[str, int] = {}
        heap: list[tuple] = []

        def key(tid: str) -> tuple:
            n = self.nodes[tid]
            return (priority_rank(n.get("priority")), n.get("order", 0), tid)

        def skip_dependents(tid: str, why: str) -> None:
            stack = [tid]
            while stack:
                for child in self.children[stack.pop()]:
                    if child in pending:
                        pending.discard(child)
                        waiting.pop(child, None)
                        state[child] = "skipped"
                        self.store.set_state(child, "skipped", error=why)
                        stack.append(child)

        # A dependency that cannot complete in this run skips its dependents before anything starts.
        for tid, why in work.blocked.items():
            pending.discard(tid)
            state[tid] = "skipped"
            self.store.set_state(tid, "skipped", error=why)
        for tid in pending:
            waiting[tid] = sum(d in pending for d in self.nodes[tid].get("depends_on") or [])
        for tid, c in waiting.items():
            if c == 0:
                heapq.heappush(heap, key(tid) + (tid,))

        # Event-driven: a task's done callback queues its id and sets `wake`; each wake-up
        # handles exactly the tasks that ended (no polling, no scan of the running set).
        def ended(t: asyncio.Task) -> None:
            self.finished.append(t.get_name())
            self.wake.set()

        while (heap or self.running) and self.stop_mode != "abort":
            while heap and len(self.running) < self.jobs and not self._halting():
                tid = heapq.heappop(heap)[-1]
                t = self.running[tid] = asyncio.create_task(self._run_task(tid), name=tid)
                t.add_done_callback(ended)
            if not self.running:
                break
            if not self.finished:
                self.wake.clear()
                await self.wake.wait()
            batch, self.finished = self.finished, []
            for tid in batch:
                t = self.running.pop(tid, None)
                if t is None:
                    continue
                self.live.pop(tid, None)
                try:
                    outcome = t.result()
                except asyncio.CancelledError:
                    outcome = "interrupted"
                except planmod.TemplateProblem as e:  # a retry's refine.md.j2 failed to render
                    outcome = "failed"
                    self.store.finish_task(tid, outcome, error=f"could not render the retry prompt: "
                                           f"{e.span.path}:{e.span.line}: {e.code}: {e.message}")
                pending.discard(tid)
                state[tid] = outcome
                if outcome in TERMINAL_OK:
                    for child in self.children[tid]:
                        if child in waiting:
                            waiting[child] -= 1
                            if waiting[child] == 0:
                                heapq.heappush(heap, key(child) + (child,))
                elif outcome == "failed":
                    skip_dependents(tid, f"dependency '{tid}' failed")
                    if self.opts.fail_fast and not self.halt:
                        self.halt = (outcomes.FAIL_FAST, f"stopped after '{tid}' failed (--fail-fast)")
                        self._stop_event.set()
        if self.running:  # abort: wait for the cancelled tasks to checkpoint
            await asyncio.gather(*self.running.values(), return_exceptions=True)
            self.running.clear()

    def _halting(self) -> bool:
        return self.stop_mode is not None or self.halt is not None

    # ------------------------------------------------------------------ one task

    def _agent(self, name: str):
        if name not in self.agents:
            cfg = (self.plan.get("agents") or {}).get(name)
            if cfg is None:
                if name != "rehearsal":
                    raise AgentError(f"agent '{name}' is not defined in harness.yaml")
                cfg = {"provider": "simulate"}
            self.agents[name] = (self.cassettes.agent(name, cfg), cfg)
        return self.agents[name]

    def _adopt_children(self, aid: int) -> int:
        """Child processes started from here on belong to attempt `aid` (see reaper.py)."""
        reaper.enter(self.store.proc_marker(aid), functools.partial(self.store.record_child, aid))
        return aid

    def _deps(self, node: dict) -> dict[str, dict]:
        if not node.get("depends_on"):
            return {}
        rows = self.store.tasks(list(node["depends_on"]))
        return {d: {"output": rows[d]["output"], "state": rows[d]["state"], "error": rows[d]["error"]}
                if d in rows else {"output": None, "state": "pending", "error": None}
                for d in node.get("depends_on") or []}

    async def _run_task(self, tid: str) -> str:
        node = self.nodes[tid]
        store = self.store
        contract = (self.plan.get("contracts") or {}).get(node.get("contract") or "")
        limits = node.get("limits") or {}
        retry = node.get("retry") or {}
        max_retries = int(retry.get("max_retries", 2))
        delays = list(retry.get("delays") or [0])
        max_iter = limits.get("max_iterations")
        max_time = float(limits.get("max_time") or 3600)
        stuck_after = int(limits.get("stuck_after") or 3)
        t0 = time.monotonic()
        st = AttemptState()
        try:
            base = planmod.render_prompt(self.plan, tid, self._deps(node), self.root)
        except Exception as e:  # a template problem is this task's failure, not the run's
            store.finish_task(tid, "failed", error=f"could not render the prompt: {e}")
            return "failed"
        if self._system is None:
            try:
                self._system = planmod.render_system(self.plan, self.root)
            except Exception:
                self._system = ""
        system = self._system
        prompt, level = base, 0
        best: Any = None  # the last parsed JSON object, for partial fallbacks
        same_text: list[str] = []
        # The attempt's writes go through the store's group commit: `await`ing one means it is
        # durable (the attempt row before the call; result + final state in one transaction).
        aid = None
        begin: asyncio.Future | None = None  # the last begin_attempt queued
        closing: asyncio.Future | None = None  # the last finish_attempt queued
        closing_aid, closing_final = None, False

        async def finish(status: str, **kw: Any) -> None:
            nonlocal aid, closing, closing_aid, closing_final
            closing_aid, closing_final = aid, bool(kw.get("final_state"))
            closing = store.defer(functools.partial(store.finish_attempt, aid, tid, status, **kw))
            await closing
            aid = None

        try:
            while True:
                if self._halting():
                    store.set_state(tid, "pending")
                    return "interrupted"
                if max_iter is not None and st.iteration >= int(max_iter):
                    return self._give_up(tid, node, contract, best,
                                         f"max_iterations ({max_iter}) reached without a verified result",
                                         exhausted=False)
                left = max_time - (time.monotonic() - t0)
                if left <= 0:
                    return self._give_up(tid, node, contract, best,
                                         f"max_time ({max_time:g}s) reached", exhausted=False)
                try:
                    name = route(node, st)
                    agent, cfg = self._agent(name)
                except AgentError as e:
                    store.finish_task(tid, "failed", error=e.message)
                    return "failed"
                cost = self.budget.estimate(node, cfg, prompt)
                tokens = self.budget.estimate_tokens(node, cfg, prompt, system)
                refusal = self.budget.refuse(node, cost, sum(tokens))
                if refusal:
                    scope, msg = refusal
                    if scope == "run":
                        if not self.halt:
                            self.halt = (outcomes.BUDGET, msg)
                            self._stop_event.set()
                            store.event("budget_exhausted", tid, message=msg)
                        store.set_state(tid, "pending")
                        return "interrupted"
                    store.finish_task(tid, "failed", error=msg)
                    return "failed"
                st.iteration += 1
                self.live[tid] = {"iteration": st.iteration, "agent": name}
                phash = hashlib.sha256(prompt.encode()).hexdigest()
                begin = store.defer(functools.partial(
                    store.begin_attempt, tid, st.iteration, level, name, prompt, phash, cost,
                    start_task=st.iteration == 1, reserve_tokens=tokens))
                aid = self._adopt_children(await begin)
                req = Request(task_id=tid, prompt=prompt, system=system, contract=contract,
                              output_schema=(contract or {}).get("json_schema") if (contract or {}).get("output") else None,
                              promise=node.get("completion_promise"), iteration=st.iteration,
                              timeout=left, max_tokens=cfg.get("max_tokens"), root=self.root)
                try:
                    resp = await agent.call(req)
                except AgentError as e:
                    st.last_agent = name
                    await finish("error", raw=e.stderr or None, errors=[e.message], **e.charged())
                    if e.transient:
                        st.transient_errors += 1
                        if st.transient_errors > TRANSIENT_LIMIT:
                            return self._give_up(tid, node, contract, best,
                                                 f"{st.transient_errors} transient agent errors in a row: {e.message}")
                        await self._sleep(retry_delay(e, st.transient_errors))
                        continue
                    st.failures += 1
                    st.errors = [e.message]
                    if st.failures > max_retries or e.final:
                        return self._give_up(tid, node, contract, best, e.message)
                    await self._sleep(float(delays[min(st.failures - 1, len(delays) - 1)]))
                    continue
                st.transient_errors = 0
                st.last_agent = name
                verdict = await verify(node, contract, resp.text, self.root,
                                       max(0.1, max_time - (time.monotonic() - t0)))
                usage = dict(input_tokens=resp.usage.input_tokens,
                             output_tokens=resp.usage.output_tokens, cost_usd=resp.cost_usd,
                             latency=resp.latency)
                if not verdict.claim:
                    same_text = (same_text + [resp.text])[-stuck_after:]
                    if len(same_text) >= stuck_after and len(set(same_text)) == 1:
                        await finish("stuck", raw=resp.text, **usage)
                        return self._give_up(
                            tid, node, contract, best,
                            f"stuck: {outcomes.plural(stuck_after, 'iteration')} in a row with identical output and no claim",
                            exhausted=False)
                    await finish("progress", raw=resp.text, **usage)
                    prompt, level = base, 0
                    continue
                same_text = []
                if verdict.ok:
                    await finish("succeeded", raw=resp.text, parsed=verdict.output,
                                 checks=verdict.checks, final_state="succeeded",
                                 output=verdict.output, fingerprint=node.get("fingerprint"),
                                 **usage)
                    return "succeeded"
                if isinstance(verdict.parsed, dict):
                    best = verdict.parsed
                st.failures += 1
                st.errors = verdict.errors
                if st.failures > max_retries:
                    outcome, output, error = self._fallback(node, contract, best, verdict.errors)
                    await finish("rejected", raw=resp.text, parsed=verdict.parsed,
                                 errors=verdict.errors, checks=verdict.checks,
                                 final_state=outcome, output=output,
                                 fingerprint=node.get("fingerprint"), error=error, **usage)
                    return outcome
                await finish("rejected", raw=resp.text, parsed=verdict.parsed,
                             errors=verdict.errors, checks=verdict.checks, **usage)
                level = min(st.failures, 3)
                prompt = planmod.render_refinement(self.plan, tid, base, level, verdict.errors,
                                                   resp.text, self.root)
                await self._sleep(float(delays[min(st.failures - 1, len(delays) - 1)]))
        except asyncio.CancelledError:
            # Abort: the attempt in flight is interrupted; the task goes back to pending. A
            # write that committed after the cancel was requested still counts.
            if begin is not None and _committed(begin):
                aid = begin.result()
            if aid is not None and aid == closing_aid and closing is not None and _committed(closing):
                if closing_final:
                    raise  # the task's end is durable: leave it as committed
                aid = None
            if aid is not None:
                store.finish_attempt(aid, tid, "interrupted", raw=None, errors=["aborted"])
            store.set_state(tid, "pending")
            raise

    def _fallback(self, node: dict, contract: dict | None, best: Any,
                  errors: list[str]) -> tuple[str, Any, str | None]:
        """After max_retries: (final state, output, error) as on_failure says."""
        strategy = (node.get("retry") or {}).get("on_failure") or "retry"
        tries = int((node.get("retry") or {}).get("max_retries", 2)) + 1
        reason = f"{outcomes.plural(tries, 'attempt')} failed verification; last: " + "; ".join(errors)[:2000]
        has_output = bool(contract and contract.get("output"))
        if strategy in ("fallback", "partial") and has_output:
            return "degraded", planmod.partial_output(contract, best), f"degraded ({strategy}): {reason}"
        if strategy == "template" and has_output:
            return "degraded", planmod.template_output(contract), f"degraded (template): {reason}"
        if strategy in ("fallback", "partial", "template"):
            return "failed", None, f"{reason} (on_failure {strategy}: the task has no contract output to fall back on)"
        if strategy == "escalate":
            return "failed", None, f"{reason} (escalation needs routing (not yet available))"
        return "failed", None, reason

    def _give_up(self, tid: str, node: dict, contract: dict | None, best: Any, why: str,
                 exhausted: bool = True) -> str:
        """Finish a task that ran out of attempts (on_failure applies) or hit a limit (fails)."""
        if exhausted:
            state, output, error = self._fallback(node, contract, best, [why])
        else:
            state, output, error = "failed", None, why
        self.store.finish_task(tid, state, output=output,
                               fingerprint=node.get("fingerprint") if state != "failed" else None,
                               error=error)
        return state

    # ------------------------------------------------------------------ the end

    def _result(self, elapsed: float, ending: tuple[str, str | None] | None = None) -> RunResult:
        rows = self.store.tasks()
        tasks = [task_summary(rows[t]) for t in sorted(self.targets, key=lambda i: self.nodes[i].get("order", 0))
                 if t in rows]
        states = [t["state"] for t in tasks]
        run_id = self.store.run_id or ""
        return RunResult(run_id, outcomes.run_outcome(states, *(ending or self._ending())), tasks, self.stale,
                         elapsed, cost_usd=self.store.run_spent(run_id),
                         total_cost_usd=self.store.spent())

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


def _committed(fut: asyncio.Future) -> bool:
    return fut.done() and not fut.cancelled() and fut.exception() is None


def task_summary(row: dict) -> dict:
    dur = None
    if row.get("started_at") and row.get("finished_at") and row["finished_at"] >= row["started_at"]:
        dur = round(row["finished_at"] - row["started_at"], 3)
    return {"id": row["id"], "state": row["state"], "attempts": row["attempts"],
            "iterations": row["iterations"], "agent": row["agent"], "tokens": row["tokens"],
            "cost_usd": round(row["cost_usd"] or 0.0, 6), "duration": dur, "error": row["error"],
            "run_id": row["run_id"]}


def write_results(workspace: Workspace, result: RunResult, run: dict | None) -> Path:
    """.harness/runs/<run-id>/run_results.json, like dbt's."""
    path = workspace.run_results(result.run_id)
    data = {"run_id": result.run_id, "status": result.status, "exit_code": result.exit_code,
            "message": result.message, "elapsed": round(result.elapsed, 3), "stale": result.stale,
            "run": run, "results": result.tasks}
    # Indented, one result per line: readable, and each line is encoded by the C encoder
    # (an indented dump of thousands of results costs more than running them).
    results = data.pop("results")
    head = json.dumps(data, indent=2, sort_keys=True, default=str)
    rows = ",\n".join("    " + json.dumps(r, sort_keys=True, default=str) for r in results)
    text = head[:-2] + ',\n  "results": [' + (f"\n{rows}\n  ]" if rows else "]") + "\n}\n"
    workspace.write_atomic(path, text)
    return path
