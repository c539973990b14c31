"""What one task's iterations need from the run: `TaskContext`, the interface the Runner
(scheduler.py) implements and a task's iterations (iteration.py), its approaches
(approaches.py) and its assist calls (loop/assist.py) are given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

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


@dataclass(frozen=True)
class CallPolicy:
    """Whether a call may start and on which agent: what every task's calls share."""

    budget: Budget
    health: Health  # breakers and daily limits
    router: Router
    throttle: Throttle  # calls in flight per agent


@dataclass(frozen=True)
class RunControl:
    """The run's hold over a task: whether it is halting (or halt it), a sleep a stop cuts
    short, and the operator's steering (pause, skip, instructions, overrides)."""

    halting: Callable[[], bool]
    halt_run: Callable[[str, str], bool]  # (outcome kind, why) -> False when it was halting already
    sleep: Callable[..., Awaitable[None]]  # (seconds, task id)
    steering: Steering


class TaskContext(Protocol):
    """What one task's iterations need from the run (the Runner implements it)."""

    root: Path
    plan: Plan
    store: StateStore
    policy: CallPolicy
    control: RunControl
    git: GitCommits
    attribution: Attribution
    live: dict[str, dict]
    show_lines: bool  # a display shows each call's last printed line: live[task]["line"]
    isolation: Isolation
    baselines: Baselines  # min_passed: base - what passed at a task's base
    calls: CallBounds
    deprecations_said: set[str]  # agents whose deprecated model the run has warned of (once each)
    executor: Any  # None: attempts run here; else executor/ray.py's RayExecutor

    def agent(self, name: str) -> tuple[Any, AgentConfig]: ...
    def system_prompt(self) -> str: ...
    def reviewed(self, node: PlanNode) -> bool: ...
    def deps(self, node: PlanNode) -> dict[str, dict]: ...
    def adopt_children(self, attempt_id: int) -> int: ...
    # The `explore` recovery rung for a stuck task (explore.py): handed over by the run, as
    # explore.py's branches are themselves task runs built on iteration.py.
    async def explore(self, run: Any, why: str) -> None: ...
