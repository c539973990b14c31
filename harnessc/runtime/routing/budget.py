"""Budgets: the run's max_cost_usd and max_tokens and each task's budget_usd, checked before
every call. A task's budget counts what it spent since it last started afresh (its first
run, `retry`, `--rerun`, `reset`): an earlier round's spending does not fail its retry.

The estimated cost and tokens of a call are reserved before the call and settled with the
actual figures after, so calls in flight count; both are kept across resumes until reset
(cost in the ledger; tokens in the attempts' token columns, which hold the reservation
until the attempt finishes). An assist call (a cheap agent writing a prompt mutation or a
summary, assist.py) is reserved and settled the same way, in its ledger row. A call a
killed run cut off is settled on resuming as cost unknown (StateStore.recover): it counts
in no cost sum, its tokens stay reserved.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...estimates import estimate_tokens
from ...outcome import BudgetStop
from ...planfile import PlanNode
from ...providers import AgentConfig
from ..agents.base import Usage, price_cost
from ..store.state import StateStore

DEFAULT_OUTPUT_TOKENS = 1000  # reserved for a call's answer when nothing better is known


@dataclass
class Budget:
    store: StateStore
    run_limit: float | None  # USD, plan budget.max_cost_usd or --max-cost
    token_limit: int | None = None  # plan budget.max_tokens: tokens for the whole run
    refused: str | None = field(default=None, init=False)  # "cost" | "tokens": the run budget that refused a call

    def estimate(self, node: PlanNode, agent_cfg: AgentConfig, prompt: str) -> float:
        """Cost to reserve for one call: the compiler's estimate, else the agent's price."""
        if node.estimate is not None and node.estimate.cost_usd is not None:
            return float(node.estimate.cost_usd)
        return price_cost(agent_cfg, Usage(estimate_tokens(prompt), _output_tokens(node)))

    def estimate_tokens(self, node: PlanNode, agent_cfg: AgentConfig, prompt: str, system: str = "") -> tuple[int, int]:
        """(input, output) tokens to reserve for one call: the prompt's size, and the
        compiler's output estimate capped by the agent's max_tokens."""
        out = _output_tokens(node)
        if agent_cfg.max_tokens:
            out = min(out, agent_cfg.max_tokens)
        return estimate_tokens(system + prompt), out

    def estimate_assist(self, agent_cfg: AgentConfig, prompt: str, output_tokens: int) -> tuple[float, int]:
        """(USD, tokens) to reserve for an assist call (runtime/loop/assist.py): its prompt and at
        most `output_tokens` of answer, at the assist agent's price."""
        tokens_in = estimate_tokens(prompt)
        return price_cost(agent_cfg, Usage(tokens_in, output_tokens)), tokens_in + output_tokens

    def refuse(self, node: PlanNode, cost: float, tokens: int = 0) -> tuple[str, str] | None:
        """('run'|'task', message) when this call would exceed a budget, else None; ('wait',
        message) when only what calls in flight reserved stands in its way (they settle at what
        they cost, mostly less than reserved: the call asks again then, and the run is not
        stopped for money it has not spent)."""
        if self.run_limit is not None:
            spent = self.store.spent()
            if spent >= self.run_limit or spent + cost > self.run_limit:
                if self.store.settled() + cost <= self.run_limit:
                    return "wait", (f"waiting for calls in flight to settle: ${spent:.4f} spent or reserved of "
                                    f"${self.run_limit:.4f} (next call needs ~${cost:.4f})")
                self.refused = "cost"
                return "run", (f"run budget reached: ${spent:.4f} spent or reserved of "
                               f"${self.run_limit:.4f} (next call needs ~${cost:.4f})")
        if self.token_limit is not None:
            used = self.store.tokens_spent()
            if used >= self.token_limit or used + tokens > self.token_limit:
                self.refused = "tokens"
                return "run", (f"token budget reached: {used} tokens used or reserved of "
                               f"{self.token_limit} (next call needs ~{tokens})")
        task_limit = node.limits.budget_usd
        if task_limit is not None:
            spent = self.store.spent_this_round(node.id)
            if cost > task_limit:
                return "task", (f"task budget too small for one call: ~${cost:.4f} needed, the task's "
                                f"budget is ${float(task_limit):.4f} (raise budget: for it, or route it "
                                "to a cheaper agent)")
            if spent >= task_limit or spent + cost > task_limit:
                return "task", (f"task budget reached: ${spent:.4f} of ${float(task_limit):.4f} spent or "
                                f"reserved since it started afresh (next call needs ~${cost:.4f})")
        return None

    def stop(self, left: list[PlanNode]) -> BudgetStop | None:
        """Which run budget stopped the run, with what the `left` tasks would need past it."""
        if self.refused == "cost" and self.run_limit is not None:
            estimates = [n.estimate.cost_usd for n in left if n.estimate and n.estimate.cost_usd is not None]
            return BudgetStop("cost", self.run_limit, self.store.spent() + sum(estimates))
        if self.refused == "tokens" and self.token_limit is not None:
            estimates = [n.estimate.input_tokens + n.estimate.output_tokens for n in left if n.estimate]
            return BudgetStop("tokens", self.token_limit, self.store.tokens_spent() + sum(estimates))
        return None


def _output_tokens(node: PlanNode) -> int:
    return int((node.estimate.output_tokens if node.estimate else None) or DEFAULT_OUTPUT_TOKENS)
