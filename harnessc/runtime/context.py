"""What a run is made of: `Setup`, the collaborators session.py builds once from the plan
and the frozen RunOptions, which the Runner (scheduler.py) runs the graph with; and what one
task's iterations need from the run: `TaskContext`, the interface the Runner implements and
a task's iterations (iteration.py), its approaches (approaches.py) and its assist calls
(loop/assist.py) are given, with its two bundles `CallPolicy` and `RunControl`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

from ..planfile import Plan, PlanNode
from ..providers import AgentConfig
from ..workspace import Workspace
from .agents.cassettes import Cassettes
from .baseline import Baselines
from .loop.attribution import Attribution
from .observe.alerts import Alerts
from .observe.notify import Notifier
from .routing.budget import Budget
from .routing.callbounds import CallBounds
from .routing.health import Health
from .routing.router import Router
from .routing.throttle import Throttle
from .steering import Steering
from .store.state import StateStore
from .termination import RunLimits
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


@dataclass(frozen=True)
class Setup:
    """A run's collaborators, built once by session.setup from the plan and the frozen
    RunOptions; the Runner keeps no options of its own but these."""

    jobs: int  # tasks at once
    fail_fast: bool
    auto_approve: bool  # run --auto-approve: `review: true` tasks land as any other
    selection: dict[str, Any]  # work.plan_work's keywords: select, exclude, rerun, only
    limits: RunLimits  # the run's own (max_time)
    policy: CallPolicy
    executor_settings: Any  # None: attempts run here; else executor/rayconfig.py's, for executor/ray.py
    workspace: Workspace
    isolation: Isolation
    baselines: Baselines
    git: GitCommits
    attribution: Attribution
    memory: Any  # memory.RunMemory, or None (runtime/memory/ calls on a task's context: not imported here)
    cassettes: Cassettes
    steering: Steering
    alerts: Alerts
    notifier: Notifier
    wake: asyncio.Event  # set when the scheduler has something to look at (steering sets it too)
    run_flags: Callable[[list[PlanNode]], None]  # the run's flags and preset over tasks added as it runs


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
