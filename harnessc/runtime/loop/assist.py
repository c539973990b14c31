"""Assist calls: a cheap agent writing text for a loop task - the instructions of a prompt
mutation (recovery.py) or the running summary of its memory (memory.py) - with the
deterministic text as the fallback.

harness.yaml names the agents (`loop.recovery.mutation_agent`, `loop.context.summary_agent`;
plan.assists). A call renders its prompt from a package template (mutation.md.j2,
summary.md.j2; a project's `templates:` overrides them like the others), reserves its
estimated cost through the run's Budget (it counts against the run's and the task's), runs
in one of the agent's slots within a time limit, is settled in the ledger and recorded as an
`assist` event (purpose, agent, status, cost, tokens). Whatever goes wrong - the template, an
open breaker, the budget, the call, an empty or oversized answer - the deterministic text is
used and the event says why: an assist call never fails its task.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any, Callable

from ...estimates import CHARS_PER_TOKEN
from ...planfile import Assists, PlanNode
from ...providers import AgentConfig
from .. import clock
from .. import plan as planmod
from ..agents.base import AgentError, Request, Response
from .recovery import HEADS, STRATEGIES, mutate

if TYPE_CHECKING:
    from ..context import TaskContext
    from .loop import TaskLoop

MUTATION_CHARS = 3000  # the most a mutation agent's instructions may take (it is asked for half)
TASK_PROMPT_CHARS = 12_000  # of the task's prompt shown to a mutation agent
LAST_OUTPUT_CHARS = 1500  # of the stuck output shown to a mutation agent
TIMEOUT = 120.0  # seconds for one assist call when its agent sets no `timeout:`
GRACE = 10.0  # past the time limit the agent enforces itself, the call is abandoned
BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
SPLIT = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")  # told in its event


class Fallback(Exception):
    """Why an assist gave no text (the deterministic one is used)."""


class Assistant:
    """One task's assist calls; `mutation()` and `summarize()` never raise."""

    def __init__(self, ctx: "TaskContext", node: PlanNode, time_left: Callable[[], float]):
        self.ctx, self.node, self.time_left = ctx, node, time_left
        self.assists: Assists = ctx.plan.assists or Assists()

    # ------------------------------------------------------------------ the two uses

    async def mutation(self, prompt: str, mutation: str, why: str, last_output: str, example: Any = None,
                       iteration: int = 0) -> str:
        """The stuck task's prompt under new instructions (recovery.mutate): the mutation
        agent's, else the fixed ones. The evidence and the task's prompt are kept either way."""
        head = None
        if self.assists.mutation_agent:
            shown = prompt if len(prompt) <= TASK_PROMPT_CHARS else prompt[:TASK_PROMPT_CHARS] + "\n[... cut]"
            variables = {"mutation": mutation, "strategy": STRATEGIES[mutation], "why": why,
                         "last_output": last_output.strip()[-LAST_OUTPUT_CHARS:], "fallback": HEADS[mutation],
                         "task_prompt": shown, "max_chars": MUTATION_CHARS // 2}
            head = await self.ask("mutation", self.assists.mutation_agent, iteration, MUTATION_CHARS,
                                  MUTATION_CHARS // 4, variables)
        return mutate(prompt, mutation, why, last_output, example, head=head)

    async def summarize(self, loop: "TaskLoop") -> None:
        """When it is due (every `summarize_every` iterations), the summary agent rewrites the
        task's running summary from the old one and the iterations that left the window since;
        saved at once. Otherwise, or when it fails, the summary stays extractive."""
        memory = loop.memory
        if not (self.assists.summary_agent and memory.summary_due(loop.iterations)) or self.ctx.control.halting():
            return  # a stopping run leaves it due: the resumed run writes it
        cap = memory.settings.max_summary_tokens
        variables = {"summary": list(memory.summary), "iteration": loop.iterations, "max_words": cap // 2,
                     "iterations": [dict(e, score=f"{e.get('score', 0):.2f}") for e in memory.unsummarized]}
        text = await self.ask("summary", self.assists.summary_agent, loop.iterations, cap * CHARS_PER_TOKEN, cap,
                              variables)
        if text is None:
            memory.keep_extractive()
        else:
            lines = [BULLET.sub("", line).strip() for line in text.splitlines()]
            memory.rewrite_summary([line for line in lines if line], loop.iterations, self.assists.summary_agent)
        await self.ctx.store.defer(lambda: self.ctx.store.save_loop_memory(self.node.id, memory.data()))

    # ------------------------------------------------------------------ one call

    async def ask(self, kind: str, name: str, iteration: int, max_chars: int, max_tokens: int,
                  variables: dict) -> str | None:
        """The agent's answer (stripped, at most `max_chars`), or None after an `assist`
        event saying why not. `iteration`: the task's iterations so far (across runs)."""
        started = clock.monotonic()
        try:
            if self.ctx.control.halting():
                raise Fallback("the run is stopping")
            if self.time_left() <= 0:
                raise Fallback("the task's max_time is up")
            prompt = self._prompt(kind, variables)
            agent, cfg = self._agent(name)
            lid, reserved = self._reserve(kind, name, cfg, prompt, max_tokens)
        except Fallback as why:
            self.ctx.store.event("assist", self.node.id, purpose=kind, agent=name, status="fallback", reason=str(why),
                                 cost_usd=0.0, tokens=0)
            return None
        try:
            resp, error = await self._call(kind, name, agent, cfg, prompt, iteration, max_tokens)
        except asyncio.CancelledError:  # an abort: the call may have happened, it is charged its reservation
            self.ctx.store.finish_assist(lid, self.node.id, *reserved, purpose=kind, agent=name, status="interrupted")
            raise
        charged = (resp or error).charged()  # a failed call is charged what it reported using
        usage = charged.usage
        cost, tokens = (charged.cost_usd, usage.total) if usage is not None else (0.0, 0)
        text, why = self._answer(resp, error, max_chars)
        split = {col: getattr(usage, col) for col in SPLIT} if usage is not None else {}  # for the run's trace
        record = dict(purpose=kind, agent=name, status="written" if text else "fallback",
                      latency=round(clock.monotonic() - started, 3), **({"reason": why} if why else {}),
                      **({"error_kind": error.kind} if error is not None else {}), **split)
        self.ctx.store.finish_assist(lid, self.node.id, cost, tokens, **record)
        return text

    def _prompt(self, kind: str, variables: dict) -> str:
        try:
            return planmod.render_assist(self.ctx.plan, self.node.id, kind, variables, self.ctx.root)
        except planmod.TemplateProblem as e:
            raise Fallback(f"could not render {kind}.md.j2: {e.span.path}:{e.span.line}: {e.code}: {e.message}")

    def _agent(self, name: str) -> tuple[Any, AgentConfig]:
        try:
            agent, cfg = self.ctx.agent(name)
        except AgentError as e:
            raise Fallback(e.message) from None
        blocked = self.ctx.policy.health.blocked(name)
        if blocked is not None:
            raise Fallback(blocked.reason)
        return agent, cfg

    def _reserve(self, kind: str, name: str, cfg: AgentConfig, prompt: str, max_tokens: int) -> tuple[int, tuple[float, int]]:
        """The call's estimated cost and tokens, held in the ledger (its row, and the figures);
        Fallback past a budget."""
        cost, tokens = self.ctx.policy.budget.estimate_assist(cfg, prompt, max_tokens)
        refusal = self.ctx.policy.budget.refuse(self.node, cost, tokens)
        if refusal:
            self.ctx.policy.health.release(name)
            raise Fallback(refusal[1])
        return self.ctx.store.begin_assist(self.node.id, kind, name, cost, tokens), (cost, tokens)

    async def _call(self, kind: str, name: str, agent: Any, cfg: AgentConfig, prompt: str, iteration: int,
                    max_tokens: int) -> tuple[Response | None, AgentError | None]:
        timeout = max(0.1, min(cfg.timeout or TIMEOUT, self.time_left()))
        request = Request(task_id=self.node.id, prompt=prompt, purpose=kind, iteration=iteration, timeout=timeout,
                          max_tokens=min(cfg.max_tokens or max_tokens, max_tokens), root=self.ctx.root)
        async with self.ctx.policy.throttle.slot(name) as call:
            try:
                resp = await asyncio.wait_for(agent.call(request), timeout + GRACE)
                call.answered = True
            except asyncio.TimeoutError:
                call.error = AgentError(f"agent '{name}': no answer within {timeout + GRACE:g}s", kind="timeout")
            except AgentError as e:
                call.error = e
        self.ctx.policy.health.record(name, call.error)
        return (None, call.error) if call.error else (resp, None)

    @staticmethod
    def _answer(resp: Response | None, error: AgentError | None, max_chars: int) -> tuple[str | None, str | None]:
        """(the text to use, None) or (None, why it cannot be used)."""
        if resp is None:
            return None, f"{error.kind}: {error.message}"[:500]
        text = resp.text.strip()
        if not text:
            return None, "empty answer"
        if len(text) > max_chars:
            return None, f"answer of {len(text)} characters is over the {max_chars}-character cap"
        return text, None
