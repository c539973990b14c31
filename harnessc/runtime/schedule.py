"""The run's task graph as a plain state machine: which ready task starts next, which tasks
a failure skips, when the run is over.

No asyncio, database or clock: the driver (scheduler.Runner) tells a `Schedule` what
happened (a task ended in some state, a review was decided, the run halted or paused, a
task was prioritized, tasks were added to the plan: grow, split) and carries out what it answers (start these tasks in this order,
record these as skipped with this reason, write this result now, stop after a failure).
Modelled on miniwdl's workflow StateMachine; tests/runtime/test_schedule.py drives it
directly with a hypothesis state machine.

Ready tasks start by (prioritized first, priority, critical path, roadmap order): the
critical path is the longest estimated chain of work still behind a task.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

from .. import outcome as outcomes
from ..states import TaskState

if TYPE_CHECKING:  # annotations only
    from ..planfile import PlanNode

DEFAULT_TASK_WEIGHT = 1000  # estimated tokens of a task the plan has no estimate for


@dataclass(frozen=True)
class Graph:
    """The plan's tasks as the schedule sees them: edges and what orders ready tasks."""

    deps: dict[str, tuple[str, ...]]
    children: dict[str, list[str]]  # in roadmap order
    priority: dict[str, int]  # compiler.vocab.priority_rank of the task's priority (0 first)
    path: dict[str, int]  # the critical path behind the task (longest_paths)
    order: dict[str, int]  # roadmap order

    @classmethod
    def of(cls, nodes: Iterable[PlanNode], priority_rank: Callable[[str | None], int]) -> Graph:
        by_id = {n.id: n for n in nodes}
        children: dict[str, list[str]] = {i: [] for i in by_id}
        for n in by_id.values():
            for d in n.depends_on:
                if d in children:
                    children[d].append(n.id)
        return cls(deps={i: tuple(n.depends_on) for i, n in by_id.items()}, children=children,
                   priority={i: priority_rank(n.priority) for i, n in by_id.items()},
                   path=longest_paths(by_id, children), order={i: n.order for i, n in by_id.items()})


@dataclass
class Ending:
    """What the driver does after a task ended: record `skipped` (task, why) in this order;
    write the task's result now (`write_now`: a dependent of it waits, and may read the
    file) or in the background; halt the run with outcome.FAIL_FAST and `halt` as why."""

    skipped: list[tuple[str, str]] = field(default_factory=list)
    write_now: bool = False
    halt: str | None = None


class Schedule:
    """One run's scheduling state. `todo`: the tasks this run executes (work.Work.todo);
    `blocked`: those of them skipped before anything starts -> why; `states`: every task's
    state at the start; `prioritized`: tasks `harnessc prioritize` moved ahead."""

    def __init__(self, graph: Graph, states: dict[str, str], todo: Iterable[str], blocked: dict[str, str],
                 jobs: int, fail_fast: bool = False, prioritized: Iterable[str] = ()):
        self.graph, self.jobs, self.fail_fast = graph, max(1, jobs), fail_fast
        self.state = dict(states)
        self.prioritized = set(prioritized)
        self.pending = set(todo)  # not started, not skipped
        self.running: set[str] = set()
        self.halted = False  # no task starts any more (a stop, a budget, fail-fast...)
        self.paused = False  # no task starts until resumed
        self.waiting: dict[str, int] = {}  # pending task -> dependencies not complete yet
        self._ready: list[tuple] = []  # a heap of key(tid)
        self.opening: list[tuple[str, str]] = []  # skipped before anything starts (task, why)
        for tid, why in blocked.items():
            self.pending.discard(tid)
            self.state[tid] = TaskState.SKIPPED
            self.opening.append((tid, why))
        for tid in self.pending:
            self.waiting[tid] = sum(d in self.pending or self.state.get(d) == TaskState.REVIEW for d in graph.deps[tid])
        for tid, c in self.waiting.items():
            if c == 0:
                heapq.heappush(self._ready, self.key(tid))

    def key(self, tid: str) -> tuple:
        """Where a ready task stands in the start order (smallest first); ends with its id."""
        g = self.graph
        return (0 if tid in self.prioritized else 1, g.priority[tid], -g.path[tid], g.order[tid], tid)

    @property
    def ready(self) -> list[str]:
        """The ready tasks, in the order they would start."""
        return [k[-1] for k in sorted(self._ready)]

    @property
    def busy(self) -> bool:
        """A task runs or is ready."""
        return bool(self.running or self._ready)

    @property
    def over(self) -> bool:
        """Nothing runs and nothing will start (none is ready, or the run halted). A paused
        run with ready tasks is not over: it waits to be resumed."""
        return not self.running and (not self._ready or self.halted)

    # ------------------------------------------------------------------ decisions

    def start(self) -> list[str]:
        """The tasks to start now, in order (none while halted or paused): they are running."""
        out = []
        while self._ready and len(self.running) < self.jobs and not self.halted and not self.paused:
            tid = heapq.heappop(self._ready)[-1]
            self.pending.discard(tid)
            self.running.add(tid)
            self.state[tid] = TaskState.RUNNING
            out.append(tid)
        return out

    # ------------------------------------------------------------------ events

    def halt(self) -> None:
        self.halted = True

    def pause(self, paused: bool) -> None:
        self.paused = paused

    def prioritize(self, prioritized: Iterable[str]) -> None:
        """`harnessc prioritize`: these tasks start before any other ready one."""
        self.prioritized = set(prioritized)
        self._ready = [self.key(k[-1]) for k in self._ready]
        heapq.heapify(self._ready)

    def ended(self, tid: str, outcome: str) -> Ending:
        """A started task ended in `outcome` (a state, or "interrupted")."""
        self.running.discard(tid)
        self.pending.discard(tid)
        self.state[tid] = outcome
        end = Ending(write_now=any(c in self.waiting for c in self.graph.children[tid]))
        if outcome in outcomes.COMPLETE:  # its dependents may start
            self._release(tid)
        elif outcome in outcomes.BROKEN:  # its dependents cannot
            end.skipped = self._skip_dependents(tid, f"dependency '{tid}' {outcome}")
            if self.fail_fast and outcome == TaskState.FAILED:
                end.halt = f"stopped after '{tid}' failed (--fail-fast)"
                self.halted = True
        return end

    def reviewed(self, tid: str, outcome: str) -> list[tuple[str, str]]:
        """A review was decided: "pending" (rejected: runs again), "blocked" (approved, its
        change no longer merges) or "succeeded". Returns the tasks to record as skipped."""
        self.state[tid] = outcome
        if outcome == TaskState.PENDING:
            self.pending.add(tid)
            heapq.heappush(self._ready, self.key(tid))
        elif outcome == TaskState.BLOCKED:
            return self._skip_dependents(tid, f"dependency '{tid}' blocked")
        else:
            self._release(tid)
        return []

    def grow(self, part: Graph) -> list[tuple[str, str]]:
        """Tasks added to the running plan (plan.grow: auto, split: true; runtime/growth/).
        `part` holds only the new tasks: each may depend on any task of the plan or on a new
        one; a task the plan has never gains a dependency, so a done or running task never
        waits on a new one. Raises ValueError (and changes nothing) on a known id, an unknown
        dependency or a cycle among the new tasks. The new tasks are pending in this run; one
        behind a broken dependency is skipped at once: returns those (task, why)."""
        g = self.graph
        new = list(part.deps)
        if clash := [t for t in new if t in g.deps]:
            raise ValueError(f"task '{clash[0]}' is in the plan already")
        for tid in new:
            if missing := [d for d in part.deps[tid] if d not in g.deps and d not in part.deps]:
                raise ValueError(f"task '{tid}' depends on '{missing[0]}', which is not in the plan")
        order = _kahn(part.deps)
        if len(order) < len(new):
            raise ValueError(f"the new tasks {sorted(set(new) - set(order))} make a cycle")
        children = {t: list(k) for t, k in g.children.items()}
        for tid in order:
            children[tid] = []
            for d in part.deps[tid]:
                children[d].append(tid)
        self.graph = Graph(deps={**g.deps, **part.deps}, children=children, priority={**g.priority, **part.priority},
                           path={**g.path, **part.path}, order={**g.order, **part.order})
        skipped: list[tuple[str, str]] = []
        for tid in order:
            self.state[tid] = TaskState.PENDING
            waits = [d for d in part.deps[tid]
                     if d in self.pending or d in self.running or self.state.get(d) == TaskState.REVIEW]
            stuck = next((d for d in part.deps[tid]
                          if d not in waits and self.state.get(d) not in outcomes.COMPLETE), None)
            if stuck is not None:  # broken, or not complete and not in this run
                self.state[tid] = TaskState.SKIPPED
                state = self.state.get(stuck)
                skipped.append((tid, f"dependency '{stuck}' {state}" if state in outcomes.BROKEN
                                else f"dependency '{stuck}' is not complete and not selected"))
                continue
            self.pending.add(tid)
            self.waiting[tid] = len(waits)
            if self.waiting[tid] == 0:
                heapq.heappush(self._ready, self.key(tid))
        return skipped

    def split(self, tid: str, part: Graph) -> list[tuple[str, str]]:
        """Running task `tid` (split: true) answered with its subtasks `part`: they are added
        as by grow() and `tid` goes back to pending, now depending on them (the one task
        that gains dependencies: it asked for them, and its work is theirs). Raises
        ValueError (changing nothing) as grow() does, when `tid` is not running, or when a
        subtask depends on `tid` or on a task behind it (a cycle)."""
        if tid not in self.running:
            raise ValueError(f"task '{tid}' is not running")
        behind, stack = {tid}, [tid]
        while stack:
            for child in self.graph.children[stack.pop()]:
                if child not in behind:
                    behind.add(child)
                    stack.append(child)
        for sub, deps in part.deps.items():
            if hit := [d for d in deps if d in behind]:
                raise ValueError(f"subtask '{sub}' depends on '{hit[0]}', which waits for '{tid}': a cycle")
        skipped = self.grow(part)
        g = self.graph
        subtasks = tuple(part.deps)
        children = {**g.children, **{s: [*g.children[s], tid] for s in subtasks}}
        self.graph = Graph(deps={**g.deps, tid: (*g.deps[tid], *subtasks)}, children=children,
                           priority=g.priority, path=g.path, order=g.order)
        self.running.discard(tid)
        gone = {s for s, _ in skipped}
        if gone:
            first = next(s for s in subtasks if s in gone)
            self.state[tid] = TaskState.SKIPPED
            self.waiting.pop(tid, None)
            return [*skipped, (tid, f"dependency '{first}' skipped")]
        self.state[tid] = TaskState.PENDING
        self.pending.add(tid)
        self.waiting[tid] = len(subtasks)
        return skipped

    # ------------------------------------------------------------------ graph walks

    def _release(self, tid: str) -> None:
        for child in self.graph.children[tid]:
            if child in self.waiting:
                self.waiting[child] -= 1
                if self.waiting[child] == 0:
                    heapq.heappush(self._ready, self.key(child))

    def _skip_dependents(self, tid: str, why: str) -> list[tuple[str, str]]:
        """Every pending task that depends on `tid`, transitively, is skipped (depth first)."""
        skipped = []
        stack = [tid]
        while stack:
            for child in self.graph.children[stack.pop()]:
                if child in self.pending:
                    self.pending.discard(child)
                    self.waiting.pop(child, None)
                    self.state[child] = TaskState.SKIPPED
                    skipped.append((child, why))
                    stack.append(child)
        return skipped


def _kahn(deps: dict[str, tuple[str, ...]]) -> list[str]:
    """`deps`' tasks, each after those of them it depends on; a task in a cycle is left out."""
    waiting = {t: sum(d in deps for d in ds) for t, ds in deps.items()}
    kids: dict[str, list[str]] = {t: [] for t in deps}
    for t, ds in deps.items():
        for d in ds:
            if d in kids:
                kids[d].append(t)
    order = [t for t, k in waiting.items() if k == 0]
    for t in order:  # grows while it is read
        for c in kids[t]:
            waiting[c] -= 1
            if waiting[c] == 0:
                order.append(c)
    return order


def longest_paths(nodes: dict[str, PlanNode], children: dict[str, list[str]]) -> dict[str, int]:
    """For each task, the estimated work (tokens in and out, a stand-in for time) on the
    longest chain from it to the end of the plan, itself included; done tasks weigh nothing."""
    waiting = {tid: 0 for tid in nodes}
    for kids in children.values():
        for c in kids:
            waiting[c] += 1
    order = [tid for tid, k in waiting.items() if k == 0]
    for tid in order:  # Kahn's order: grows while it is read
        for c in children[tid]:
            waiting[c] -= 1
            if waiting[c] == 0:
                order.append(c)
    length: dict[str, int] = {}
    for tid in reversed(order):
        length[tid] = task_weight(nodes[tid]) + max((length.get(c, 0) for c in children[tid]), default=0)
    return {tid: length.get(tid, 0) for tid in nodes}


def task_weight(node: PlanNode) -> int:
    """A task's estimated work: its estimated tokens in and out (a stand-in for time)."""
    if node.done:
        return 0
    return node.estimate.input_tokens + node.estimate.output_tokens if node.estimate else DEFAULT_TASK_WEIGHT
