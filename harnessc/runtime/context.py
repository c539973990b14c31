"""What one task's iterations need from the run: `TaskContext`, the interface the Runner
(scheduler.py) implements and a task's iterations (iteration.py), its approaches
(approaches.py) and its assist calls (loop/assist.py) are given."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..planfile import Plan, PlanNode
from ..providers import AgentConfig
from .baseline import Baselines
from .loop.attribution import Attribution
from .routing.budget import Budget
from .routing.callbounds import CallBounds
from .routing.health import Health
from .routing.router import Router
from .routing.throttle import Throttle
from .steering import Steering
from .store.state import StateStore
from .worktree.gitops import GitCommits
from .worktree.isolation import Isolation


class TaskContext(Protocol):
    """What one task's iterations need from the run (the Runner implements it)."""

    root: Path
    plan: Plan
    store: StateStore
    budget: Budget
    health: Health
    router: Router
    throttle: Throttle
    git: GitCommits
    attribution: Attribution
    live: dict[str, dict]
    show_lines: bool  # a display shows each call's last printed line: live[task]["line"]
    steering: Steering
    isolation: Isolation
    baselines: Baselines  # min_passed: base - what passed at a task's base
    calls: CallBounds
    deprecations_said: set[str]  # agents whose deprecated model the run has warned of (once each)
    executor: Any  # None: attempts run here; else executor/ray.py's RayExecutor

    def halting(self) -> bool: ...
    def halt_run(self, kind: str, why: str) -> bool: ...
    def agent(self, name: str) -> tuple[Any, AgentConfig]: ...
    def system_prompt(self) -> str: ...
    def reviewed(self, node: PlanNode) -> bool: ...
    def deps(self, node: PlanNode) -> dict[str, dict]: ...
    def adopt_children(self, attempt_id: int) -> int: ...
    async def sleep(self, seconds: float, task_id: str | None = None) -> None: ...
    # The `explore` recovery rung for a stuck task (explore.py): handed over by the run, as
    # explore.py's branches are themselves task runs built on iteration.py.
    async def explore(self, run: Any, why: str) -> None: ...
