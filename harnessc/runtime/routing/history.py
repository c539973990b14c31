"""History: how each agent has done on each class of task, from every run in state.db.

An attempt that made a claim counts once: succeeded (its verification passed) or rejected.
Outcomes are kept per (agent, complexity) and per (agent, contract), with the cost. The
router reads `expected_success`: for each of the two classes, the observed rate smoothed
towards a prior (from the agent's tier against the tier the task needs) by PRIOR_WEIGHT
pseudo-attempts, so a few results do not swing it and enough of them outweigh the prior;
the lower of the two counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...planfile import Plan, PlanNode
from ..store.state import StateStore

PRIOR_WEIGHT = 4.0  # pseudo-attempts behind the tier prior


@dataclass
class Tally:
    attempts: int = 0
    successes: int = 0
    cost_usd: float = 0.0

    def add(self, ok: bool, cost: float) -> None:
        self.attempts += 1
        self.successes += int(ok)
        self.cost_usd += cost

    @property
    def rate(self) -> float | None:
        return self.successes / self.attempts if self.attempts else None


class History:
    def __init__(self, store: StateStore, plan: Plan):
        self.nodes = {n.id: n for n in plan.nodes}
        self.by_complexity: dict[tuple[str, str], Tally] = {}
        self.by_contract: dict[tuple[str, str], Tally] = {}
        for agent, task_id, status, cost in store.claims():
            node = self.nodes.get(task_id)
            if node is not None:
                self.record(agent, node, status == "succeeded", cost or 0.0)

    def record(self, agent: str, node: PlanNode, ok: bool, cost: float) -> None:
        self.by_complexity.setdefault((agent, node.complexity), Tally()).add(ok, cost)
        if node.contract:
            self.by_contract.setdefault((agent, node.contract), Tally()).add(ok, cost)

    def expected_success(self, agent: str, node: PlanNode, prior: float) -> float:
        """The chance `agent` gets a verified result on `node`, prior and history combined."""
        # Both classes must vouch for the agent: a contract it handles well on easy tasks
        # says nothing about this one being hard, and the other way round.
        tallies = [self.by_complexity.get((agent, node.complexity))]
        if node.contract:
            tallies.append(self.by_contract.get((agent, node.contract)))
        return min((t.successes + prior * PRIOR_WEIGHT) / (t.attempts + PRIOR_WEIGHT) if t else prior
                   for t in tallies)

    def table(self) -> list[dict]:
        """For `harnessc stats`: one row per (agent, complexity), then per (agent, contract)."""
        rows = []
        for kind, tallies in (("complexity", self.by_complexity), ("contract", self.by_contract)):
            # a plan's task may have no complexity or contract, a damaged attempt no agent: None sorts first
            for (agent, key), t in sorted(tallies.items(), key=lambda kv: tuple((k is not None, k or "") for k in kv[0])):
                rows.append({"agent": agent, kind: key, "attempts": t.attempts, "successes": t.successes,
                             "success_rate": round(t.rate or 0.0, 3),
                             "cost_per_success": round(t.cost_usd / t.successes, 6) if t.successes else None})
        return rows
