"""`split: true`: a task's first call asks for its subtasks instead of the work (SplitRun);
growth/plan.py adds them to roadmap.md and the running plan."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import proposals
from ...states import TaskState
from ..iteration import TaskRun, answer_end
from ..store.attempts import TaskEnd
from ..verify import Verdict

if TYPE_CHECKING:  # annotations only
    from ...planfile import PlanNode

SPLIT_SECTION = """

## Split this task into subtasks (`split: true`)

Do not do the work of this task now. Answer with its subtasks instead, one marker each:

<task id="SUBTASK-ID" depends_on="ID,ID">What the subtask must achieve, and how to check it.</task>

Each id is new (letters, digits, `.`, `_`, `-`). A subtask may depend on tasks of the roadmap
and on the subtasks before it, never on '{tid}' or a task that waits for it. At most {most}
subtasks. '{tid}' is done when all its subtasks are.
"""


class SplitRun(TaskRun):
    """A split task's call for its subtasks: the prompt says so, an answer with at least one
    subtask that can be added succeeds (nothing else is checked: the subtasks are), the rest
    is retried as any failed verification, with why."""

    growth: Any = None  # the run's growth.PlanGrowth (set by it)

    def render(self) -> str:
        most = max(self.growth.cfg["max_new_tasks"] - self.growth.run_filing().this_run, 0)
        return super().render() + SPLIT_SECTION.format(tid=self.tid, most=min(most, proposals.MAX_PER_TASK))

    async def check(self, resp: Any) -> Verdict:
        found, _ = proposals.extract(resp.text, None)
        verdict = Verdict(claim=True, ok=bool(found))
        if not found:
            verdict.failed("promise", "split: true - the answer proposed no subtask: answer with one "
                           '<task id="..." depends_on="...">goal</task> marker per subtask, and nothing else')
        return verdict

    async def succeed(self, resp: Any, verdict: Verdict) -> None:
        growth = self.growth
        self.answer = resp.text
        found = growth.subtask_proposals(self.tid, resp.text)
        nodes = await growth.add_proposals(self.tid, lambda filing: proposals.grow(filing, self.tid, found=found))
        if not nodes:
            why = "; ".join(d for p in found for d in p.diagnostics[:1])[:1500]
            raise self.done(TaskEnd(TaskState.FAILED, error="split: true, but none of the subtasks its answer "
                                    f"proposed could be added (`harnessc review` shows why): {why}"),
                            answer_end("rejected", resp, errors=[why]))
        growth.splitting[self.tid] = nodes
        raise self.done(None, answer_end("succeeded", resp))  # pending: it waits for its subtasks


def adopt(root: Path, nodes: dict[str, PlanNode]) -> dict[str, list[str]]:
    """The split tasks of earlier runs wait for their subtasks again: each plan node gains
    them as dependencies (in memory, as Schedule.split gave them), unless that would close a
    cycle (roadmap.md edited since). Split task -> its subtasks. The run and `run --dry-run`
    both see the plan this way."""
    split = {tid for tid, n in nodes.items() if n.split}
    found = proposals.subtasks(root, split, nodes) if split else {}
    for tid, subs in found.items():
        node = nodes[tid]
        node.depends_on = [*node.depends_on, *(s for s in subs if s not in node.depends_on
                                               and tid not in _reaches(nodes, s))]
    return found


def _reaches(nodes: dict[str, PlanNode], tid: str) -> set[str]:
    """What `tid` waits for, transitively."""
    out, stack = set(), [tid]
    while stack:
        n = nodes.get(stack.pop())
        for d in (n.depends_on if n is not None else ()):
            if d not in out:
                out.add(d)
                stack.append(d)
    return out
