"""Run flags over the plan's loop settings: `--max-iterations`, `--stuck-after`,
`--progress-threshold`, and the presets `--autonomous` and `--conservative` (seed 003 §11.2). `--max-time` (the run's own
wall-clock limit) is kept by the Runner.

Flags change this run only: the plan's records are replaced for the run, never written back.
An explicit flag wins over a preset's value, and a run's flags win over a task's own settings
(roadmap.md `progress_threshold`, `recovery`), which win over harness.yaml's `loop:`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...planfile import Plan, PlanNode
from .recovery import switched

DAY = 24 * 3600.0

# preset -> (run flags it sets, loop settings it sets)
PRESETS: dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]] = {
    # left alone overnight: a day at most, each succeeded task one commit (where neither the
    # task nor harness.yaml says `git:`), every recovery rung, never paused by an alert
    "autonomous": ({"max_time": DAY, "git": "commit"}, {"alerts": {"pause_on_critical": False},
                                        "recovery": {"escalate": True, "human": True}}),
    # more oversight: a tighter iteration limit, frequent milestones, critical alerts pause
    "conservative": ({"max_iterations_cap": 100}, {"alerts": {"milestone_every": 5, "pause_on_critical": True}}),
}


def resolve(preset: str | None, max_time: float | None, max_iterations: int | str | None,
            stuck_after: int | None, progress_threshold: float | None = None) -> dict[str, Any]:
    """The flags in force: the preset's values, then the explicit flags over them."""
    flags = dict(PRESETS[preset][0]) if preset else {}
    explicit = {"max_time": max_time, "max_iterations": max_iterations, "stuck_after": stuck_after,
                "progress_threshold": progress_threshold}
    flags.update({k: v for k, v in explicit.items() if v is not None})
    return flags


def apply(plan: Plan, preset: str | None, flags: dict[str, Any]) -> None:
    """Set this run's task limits and loop settings from the flags and the preset."""
    apply_to(plan.nodes, preset, flags)
    loop: dict[str, dict[str, Any]] = dict(PRESETS[preset][1]) if preset else {}
    if "progress_threshold" in flags:
        loop["progress"] = {"threshold": float(flags["progress_threshold"])}
    if loop:
        if plan.loop is None:  # a plan built before `loop:`: its defaults
            from ..plan import loop_defaults

            plan.loop = loop_defaults()
        for section, values in loop.items():
            plan.loop[section] = {**(plan.loop.get(section) or {}), **values}


def apply_to(nodes: list[PlanNode], preset: str | None, flags: dict[str, Any]) -> None:
    """The flags and the preset over these tasks' own settings: the plan's at the run's start,
    and the tasks added while it runs (runtime/growth/), as if they had been there."""
    limits: dict[str, Any] = {}
    if "max_iterations" in flags:
        limits["max_iterations"] = None if flags["max_iterations"] == "unlimited" else int(flags["max_iterations"])
    if "stuck_after" in flags:
        limits["stuck_after"] = int(flags["stuck_after"])
    cap = flags.get("max_iterations_cap") if "max_iterations" not in flags else None
    if limits or cap:
        replaced: dict[int, Any] = {}  # nodes share limit records: replace each record once
        for node in nodes:
            key = id(node.limits)
            if key not in replaced:
                own = dict(limits)
                if cap:
                    now = node.limits.max_iterations
                    own["max_iterations"] = cap if now is None else min(now, cap)
                replaced[key] = dataclasses.replace(node.limits, **own)
            node.limits = replaced[key]
    if "git" in flags:
        for node in nodes:
            if node.git is None:  # an explicit `git: off` stays off
                node.git = flags["git"]
    recovery = PRESETS[preset][1].get("recovery") if preset else None
    _over_tasks(nodes, "progress_threshold" in flags, recovery)


def _over_tasks(nodes: list[PlanNode], threshold: bool, recovery: dict[str, Any] | None) -> None:
    """The run's flags over the tasks' own loop settings: `--progress-threshold` replaces a
    task's threshold (the plan's, set by the caller, applies); a preset's recovery switches
    apply to a task's own rungs as to harness.yaml's."""
    if not threshold and not recovery:
        return
    replaced: dict[int, Any] = {}  # nodes share loop records: replace each record once
    for node in nodes:
        own = node.loop
        if own is None:
            continue
        if id(own) not in replaced:
            changes: dict[str, Any] = {}
            if threshold:
                changes["progress_threshold"] = None
            if recovery and own.recovery:
                changes["recovery"] = switched(own.recovery, recovery.get("escalate"), recovery.get("human"))
            replaced[id(own)] = dataclasses.replace(own, **changes)
        node.loop = replaced[id(own)]
