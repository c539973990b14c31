"""Budgets: the run's max_cost_usd and each task's budget_usd, checked before every call.

The estimated cost of a call is reserved in the ledger before the call and settled with the
actual cost after, so calls in flight count; the ledger is kept across resumes until reset.
"""

from __future__ import annotations

from dataclasses import dataclass

from .state import StateStore


@dataclass
class Budget:
    store: StateStore
    run_limit: float | None  # USD, plan budget.max_cost_usd or --max-cost

    def estimate(self, node: dict, agent_cfg: dict, prompt: str) -> float:
        """Cost to reserve for one call: the compiler's estimate, else the agent's price."""
        est = (node.get("estimate") or {}).get("cost_usd")
        if est is not None:
            return float(est)
        price = agent_cfg.get("price") or {}
        if not price:
            return 0.0
        out_tokens = (node.get("estimate") or {}).get("output_tokens") or 1000
        return (len(prompt) / 4 * float(price.get("input", 0))
                + out_tokens * float(price.get("output", 0))) / 1_000_000

    def refuse(self, node: dict, cost: float) -> tuple[str, str] | None:
        """('run'|'task', message) when this call would exceed a budget, else None."""
        if self.run_limit is not None:
            spent = self.store.spent()
            if spent >= self.run_limit or spent + cost > self.run_limit:
                return "run", (f"run budget reached: ${spent:.4f} spent or reserved of "
                               f"${self.run_limit:.4f} (next call needs ~${cost:.4f})")
        task_limit = (node.get("limits") or {}).get("budget_usd")
        if task_limit is not None:
            spent = self.store.spent(node["id"])
            if spent >= task_limit or spent + cost > task_limit:
                return "task", (f"task budget reached: ${spent:.4f} of ${float(task_limit):.4f}")
        return None
