"""What a loop task carries from one iteration to the next: its progress meter
(progress.py), its stuck detector (stuck.py), its memory (memory.py) and its place on the
recovery ladder (recovery.py: the rung reached, the rewritten prompt, the agent it escalated
to), loaded from and saved to state.db together. iteration.TaskRun calls `begin` before each
call, `observe` after each answer and `prompt` for the next prompt; the meter measures the
files through the task's side of the run's file ledger (attribution.py), or an isolated
task's worktree its own way (progress.ProgressMeter.measure_in, measure_with).

All of it is forgotten when the task's fingerprint changes; the recovery part also when the
task ends (state.py: a task run again after it was blocked or failed - `harnessc retry` -
climbs its ladder from the first rung, on its first agent).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...planfile import Plan, PlanNode
from .. import plan as planmod
from ..store.state import StateStore
from . import memory as memorymod
from . import progress as progressmod
from .attribution import TaskFiles
from .progress import Evidence, ProgressMeter
from .recovery import Ladder, rungs_for
from .stuck import Stuck, StuckDetector


@dataclass
class Seen:
    """One observed iteration: its evidence, a stuck verdict, and what to save with the attempt."""

    evidence: Evidence
    stuck: Stuck | None
    progress: dict | None = None  # saved with the attempt (store/attempts.py's AttemptEnd)
    loop_state: dict | None = None


class TaskLoop:
    def __init__(self, root: Path, plan: Plan, node: PlanNode, store: StateStore, files: TaskFiles | None = None):
        self.root, self.plan, self.node, self.store = root, plan, node, store
        settings = progressmod.Settings.of(plan, node)
        saved = store.loop_state(node.id)
        if saved and saved.get("fingerprint") != node.fingerprint:
            saved = None  # the task changed since: what it remembers is about another task
        saved = saved or {}
        self.iterations = int(saved.get("iterations") or 0)  # across runs
        self.meter = ProgressMeter(root, node, settings, store.workspace.loop, saved.get("progress"), files)
        self.stuck = StuckDetector(node.limits.stuck_after or 3, settings.threshold, saved.get("stuck"))
        self.memory_settings = memorymod.Settings.of(plan)
        self.memory = memorymod.Memory(self.memory_settings, saved.get("memory"))
        recovery = saved.get("recovery") if isinstance(saved.get("recovery"), dict) else {}
        step = recovery.get("step")
        self.ladder = Ladder(rungs_for(plan, node), step if type(step) is int else 0)
        self.recovered_prompt: str | None = _text(recovery.get("prompt"))  # what a mutation made of the prompt
        self.escalated_to: str | None = _text(recovery.get("agent"))  # where the ladder's escalations took it

    @classmethod
    def of(cls, root: Path, plan: Plan, node: PlanNode, store: StateStore,
           files: TaskFiles | None = None) -> "TaskLoop | None":
        """The task's loop state, or None for a task that is not a loop task. files: the
        task's side of the run's file ledger (attribution.py)."""
        return cls(root, plan, node, store, files) if progressmod.is_loop(node) else None

    async def begin(self) -> None:
        """Before a call: the files as it finds them."""
        await self.meter.begin()

    async def observe(self, agent: str, text: str, errors: list[str], checks: list[dict],
                      succeeded: bool = False) -> Seen:
        """Score an answered iteration, remember it, and (unless it succeeded) judge if the task is stuck."""
        evidence = await self.meter.measure(text, checks)
        self.iterations += 1
        self.memory.record(self.iterations, agent, text, evidence, errors)
        stuck = None if succeeded else self.stuck.observe(evidence, text, errors)
        return Seen(evidence, stuck, evidence.record(), self.state())

    def state(self) -> dict[str, Any]:
        """What is saved with an attempt (and read back by a resumed run)."""
        state = {"fingerprint": self.node.fingerprint, "iterations": self.iterations,
                 "progress": self.meter.state(), "stuck": self.stuck.state(), "memory": self.memory.data()}
        if self.ladder.step or self.recovered_prompt is not None or self.escalated_to is not None:
            # rungs: the ladder as this run climbs it (a preset may switch steps), for `status`
            state["recovery"] = {"step": self.ladder.step, "rungs": list(self.ladder.rungs),
                                 "prompt": self.recovered_prompt, "agent": self.escalated_to}
        return state

    def prompt(self, base: str) -> str:
        """The next prompt: the task's prompt, then what it remembers (nothing on its first iteration)."""
        if not self.memory:
            return base
        n = self.iterations + 1

        def render(view: dict) -> str:
            return planmod.render_memory(self.plan, self.node.id, view, n, self.root)

        return base.rstrip("\n") + "\n" + memorymod.fit(self.memory.view(), render, self.memory_settings.max_tokens)

    def close(self) -> None:
        self.meter.close()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
