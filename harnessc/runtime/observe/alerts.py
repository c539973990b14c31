"""Alerts: what an unattended run tells the operator, read off the run's event stream.

`Alerts.on_event` is a state-store listener: every event of the run passes through it, and
`RULES` maps event kinds to alerts in one place (stuck, fallback, escalation, daily limits,
breakers, recovery steps); budget thresholds, milestones and runaway signs are computed from
the same events. Each alert is

* a JSON line in `.harness/alerts.log`: {"ts", "level" (info|warning|critical), "kind",
  "task", "message", "run_id"},
* an `alert` event (so the live display prints it and `harnessc log` keeps it),
* and with `loop.alerts.pause_on_critical`, a critical alert pauses the run.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Callable

from ...textsafe import json_text
from ...workspace import Workspace, WorkspaceError
from .. import clock
from ..loop.recovery import resumed_text

BUDGET_STEPS = ((0.5, "info"), (0.8, "warning"), (1.0, "critical"))
FAST_IN_A_ROW = 3  # iterations faster than min_iteration_duration before it is a runaway sign
SPIKE_AFTER = 3  # iterations of a task before a token spike can be judged


def _reason(ev: dict) -> str:
    return str(ev.get("reason") or ev.get("message") or ev.get("error") or "")[:300]


def _ended(state: str, ev: dict) -> str:
    """'failed: why' ('blocked: stuck ...' and 'degraded (fallback): ...' say it already)."""
    why = _reason(ev)
    return why if why.startswith(state) else f"{state}: {why}" if why else state


# event kind -> (level, alert kind, message); events the live display and the log name alike
RULES: dict[str, tuple[str, str, Callable[[dict], str]]] = {
    "recovery": ("warning", "recovery", lambda ev: f"recovery step {ev.get('step', '?')}"
                 + (f" ({ev['mutation']})" if ev.get("mutation") else "") + f": {_reason(ev)}"),
    "recovery_resumed": ("info", "recovery_resumed", resumed_text),
    "fallback": ("warning", "fallback", lambda ev: f"fell back from {ev.get('agent')} to {ev.get('to')}: {_reason(ev)}"),
    "escalated": ("info", "escalation", lambda ev: f"escalated from {ev.get('agent')} to {ev.get('to')}: {_reason(ev)}"),
    # a task that ended without a verified result, as it ends (not only in the run's summary)
    "task_blocked": ("warning", "blocked", lambda ev: _ended("blocked", ev)),
    "task_failed": ("warning", "failed", lambda ev: _ended("failed", ev)),
    "task_degraded": ("warning", "degraded", lambda ev: _ended("degraded", ev)),
    # a person's turn (`review: true`); notify sends it as kind `review` (observe/notify.py)
    "task_review": ("info", "review", lambda ev: f"verified; waits for review (`harnessc review`, then "
                                                 f"`harnessc approve {ev.get('task')}`)"),
    # a task's own limits (tasklimits.py): near one, or one its agent cannot be held to
    "limit_near": ("warning", "approaching_limit", _reason),
    "limit_unchecked": ("warning", "limit_unchecked", _reason),
    "model_deprecated": ("warning", "model_deprecated", _reason),
    "daily_limit_reached": ("warning", "daily_limit", lambda ev: f"daily limit reached for {ev.get('agent')}: {_reason(ev)}"),
    "breaker_opened": ("warning", "breaker", lambda ev: f"breaker opened for {ev.get('agent')}: {_reason(ev)}"),
    # the operator's say: what reached an agent, what could not be read
    "instruction_delivered": ("info", "instruction", lambda ev: f"instruction {ev.get('file')} reached the prompt"),
    "inbox_error": ("warning", "inbox_error", lambda ev: f"inbox {ev.get('file')}: {_reason(ev)}"),
    "steering_error": ("warning", "steering_error", _reason),
    "paused": ("info", "paused", lambda ev: f"paused ({ev.get('via')}){': ' + _reason(ev) if _reason(ev) else ''}"),
    "resumed": ("info", "resumed", lambda ev: f"resumed ({ev.get('via')})"),
    # git per task: what was committed, and what never will be
    "git_committed": ("info", "committed", lambda ev: f"committed {str(ev.get('sha'))[:12]} "
                                                       f"({len(ev.get('paths') or [])} path(s))"),
    "git_dirty_at_start": ("warning", "git_dirty", _reason),
    "git_unavailable": ("warning", "git_unavailable", _reason),
    "git_commit_failed": ("warning", "git_commit_failed", _reason),
    "git_stale_lock_removed": ("warning", "git_stale_lock", _reason),
    "git_secret_withheld": ("warning", "git_secret_withheld", _reason),
    # isolation: what harnessc would not do in an agent's checkout (worktree/worktrees.py)
    "worktree_not_brought": ("warning", "worktree_not_brought", _reason),
    "exploration_rejected": ("warning", "exploration_rejected", _reason),
    # the shared git directory (worktree/tripwire.py): changed while agents ran, or by someone else
    "git_tampered": ("critical", "git_tampered", _reason),
    "git_changed": ("warning", "git_changed", _reason),
    "telemetry_failed": ("warning", "telemetry", _reason),
    "run_finished": ("info", "run_finished", lambda ev: f"run {ev.get('status')}: {_reason(ev)}"),
}


class Alerts:
    """Turns the run's events into alerts (see the module docstring)."""

    def __init__(self, workspace: Workspace, store, config: Any, budget, max_iterations: Callable[[str], int | None],
                 pause: Callable[[str], None]):
        self.workspace, self.store, self.budget = workspace, store, budget
        self.cfg = config  # compiler.ir.Loop
        self.max_iterations = max_iterations  # task id -> its limit (None: unlimited)
        self.pause = pause
        self.started: dict[str, float] = {}  # task -> its attempt in flight's start (event ts)
        self.iteration: dict[str, int] = {}
        self.fast: dict[str, int] = defaultdict(int)  # task -> fast iterations without a result in a row
        self.tokens: dict[str, list[int]] = defaultdict(list)  # task -> its iterations' tokens (the last 50)
        self.spiking: set[str] = set()  # tasks whose last iteration was a token spike
        self.stuck_at: dict[str, int | None] = {}  # task -> the iteration its last stuck alert was about
        self.raised: set[tuple[str, str | None]] = set()  # (kind, task) raised once per run
        self.budget_step = 0

    def on_event(self, ev: dict) -> None:
        kind, task = ev["kind"], ev.get("task")
        if kind == "alert":
            return
        rule = RULES.get(kind)
        if rule:
            self.alert(rule[0], rule[1], task, rule[2](ev))
        elif kind == "assist" and ev.get("status") == "fallback":
            self.alert("warning", "assist_fallback", task,
                       f"{ev.get('agent')} did not write the {ev.get('purpose')} ({_reason(ev)}): the built-in one is used")
        elif kind == "stuck" or (kind == "attempt_finished" and ev.get("status") == "stuck"):
            self._stuck(task, _reason(ev) or "; ".join(ev.get("errors") or []) or "the same output again, with no claim")
        if kind == "attempt_started":
            self.started[task], self.iteration[task] = ev["ts"], ev["iteration"]
            self._milestone(task, ev["iteration"])
        elif kind == "attempt_finished":
            self._runaway(task, ev)
            self._budget()
        elif kind == "budget_exhausted":
            self._budget(exhausted=_reason(ev))

    # ------------------------------------------------------------------ the checks

    def _milestone(self, task: str, n: int) -> None:
        every = self.cfg.alerts.milestone_every
        if every and n % every == 0:
            self.alert("info", "milestone", task, f"iteration {n}")
        warn = self.cfg.runaway.max_iterations_warning
        if n > warn and self.max_iterations(task) is None:
            self.once("warning", "no_iteration_limit", task,
                      f"iteration {n} with no max_iterations set (warning past {warn})")

    def _stuck(self, task: str, why: str) -> None:
        """One alert per stuck iteration, whether a `stuck` event or the stuck attempt told it."""
        at = self.iteration.get(task)
        if self.stuck_at.get(task, -1) != at:
            self.stuck_at[task] = at
            self.alert("warning", "stuck", task, f"stuck: {why}")

    def _runaway(self, task: str, ev: dict) -> None:
        """A runaway sign: iterations ending fast without a result and without progress (a
        fast agent whose iterations score as progress is doing work); and token spikes."""
        start = self.started.pop(task, None)
        floor = float(self.cfg.runaway.min_iteration_duration or 0)
        empty = ev.get("status") in ("progress", "stuck", "rejected") and not ev.get("progressed")
        if start is not None and floor > 0 and empty:
            took = ev["ts"] - start
            self.fast[task] = self.fast[task] + 1 if took < floor else 0
            if self.fast[task] >= FAST_IN_A_ROW:
                self.once("critical", "runaway_fast", task,
                          f"{FAST_IN_A_ROW} iterations in a row without a result or progress, each under "
                          f"{floor:g}s (min_iteration_duration): the agent may not be doing any work")
        elif ev.get("status") not in ("error", "interrupted"):
            self.fast[task] = 0
        tokens = int(ev.get("tokens") or 0)
        seen = self.tokens[task]
        if tokens and len(seen) >= SPIKE_AFTER:
            median = statistics.median(seen)
            spike = bool(median) and tokens > self.cfg.runaway.token_spike * median
            if not spike:
                self.spiking.discard(task)
            elif task not in self.spiking:  # once per run of spiking iterations
                self.spiking.add(task)
                self.alert("warning", "token_spike", task,
                           f"iteration {self.iteration.get(task, '?')} used {tokens} tokens, "
                           f"{tokens / median:.1f}x the task's median ({median:g})")
        if tokens:
            seen.append(tokens)
            del seen[:-50]

    def _budget(self, exhausted: str | None = None) -> None:
        limit = self.budget.run_limit
        if not limit:
            return
        # what calls cost, not what calls in flight reserved (an estimate, often far above the
        # real cost: counting it said '80% used' of a budget less than half spent)
        spent = self.store.settled_spent()
        for i, (step, level) in enumerate(BUDGET_STEPS):
            reached = spent >= step * limit or (exhausted is not None and step == 1.0)
            if i >= self.budget_step and reached:
                self.budget_step = i + 1
                self.alert(level, "budget", None, exhausted if step == 1.0 and exhausted else
                           f"{step:.0%} of the run budget used (${spent:.4f} of ${limit:g})")

    # ------------------------------------------------------------------ raising

    def once(self, level: str, kind: str, task: str | None, message: str) -> None:
        if (kind, task) not in self.raised:
            self.raised.add((kind, task))
            self.alert(level, kind, task, message)

    def alert(self, level: str, kind: str, task: str | None, message: str) -> None:
        line = {"ts": round(clock.time(), 3), "level": level, "kind": kind, "task": task, "message": message,
                "run_id": self.store.run_id}
        try:
            with self.workspace.open_write(self.workspace.alerts_log, "a") as f:
                f.write(self.store.redact(json_text(line, ensure_ascii=False)) + "\n")  # `tail -f`-safe
        except (WorkspaceError, OSError) as e:  # the event still tells it
            message = f"{message} (not written to alerts.log: {e})"
        self.store.event("alert", task, level=level, alert=kind, message=message)
        if level == "critical" and self.cfg.alerts.pause_on_critical:
            self.pause(f"critical alert: {message}")
