"""`harnessc run --dry-run`: what a run would do, on which agent, at what estimated cost.

Reads the plan and state.db (never writes, takes no lock, calls no agent) and decides the
work exactly as a run would (work.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..outcome import NOTHING, money, plural, run_outcome
from ..planfile import Plan, PlanNode
from ..workspace import Workspace
from .growth.split import adopt
from .preflight import RunCheck, Usability, check_run
from .routing.router import Router
from .store.state import NoState, StateStore
from .work import Work, plan_work, row_state


@dataclass
class Preview:
    plan: Plan
    work: Work
    rows: dict[str, dict]
    budget: tuple[float, str] | None  # (USD, where it comes from)
    spent: float = 0.0  # the project's ledger so far
    router: Router = field(default_factory=Router)
    check: RunCheck | None = None  # the pre-flight of the tasks that would start
    subtasks: dict[str, list[str]] = field(default_factory=dict)  # split task -> its subtasks (earlier runs')

    def lines(self) -> list[str]:
        nodes = {n.id: n for n in self.plan.nodes}
        start = self.work.startable
        if self.work.nothing_to_run(self.rows):
            states = [row_state(nodes, self.rows, t) for t in sorted(self.work.targets)]
            out = ["dry run: " + run_outcome(states, NOTHING).headline()]
        else:
            out = [f"dry run: {plural(len(start), 'task')} would run (no agent is called, no run is recorded)"]
        if start:
            rows = [("task", "agent", "estimate", "max attempts")]
            for tid in start:
                n = nodes[tid]
                cost = _cost(n)
                if tid in self.subtasks:  # done once its subtasks are, without a call
                    rows.append((tid, "-", "no call", "0"))
                    continue
                rows.append((tid, self.router.route(n).agent,
                             money(cost) if cost is not None else "unknown", str(_attempts(n))))
            widths = [max(len(r[i]) for r in rows) for i in range(4)]
            for r in rows:
                out.append("  " + "  ".join(f"{c:{'>' if i >= 2 else '<'}{w}}"
                                             for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if not self.work.nothing_to_run(self.rows):
            out += [f"would skip: {tid} ({why})" for tid, why in self.work.blocked.items()]
        out += self._split_lines(nodes)
        out += [f"cannot afford one call, would fail without a call: {tid} (~{money(cost)} per call, "
                f"task budget {money(limit)}; raise its budget:)" for tid, cost, limit in _unaffordable(nodes, start)]
        if self.check is not None and self.check.refused:
            out += [f"would refuse to start: {line}" for line in self.check.problem_lines()]
        elif self.check is not None and self.check.warning():
            out.append(f"would warn: {self.check.warning()}")
        if self.work.stale:
            out.append(f"stale, left as they are (--rerun stale re-runs them): {', '.join(self.work.stale)}")
        if start:
            out.append(self._cost_line([nodes[t] for t in start if t not in self.subtasks]))
        if self.budget:
            out.append(f"budget: {money(self.budget[0])} ({self.budget[1]}), {money(self.spent)} spent so far")
        return out

    def _split_lines(self, nodes: dict[str, PlanNode]) -> list[str]:
        """What the split tasks that would run do (split: true): ask for subtasks, or wait for
        the subtasks an earlier run added."""
        out = []
        for tid in self.work.todo:
            if not nodes[tid].split:
                continue
            subs = self.subtasks.get(tid)
            if subs:
                out.append(f"split: {tid} is done when its subtasks are ({', '.join(subs)}; added by an "
                           "earlier run), without a call")
            else:
                out.append(f"split: {tid}'s first call asks {self.router.route(nodes[tid]).agent} for its "
                           "subtasks (split: true); they are added to roadmap.md and run, then it is done")
        return out

    @staticmethod
    def _cost_line(nodes: list[PlanNode]) -> str:
        costs = [_cost(n) for n in nodes]
        known = [(c, _attempts(n)) for c, n in zip(costs, nodes) if c is not None]
        once = sum(c for c, _ in known)
        most = sum(c * k for c, k in known)
        unknown = len(costs) - len(known)
        if not known:
            return "estimated cost: unknown (no price: on these tasks' agents)"
        line = (f"estimated cost: {money(once)} for one attempt each, up to {money(most)}"
                " if every retry is used")
        if unknown:
            line += f" ({plural(unknown, 'task')} without a price not counted: set price: on the agent)"
        return line


def _attempts(node: PlanNode) -> int:
    """Calls a task may make when every verification fails: 1 + max_retries."""
    return 1 + int(node.retry.max_retries)


def _unaffordable(nodes: dict[str, PlanNode], start: list[str]) -> list[tuple[str, float, float]]:
    """(task, one call's estimate, its budget) of each task whose budget is below one call
    (the run's budget.py refuses its first call; build warns HC450)."""
    out = []
    for tid in start:
        cost, limit = _cost(nodes[tid]), nodes[tid].limits.budget_usd
        if cost is not None and limit is not None and cost > float(limit):
            out.append((tid, cost, float(limit)))
    return out


def _cost(node: PlanNode) -> float | None:
    return node.estimate.cost_usd if node.estimate else None


def preview(root: Path, plan: Plan, select: list[str], exclude: list[str], rerun: str | None,
            max_cost: float | None, router: Router | None = None, replaying: bool = False) -> Preview:
    """Raises state.StateError for an unusable state.db, plan.PlanError for a bad selector."""
    rows: dict[str, dict] = {}
    kept, spent = None, 0.0
    try:
        store = StateStore(Workspace(root), create=False)
    except NoState:
        store = None
    if store is not None:
        try:
            rows, spent = store.tasks(), store.spent()
            try:
                kept = store.remembered_max_cost()
            except ValueError:  # no amount of USD: the run will forget it
                kept = None
        finally:
            store.close()
    subtasks = adopt(root, {n.id: n for n in plan.nodes})  # as the run sees split tasks (growth/)
    work = plan_work(plan, rows, select, exclude, rerun=rerun)
    plan_limit = (plan.budget or {}).get("max_cost_usd")
    if max_cost is not None:
        budget = (max_cost, "--max-cost")
    elif kept is not None:
        budget = (kept, "from an earlier --max-cost")
    elif plan_limit is not None:
        budget = (float(plan_limit), "budget.max_cost_usd in harness.yaml")
    else:
        budget = None
    router = router or Router(plan.agents)
    usability = Usability(plan.agents, Workspace(root), replaying)
    check = check_run(plan, router, work.startable, usability)
    router.unusable = usability.unusable
    return Preview(plan, work, rows, budget, spent, router, check, subtasks)
