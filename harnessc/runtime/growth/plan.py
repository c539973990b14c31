"""The Runner's side of a growing plan: proposals added to roadmap.md, the plan rebuilt, the
new tasks joined to the running schedule (see the package's docstring)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import proposals
from ...states import BROKEN, TaskState
from ...vocab import ROADMAP, priority_rank
from ...workspace import WorkspaceError
from .. import plan as planmod
from .. import protect
from ..loop import useredits
from ..schedule import Graph, Schedule
from ..store.attempts import Ending, TaskEnd
from ..worktree.isolation import isolated
from .split import SplitRun, adopt

if TYPE_CHECKING:  # annotations only
    from ...planfile import PlanNode


class PlanGrowth:
    """One run's growing plan: the Runner's side of proposals.grow."""

    def __init__(self, runner: Any):  # scheduler.Runner
        self.runner = runner
        self.cfg = proposals.settings(runner.plan.growth)
        self.auto = self.cfg["grow"] == "auto"
        self.filing: proposals.Filing | None = None  # made on first use: the run's id is known then
        self.handled: set[str] = set()  # tasks whose proposals this run took (session.file_proposals skips them)
        self.added: list[str] = []  # the tasks this run added to the plan
        self.subtasks: dict[str, list[str]] = {}  # split task -> its subtasks in the plan
        self.splitting: dict[str, list[PlanNode]] = {}  # split task whose call just ended -> its new subtasks
        self.later: dict[str, str] = {}  # tasks added to roadmap.md for the next run -> why (HC716)
        # a run killed while adding proposals: what reached roadmap.md is added, the rest waits
        proposals.settle(runner.root, runner.nodes)
        self.subtasks.update(adopt(runner.root, runner.nodes))  # split tasks of earlier runs

    def run_filing(self) -> proposals.Filing:
        if self.filing is None:
            self.filing = proposals.Filing(self.runner.root, self.cfg, self.runner.store, self.runner.store.run_id)
        return self.filing

    # ------------------------------------------------------------------ plan.grow: auto

    async def landed(self, sched: Schedule, tid: str) -> list[tuple[str, str]]:
        """A task landed: with plan.grow: auto, the tasks it proposed join the plan and this
        run. Returns the tasks to record as skipped (a new task behind a broken one)."""
        node = self.runner.nodes[tid]
        if not self.auto or node.split:
            return []
        self.handled.add(tid)
        output = self.runner.store.tasks([tid]).get(tid, {}).get("output")
        found = self.run_filing().read(tid, output)
        if not found:  # most landings: nothing to lint, write or build
            return []
        nodes = await self.add_proposals(tid, lambda filing: proposals.grow(filing, tid, found=found))
        return self._join(sched, nodes, tid, split=False) if nodes else []

    async def add_proposals(self, tid: str, grow) -> list[PlanNode]:
        """File `tid`'s proposals with `grow(filing)` (which appends those that pass to
        roadmap.md), then rebuild the plan: the new tasks' nodes. A plan that does not build
        with them puts roadmap.md back and rejects them, with the build's errors."""
        root = Path(self.runner.root)
        store = self.runner.store
        try:
            before = (root / ROADMAP).read_text("utf-8")
            async with useredits.UserEdits.of(self.runner).writing():  # harnessc's write, not the user's
                added = grow(self.run_filing())
        except (OSError, UnicodeDecodeError, WorkspaceError) as e:  # a full disk, a link: the run's work stands
            store.event("proposal_ignored", tid, reason=f"proposals not filed: {e}")
            return []
        if not added:
            return []
        protect.harnessc_wrote(root, ROADMAP)  # the agents running now did not write it
        plan, project = planmod.build(root)
        if plan is None:
            said = [f"{d.span.path}:{d.span.line}:{d.span.col}: error[{d.code}]: {d.message}"
                    for d in project.diags.errors[:3]]
            self.run_filing().files.ws.write_atomic(root / ROADMAP, before)
            protect.harnessc_wrote(root, ROADMAP)
            proposals.unadd(self.run_filing(), tid, added, "the plan does not build with it: " + "; ".join(said))
            planmod.build(root)  # plan.json as it was
            return []
        by_id = {n.id: n for n in plan.nodes}
        nodes = [by_id[p.id] for p in added if p.id in by_id]
        self.runner.run_flags(nodes)  # as the tasks the run started with (`run --autonomous` commits them)
        return nodes

    def _join(self, sched: Schedule, nodes: list[PlanNode], tid: str, split: bool) -> list[tuple[str, str]]:
        """Make `nodes` tasks of this run: the Runner's, state.db's, the Schedule's. Those that
        need a setting this run did not start with wait in roadmap.md for the next run (HC716)."""
        runner = self.runner
        later = self._later(nodes)
        if later:
            self._defer(tid, later)
            if split:  # its work waits with its subtasks: it is skipped, and looked at again next run
                first = next(iter(later))
                why = (f"its subtasks wait for the next run (HC716): '{first}' {later[first]}; "
                       "`harnessc run` again runs them, then this task")
                return [(tid, why), *sched.ended(tid, TaskState.SKIPPED).skipped]
            nodes = [n for n in nodes if n.id not in later]
            if not nodes:
                return []
        ids = [n.id for n in nodes]
        part = Graph.of(nodes, priority_rank)
        skipped = sched.split(tid, part) if split else sched.grow(part)
        runner.plan.nodes.extend(nodes)
        runner.nodes.update({n.id: n for n in nodes})
        runner.targets.update(ids)
        runner.register(nodes)
        runner.store.ensure_tasks(ids, set())
        self.added += ids
        if split:
            self.subtasks[tid] = ids
            runner.nodes[tid].depends_on = [*runner.nodes[tid].depends_on, *ids]
        runner.store.event("plan_grown", tid, tasks=ids, split=split,
                           message=f"{tid}: {'split into' if split else 'proposed'} {', '.join(ids)} "
                                   "(added to roadmap.md and this run)")
        return skipped

    def _later(self, nodes: list[PlanNode]) -> dict[str, str]:
        """The new tasks this run cannot run as their specs say (task -> why, HC716): one that
        needs isolation, `git: commit` or a loop's tracking the run did not set up at its start
        (it is set up for the tasks it starts with: mid-run it would miss the running tasks'
        changes), and one that depends on such a task."""
        out: dict[str, str] = {}
        for n in nodes:  # (in dependency order: proposals.grow's)
            need = self._lacks(n)
            dep = next((d for d in n.depends_on if d in out or d in self.later), None)
            if need is not None:
                out[n.id] = f"needs {need}, which this run did not start with"
            elif dep is not None:
                out[n.id] = f"depends on '{dep}', which waits for the next run"
        return out

    def _lacks(self, node: PlanNode) -> str | None:
        runner = self.runner
        if isolated(node, runner.isolation.override):
            return None if runner.isolation.wanted else "isolation: worktree"
        if node.git == "commit" and not runner.git.wanted:
            return "git: commit"
        if node.completion_promise and not runner.attribution.enabled:
            return "completion_promise (a loop task's progress tracking)"
        return None

    def _defer(self, tid: str, later: dict[str, str]) -> None:
        self.later.update(later)
        ids = ", ".join(later)
        why = "; ".join(f"'{t}' {w}" for t, w in later.items())
        self.runner.store.event("plan_grown_later", tid, tasks=list(later), message=(
            f"{tid}: {ids} added to roadmap.md for the next run, not this one (HC716): {why}; "
            "`harnessc run` again runs them with their settings"))

    # ------------------------------------------------------------------ split: true

    def split_run(self, node: PlanNode, route: Any) -> SplitRun:
        """A split task's first turn: its call asks for subtasks."""
        self.handled.add(node.id)
        run = SplitRun(self.runner, node, route)
        run.growth = self
        return run

    def split_done(self, node: PlanNode) -> Ending | None:
        """A split task's turn once its subtasks are complete (it starts again only then): it
        succeeds without a call - the ending the driver writes, as every task's. None: the
        task has no subtasks yet (split_run)."""
        subs = self.subtasks.get(node.id)
        if subs is None:
            return None
        self.runner.store.event("split_done", node.id, subtasks=subs,
                                message=f"{node.id}: done, its subtasks are ({', '.join(subs)})")
        return Ending(TaskEnd(TaskState.SUCCEEDED, fingerprint=node.fingerprint))

    def split_ended(self, sched: Schedule, tid: str) -> list[tuple[str, str]] | None:
        """The driver's look at a task that ended: a split task whose call added subtasks
        waits for them now (the tasks to record as skipped); None for any other ending."""
        nodes = self.splitting.pop(tid, None)
        if nodes is None:
            return None
        return self._join(sched, nodes, tid, split=True)

    def skipped(self, tid: str, why: str) -> tuple[str, str]:
        """The state and reason a task the schedule skips is recorded with: a split task
        whose subtask broke has failed (its work was theirs)."""
        subs = self.subtasks.get(tid)
        if subs:
            rows = self.runner.store.tasks(subs)
            broken = next((s for s in subs if rows.get(s, {}).get("state") in BROKEN), None)
            if broken is not None:
                state = rows[broken]["state"]
                return TaskState.FAILED, f"its subtask '{broken}' {state}" + (
                    f": {rows[broken]['error']}" if rows[broken].get("error") else "")
        return TaskState.SKIPPED, why

    def subtask_proposals(self, tid: str, text: str) -> list[proposals.Proposal]:
        """The subtasks in a split task's answer; one that depends on the task or on one
        waiting for it (a cycle once the task waits for its subtasks) is rejected (HC498)."""
        found, problems = proposals.extract(text, None)
        for line in problems:
            self.runner.store.event("proposal_ignored", tid, reason=line)
        behind = _behind(self.runner.nodes, tid)
        refused: set[str] = set()
        for p in found:
            hit = next((d for d in p.depends_on if d in behind or d in refused), None)
            if hit is not None:
                refused.add(p.id)
                p.diagnostics.append(
                    f"{proposals.HERE}:1:1: error[HC498]: subtask '{p.id}' of split task '{tid}' depends on "
                    f"'{hit}', which waits for '{tid}' (hint: a subtask may depend on tasks '{tid}' does not "
                    "come before, and on the subtasks before it)")
        return found

    # ------------------------------------------------------------------ the end

    def closing_lines(self) -> list[str]:
        lines = proposals.closing_lines(0, 0, added=len(self.added)) if self.added else []
        if self.later:
            lines.append(f"proposals: {', '.join(self.later)} added to roadmap.md for the next run (HC716): "
                         "they need settings this run did not start with (isolation, git: commit, a loop's "
                         "tracking); `harnessc run` again runs them")
        return lines


def _behind(nodes: dict[str, PlanNode], tid: str) -> set[str]:
    """`tid` and every task that waits for it, transitively."""
    children: dict[str, list[str]] = {}
    for n in nodes.values():
        for d in n.depends_on:
            children.setdefault(d, []).append(n.id)
    out, stack = {tid}, [tid]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out

