"""What a run will do, decided from the plan and the task rows without writing anything.

`harnessc run` uses it to start (and to say "nothing to run" without creating a run),
`run --dry-run` to preview, and the scheduler for the tasks skipped before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..planfile import Plan, PlanNode
from ..states import BROKEN, COMPLETE, LANDED, TaskState
from . import plan as planmod


@dataclass
class Work:
    targets: set[str]  # the selected tasks
    todo: list[str]  # the selected tasks this run sets to pending, in roadmap order
    stale: list[str]  # succeeded/degraded tasks whose fingerprint changed, not re-run
    blocked: dict[str, str] = field(default_factory=dict)  # todo tasks skipped at the start -> why

    @property
    def startable(self) -> list[str]:
        return [t for t in self.todo if t not in self.blocked]

    def nothing_to_run(self, rows: dict[str, dict]) -> bool:
        """No task would start and every blocked task is skipped already: a run would
        change nothing."""
        return not self.startable and all(
            (rows.get(t) or {}).get("state") == TaskState.SKIPPED for t in self.blocked)


def row_state(nodes: dict[str, PlanNode], rows: dict[str, dict], tid: str) -> str:
    """A task's state as a new run sees it: done in roadmap.md wins; no row yet is pending;
    a task left running by a dead run is pending again."""
    if tid in nodes and nodes[tid].done:
        return TaskState.DONE
    state = (rows.get(tid) or {}).get("state") or TaskState.PENDING
    return TaskState.PENDING if state == TaskState.RUNNING else state


def selected(plan: Plan, select: list[str], exclude: list[str], only: set[str] | None = None) -> set[str]:
    """The tasks a run's selectors (or `only`: explicit ids, `harnessc retry`) choose."""
    if only is not None:
        return set(only) & {n.id for n in plan.nodes}
    return planmod.select_ids(plan, select, exclude)


def plan_work(plan: Plan, rows: dict[str, dict], select: list[str] = (), exclude: list[str] = (),
              rerun: str | None = None, only: set[str] | None = None, targets: set[str] | None = None) -> Work:
    """Which selected tasks run. Failed tasks wait for `retry` (only=...) or --rerun failed;
    skipped ones are looked at again (their dependency may be complete or selected now).
    `targets`: `selected` already (a run selects once)."""
    nodes = {n.id: n for n in plan.nodes}
    if targets is None:
        targets = selected(plan, select, exclude, only)
    todo, stale = [], []
    for tid in sorted(targets, key=lambda i: nodes[i].order):
        state = row_state(nodes, rows, tid)
        if state == TaskState.DONE:
            continue
        if state in LANDED:
            changed = (rows.get(tid) or {}).get("fingerprint") != nodes[tid].fingerprint
            if rerun == "all" or (rerun == "stale" and changed):
                todo.append(tid)
            elif changed:
                stale.append(tid)
            continue
        if state == TaskState.REVIEW:  # waits for `harnessc approve` / `reject`, not for a run
            continue
        if state in (TaskState.FAILED, TaskState.BLOCKED) and not (rerun in ("failed", "all") or only is not None):
            continue
        todo.append(tid)
    work = Work(targets, todo, stale)
    work.blocked = blocked_at_start(nodes, rows, todo)
    return work


def blocked_at_start(nodes: dict[str, PlanNode], rows: dict[str, dict], todo: list[str]) -> dict[str, str]:
    """Tasks of `todo` that cannot start in this run -> why: a dependency that is neither
    complete nor in this run, and (transitively) the tasks that wait on those."""
    children: dict[str, list[str]] = {i: [] for i in nodes}
    for n in nodes.values():
        for d in n.depends_on:
            if d in children:
                children[d].append(n.id)
    pending = set(todo)
    blocked: dict[str, str] = {}

    def block(tid: str, why: str) -> None:
        pending.discard(tid)
        blocked[tid] = why
        stack = [tid]
        while stack:
            for child in children[stack.pop()]:
                if child in pending:
                    pending.discard(child)
                    blocked[child] = f"dependency '{tid}' skipped"
                    stack.append(child)

    for tid in todo:
        if tid not in pending:
            continue
        for d in nodes[tid].depends_on:
            if d in pending:
                continue
            ds = TaskState.SKIPPED if d in blocked else row_state(nodes, rows, d)
            if ds in COMPLETE or ds == TaskState.REVIEW:  # review: it waits in the run for the approval
                continue
            block(tid, f"dependency '{d}' {ds}" if ds in BROKEN
                  else f"dependency '{d}' is not complete and not selected")
            break
    return blocked
