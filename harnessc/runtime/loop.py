"""What a loop task carries from one iteration to the next: its progress meter
(progress.py), its stuck detector (stuck.py) and its memory (memory.py), loaded from and
saved to state.db together. iteration.TaskRun calls `begin` before each call, `observe`
after each answer, and `prompt` for the next prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..planfile import Plan, PlanNode
from . import memory as memorymod
from . import plan as planmod
from . import progress as progressmod
from .attribution import TaskFiles
from .progress import Evidence, ProgressMeter
from .state import StateStore
from .stuck import Stuck, StuckDetector


@dataclass
class Seen:
    """One observed iteration: its evidence, a stuck verdict, and what to save with the attempt."""

    evidence: Evidence
    stuck: Stuck | None
    saved: dict[str, Any] = field(default_factory=dict)  # finish_attempt's progress= and loop_state=


class TaskLoop:
    def __init__(self, root: Path, plan: Plan, node: PlanNode, store: StateStore, files: TaskFiles | None = None):
        self.root, self.plan, self.node, self.store = root, plan, node, store
        settings = progressmod.Settings.of(plan)
        saved = store.loop_state(node.id)
        if saved and saved.get("fingerprint") != node.fingerprint:
            saved = None  # the task changed since: what it remembers is about another task
        saved = saved or {}
        self.iterations = int(saved.get("iterations") or 0)  # across runs
        self.meter = ProgressMeter(root, node, settings, store.workspace.loop, saved.get("progress"), files)
        self.stuck = StuckDetector(node.limits.stuck_after or 3, settings.threshold, saved.get("stuck"))
        self.memory_settings = memorymod.Settings.of(plan)
        self.memory = memorymod.Memory(self.memory_settings, saved.get("memory"))

    @classmethod
    def of(cls, root: Path, plan: Plan, node: PlanNode, store: StateStore,
           files: TaskFiles | None = None) -> "TaskLoop | None":
        """The task's loop state, or None for a task that is not a loop task. files: the
        task's side of the run's file ledger (attribution.py)."""
        return cls(root, plan, node, store, files) if progressmod.is_loop(node) else None

    async def begin(self) -> None:
        await self.meter.begin()

    async def observe(self, agent: str, text: str, errors: list[str], checks: list[dict],
                      succeeded: bool = False) -> Seen:
        """Score an answered iteration, remember it, and (unless it succeeded) judge if the task is stuck."""
        evidence = await self.meter.measure(text, checks)
        self.iterations += 1
        self.memory.record(self.iterations, agent, text, evidence, errors)
        stuck = None if succeeded else self.stuck.observe(evidence, text, errors)
        state = {"fingerprint": self.node.fingerprint, "iterations": self.iterations,
                 "progress": self.meter.state(), "stuck": self.stuck.state(), "memory": self.memory.data()}
        return Seen(evidence, stuck, {"progress": evidence.record(), "loop_state": state})

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
